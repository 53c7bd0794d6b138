"""The smallest failing example (issue 26): found for every known mistake of lesson 13
on a fresh input, as small as the candidates go, and its snippet, run against the
reference and against the mistaken code, prints exactly the numbers it shows."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from grader import config, smallest
from grader.context import LessonContext
from grader.reference import load_module

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def refs():
    return LessonContext(config.load(ROOT / "course.yml"), "13").refs


@pytest.fixture(scope="module")
def lesson():
    return smallest.load(ROOT / "hidden_tests" / "13_moe")


def _run(snippet: str, module: types.ModuleType) -> list:
    """The snippet as a student runs it, next to `module` as their 13_moe.py; what it
    prints, as objects."""
    printed: list = []
    sys.modules["13_moe"] = module
    try:
        exec(compile(snippet, "snippet.py", "exec"),
             {"print": lambda *a: printed.extend(a), "__name__": "__main__"})
    finally:
        del sys.modules["13_moe"]
    return printed


def _as_shown(lesson: types.ModuleType, part: str, printed: list) -> list:
    if part == "router":  # route's tuple, top-k compared as sets as the example is
        out = lesson.canonical(dict(zip(("scores", "topk_weight", "topk_idx"), printed[0])))
        return [out["scores"], out["topk_weight"], out["topk_idx"]]
    return printed


def test_every_known_mistake_gets_a_smallest_example_whose_snippet_runs(refs, lesson):
    solution = load_module("_smallest_solution", refs.source, "solution")
    found = 0
    for v in refs.variants:
        ex = smallest.smallest(lesson, v.mistake.part, v.caller, refs.reference)
        assert ex is not None, v.mistake.id
        assert all(t.dtype == torch.float64 for t in ex.reference.values()
                   if isinstance(t, torch.Tensor) and t.is_floating_point())
        text = smallest.snippet(lesson, ex)
        for module, want in ((solution, ex.reference), (v.caller.module, ex.student)):
            if "error" in want:
                continue
            got = _as_shown(lesson, ex.part, _run(text, module))
            shown = [want[o] for o in ex.outputs]
            assert len(got) == len(shown), v.mistake.id
            for g, w in zip(got, shown):
                assert g.dtype == w.dtype and torch.allclose(
                    g.detach(), w, rtol=0, atol=0, equal_nan=True), (v.mistake.id, g, w)
            for o in ex.outputs:  # the numbers the snippet's comments show are these
                assert smallest.literal(want[o]) in text
        found += 1
    assert found == len(refs.variants)


def test_nothing_smaller_tells_them_apart(refs, lesson):
    """The example is the first candidate that differs: every smaller one agrees."""
    v = next(v for v in refs.variants if v.mistake.id == "overwrite")
    ex = smallest.smallest(lesson, "dispatch", v.caller, refs.reference)
    assert ex.sizes["K"] == 2 and ex.sizes["N"] == 1 and ex.sizes["H"] == 1
    probe, names, make, outputs = lesson.PARTS["dispatch"]
    for sizes in smallest.candidates(names, lesson.ONE, lesson.HIGH):
        if sizes == ex.sizes:
            break
        args = make(sizes)
        if args is not None:
            got, ref = v.caller.call(probe, **args), refs.reference.call(probe, **args)
            assert not smallest.differs(got["y"], ref["y"]), sizes


def test_a_correct_layer_has_no_example(refs, lesson):
    assert smallest.smallest(lesson, "moe", refs.reference.twin(),
                             refs.reference) is None
