"""The smallest failing example of a part: a fresh input, never a graded case, as
small as it can be while the student's function still differs from the reference, in
float64, shown as a snippet the student can paste and run.

What is tried is the lesson's: its tests folder's `examples.py` (`load`) names, per
part, the probe, the sizes and the lowest and highest of each, a maker of the probe's
arguments from sizes, the outputs compared, and the snippet's lines calling the
student's function; optionally `TOLERANCES` ((part, output) -> dtype name -> (atol,
rtol)) where correct code may differ from the reference by more than float64's rounding
(a softmax or a count the reference rounds to float32, a float16 input); optionally
`GRADIENTS` (part -> {the probe's gradient output: what the snippet prints}) for a part
whose snippet calls backward, so that a mistake only its gradients show (a `.detach()`)
gets an example too, and `GRADIENTS_FROM` (part -> the least sizes of such an example);
and, for a student's file that imports what only the grader has (an assembly lesson's
`model_parts`), `IMPORTS` (more of the standard library), `PRELUDE` (lines run before the
student's file is imported) and `LOAD` (its own `load`). This module holds the search,
the seeds, the comparison and the literals; a lesson without that file shows no
example.

`smallest(lesson, part, student, reference)` tries candidate sizes from the smallest
up and returns the first on which the two differ, as an `Example`. `student` and
`reference` are callers with the probes' `call(probe, **args)`: the student's runs
only in the sandbox (the run's session), the reference's on the trusted side. Inputs
come from seeds no graded or practice case uses (`SEED`), so the reference's numbers
shown belong only to this fresh input.

`Example` is plain data on purpose: the line-of-divergence tracer runs on it first
(grader/judge/divergence/), so the line a page names and the values it quotes belong to
the snippet beside it.
"""
from __future__ import annotations

import itertools
import math
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.config import DEFAULT_TOLERANCES
from grader.judge.closeness import near
from grader.judge.reference import lesson_file
from grader.lesson import seeds
from grader.sandbox.limits import StudentError
from grader.text.strings import Said

SEED = seeds.EXAMPLES  # fresh inputs: far from every graded and practice seed
# float64's tolerance, as the checks have it (correct re-orderings differ by ~1e-15)
ATOL, RTOL = DEFAULT_TOLERANCES["float64"].atol, DEFAULT_TOLERANCES["float64"].rtol
MAX_TRIES = 40        # candidates tried per part: a bound on the student's extra calls
FILE = "examples.py"  # in a lesson's tests folder; a student bundle ships it (grader/deliver/bundle.py)


@dataclass
class Example:
    """One fresh input on which the student's function differs from the reference.

    part: the lesson's part; probe: the probe function called; args: the probe's
    arguments (tensors in float64, sizes); sizes: the candidate's sizes by name;
    reference and student: each side's outputs (name -> tensor) for the names in
    `outputs`; snippet: its text for the page.
    """

    part: str
    probe: str
    args: dict
    sizes: dict
    outputs: list[str]
    reference: dict = field(default_factory=dict)
    student: dict = field(default_factory=dict)
    snippet: str = ""  # what the page shows (`snippet`), once the example is chosen


def load(tests: Path) -> types.ModuleType | None:
    """The lesson's examples module from its tests folder, or None when it has none."""
    return lesson_file(Path(tests), FILE)


def generator(*key: int) -> torch.Generator:
    """A generator for one candidate, seeded from `key` far from every test's seed."""
    return torch.Generator().manual_seed(SEED + hash(key) % 1_000_000)


def rounded(g: torch.Generator, *shape: int) -> torch.Tensor:
    """Normal values rounded to two decimals: literals a student can read, exact in
    the snippet."""
    return torch.round(torch.randn(*shape, generator=g, dtype=torch.float64) * 100) / 100


def candidates(names: tuple[str, ...], low: dict, high: dict) -> Iterator[dict]:
    """Sizes in order of their sum (smallest first), each within [low, high]."""
    ranges = [range(low[n], high[n] + 1) for n in names]
    for sizes in sorted(itertools.product(*ranges), key=lambda s: (sum(s), s)):
        yield dict(zip(names, sizes))


def differs(got: object, ref: object, atol: float = ATOL, rtol: float = RTOL) -> bool:
    """One output of the two sides, as the checks compare it: tensors by shape, dtype
    and values (float64 tolerances unless others are given), anything else (a list of
    shapes) by equality."""
    if not isinstance(ref, torch.Tensor):
        return isinstance(got, torch.Tensor) or got != ref
    if not isinstance(got, torch.Tensor):
        return True
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return True
    if not ref.is_floating_point():
        return not torch.equal(got, ref)
    # the checks' rule (closeness.py), in float64 as the checks compute it
    return not bool(near(got.detach().double().numpy(), ref.detach().double().numpy(), atol,
                         rtol).all())


def tolerance(lesson: types.ModuleType, part: str, output: str,
              ref: object) -> tuple[float, float]:
    """(atol, rtol) for one output of `part`: the lesson's for the reference's dtype
    where it names one, else float64's."""
    by_dtype = getattr(lesson, "TOLERANCES", {}).get((part, output), {})
    dtype = str(ref.dtype).removeprefix("torch.") if isinstance(ref, torch.Tensor) else ""
    return by_dtype.get(dtype, (ATOL, RTOL))


def tried(lesson: types.ModuleType, part: str) -> Iterator[tuple[dict, dict]]:
    """The candidates of `part` the search may try, smallest first: (sizes, the probe's
    arguments), MAX_TRIES of them. A candidate its maker declines (K > E, a near-tie)
    costs no call, so it is not counted: counted, they used up a routing's tries
    before any with two tokens and K = 2, where tokens can be mixed up. The same
    every time: a recording can hold the reference's side."""
    probe, names, make, outputs = lesson.PARTS[part]
    made = ((sizes, make(sizes)) for sizes in candidates(names, lesson.ONE, lesson.HIGH))
    yield from itertools.islice(((s, a) for s, a in made if a is not None), MAX_TRIES)


def requests(tests: Path) -> Iterator[tuple[str, str, dict]]:
    """Every (part, probe, arguments) the search may ask the reference, for a recording;
    none for a lesson without examples."""
    lesson = load(Path(tests))
    if lesson is None:
        return
    for part, (probe, *_) in lesson.PARTS.items():
        for _, args in tried(lesson, part):
            yield part, probe, args


def gradients(lesson: types.ModuleType, part: str) -> dict[str, str]:
    """The gradients of `part` its example may show (the lesson's `GRADIENTS`): the
    probe's output -> what the snippet prints (`scores_grad` -> `scores.grad`)."""
    return getattr(lesson, "GRADIENTS", {}).get(part, {})


def label(lesson: types.ModuleType, part: str, output: str) -> str:
    """An output as the snippet's comments name it: a gradient as the snippet prints it."""
    return gradients(lesson, part).get(output, output)


def smallest(lesson: types.ModuleType, part: str, student, reference) -> Example | None:
    """The smallest fresh input on which `student` differs from `reference` in `part`,
    or None when none of the candidates tells them apart (or the part is unknown).
    The student's call raising counts as differing (its error is the student's).
    Where every candidate's outputs agree, the smallest on which a gradient the lesson
    names differs (a `.detach()`: a gradient-only mistake), with its gradients among
    the outputs shown; an output differing always comes first."""
    if part not in lesson.PARTS:
        return None
    probe, names, make, outputs = lesson.PARTS[part]
    canonical = getattr(lesson, "canonical", lambda out: out)
    backward: Example | None = None
    least = getattr(lesson, "GRADIENTS_FROM", {}).get(part, {})  # a gradient example's sizes
    shown = [*outputs, *gradients(lesson, part)]
    for sizes, args in tried(lesson, part):
        ref = canonical(reference.call(probe, **args))
        try:
            got = canonical(student.call(probe, **args))
        except Exception as exc:  # noqa: BLE001 - the student's error, shown as such
            said = str(exc) if isinstance(exc, StudentError) else f"{type(exc).__name__}: {exc}"
            if isinstance(exc, StudentError) and isinstance(exc.message, Said):
                said = Said({k: v[:300] for k, v in exc.message.texts.items()})  # the grader's
            got = {"error": said if isinstance(said, Said) else said[:300]}  # a StudentError's
            #                                         message names the student's type
        if "error" in got or any(differs(got.get(o), ref.get(o),
                                         *tolerance(lesson, part, o, ref.get(o)))
                                 for o in outputs):
            return Example(part, probe, args, sizes, outputs,
                           {o: ref.get(o) for o in outputs},
                           {o: got.get(o) for o in outputs} if "error" not in got
                           else {"error": got["error"]})
        large = all(sizes[n] >= v for n, v in least.items())
        if backward is None and large and any(
                differs(got.get(o), ref.get(o), *tolerance(lesson, part, o, ref.get(o)))
                for o in shown[len(outputs):]):
            backward = Example(part, probe, args, sizes, shown, {o: ref.get(o) for o in shown},
                               {o: got.get(o) for o in shown})
    return backward


# ---- the snippet ---------------------------------------------------------------------

def literal(t: torch.Tensor) -> str:
    """A tensor as a `torch.tensor(...)` literal that rebuilds it exactly."""
    if t.is_floating_point():
        values = _nested(t.tolist(), lambda v: repr(float(v)) if math.isfinite(v)
                         else f"float('{v}')")
        return f"torch.tensor({values}, dtype=torch.{str(t.dtype).removeprefix('torch.')})"
    return f"torch.tensor({_nested(t.tolist(), str)})"


def _nested(v, fmt) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_nested(x, fmt) for x in v) + "]"
    return fmt(v)


def _shown(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return literal(value.detach())
    return repr(value)


# How the grader loads a layer (grader/inside/probekit.load): the reference's weights by name,
# and fixed non-zero values for whatever else the layer holds (a bias, a shared expert).
LOAD = [
    "def load(module, state):",
    "    with torch.no_grad():",
    "        for name, p in [*module.named_parameters(), *module.named_buffers()]:",
    "            if name in state:",
    "                p.copy_(state[name])",
    "            elif p.is_floating_point():  # as the grader fills what the reference lacks",
    "                g = torch.Generator().manual_seed(zlib.crc32(name.encode()))",
    "                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)",
]


def snippet(lesson: types.ModuleType, example: Example) -> str:
    """Python the student pastes next to their file and runs: their output and the
    reference's as comments first (the loading code after them is long), then the
    inputs and weights as literals and the call. Where theirs is an error the grader
    said (a timeout, a crash), it is Said: the snippet in each language (its other
    comments are put in the page's at render)."""
    error = example.student.get("error")
    if isinstance(error, Said):
        return Said({lang: _snippet(lesson, example, text)
                     for lang, text in error.texts.items()})
    return _snippet(lesson, example, error)


def _snippet(lesson: types.ModuleType, example: Example, error: str | None) -> str:
    lines = ["# yours gives:"]
    if error is not None:
        lines += [f"#   {error}"]
    else:
        lines += [f"#   {label(lesson, example.part, o)} = {_shown(example.student.get(o))}"
                  for o in example.outputs]
    lines += ["# the reference gives:"]
    lines += [f"#   {label(lesson, example.part, o)} = {_shown(example.reference.get(o))}"
              for o in example.outputs]
    loads = example.part in getattr(lesson, "LOADS", ())
    # the standard library's modules, then torch (after a blank line where there are two)
    standard = sorted({"importlib", *getattr(lesson, "IMPORTS", ()), *(["zlib"] if loads else [])})
    code = [*(f"import {name}" for name in standard), *([""] if len(standard) > 1 else []),
            "import torch", "",
            "torch.set_printoptions(precision=17)  # every digit, as in the comments above",
            *getattr(lesson, "PRELUDE", ()),
            f'm = importlib.import_module("{lesson.MODULE}")']
    if loads:
        code += ["", *getattr(lesson, "LOAD", LOAD), "", "state = {"]
        code += [f"    {k!r}: {literal(v)}," for k, v in example.args["state"].items()]
        code += ["}"]
    return "\n".join([*lines, "", *code, *lesson.lines(example)]) + "\n"


def examples(tests: Path, probes: object, failing: list[str], student,
             reference) -> dict[str, Example]:
    """Per failing part, its smallest example, its snippet filled in (none where no
    candidate tells the two apart, and none at all for a lesson whose tests folder has
    no examples or whose probes lack one it names). The student's calls go through the
    run's session: its limits hold, and an error there ends the search."""
    lesson = load(Path(tests))
    if lesson is None or not all(hasattr(probes, p[0]) for p in lesson.PARTS.values()):
        return {}
    out: dict[str, Example] = {}
    for part in failing:
        example = smallest(lesson, part, student, reference)
        if example is not None:
            example.snippet = snippet(lesson, example)
            out[part] = example
    return out
