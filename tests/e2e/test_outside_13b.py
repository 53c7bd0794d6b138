"""Code nobody here wrote, graded as lesson 13b submissions (issue 57).

- tests/fixtures/lesson13b/outside/hf_qwen3.py: the installed transformers' Qwen3
  attention, decoder layer and model (MiniMind's computation), wrapped into the
  lesson's calling convention; full marks.
- MiniMind upstream's model_minimind.py (jingyaogong/minimind at d65ef2c, Apache-2.0),
  with upstream_adapter.py.txt appended (constructors taking the lesson's config, the
  model's lm_head): full marks. Upstream's file is not kept in this repository (code
  fetched from elsewhere is not committed here): point MINIMIND_UPSTREAM at a copy of
  that commit's model/model_minimind.py (its SHA-256 is checked) to run it; without
  it the test is skipped and says so.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from grader.judge import runner
from grader.judge.context import LessonContext

from ..conftest import open_slot

OUTSIDE = Path(__file__).resolve().parents[1] / "fixtures" / "lesson13b" / "outside"
UPSTREAM_SHA256 = "47f124f5f386a8cd76b488b36ecc3e00fc43e3894cdb3ba602420188d9ba8860"
FULL = {"self_attn": 4.0, "block": 3.0, "model": 3.0, "own": 1.0}


def _upstream() -> str | None:
    path = os.environ.get("MINIMIND_UPSTREAM")
    if not path:
        return None
    data = Path(path).read_bytes()
    assert hashlib.sha256(data).hexdigest() == UPSTREAM_SHA256, \
        f"{path} is not model_minimind.py at d65ef2c"
    return data.decode() + (OUTSIDE / "upstream_adapter.py.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def graded(far_course, tmp_path_factory) -> dict:
    from grader import config

    course = config.load(far_course)
    sources = {"hf_qwen3": (OUTSIDE / "hf_qwen3.py").read_text(encoding="utf-8")}
    if (upstream := _upstream()) is not None:
        sources["minimind_upstream"] = upstream
    subs = []
    for name, text in sources.items():
        folder = tmp_path_factory.mktemp(name)
        (folder / "13b_assembly.py").write_text(text, encoding="utf-8")
        subs.append(runner.Submission(name, folder / "13b_assembly.py"))
    slot = open_slot(course, "13b")
    out: dict = {}
    try:
        runner.grade_many(LessonContext(course, "13b"), subs, slot,
                          lambda r: out.__setitem__(r.student_id, r))
    finally:
        slot.close()
    return out


@pytest.mark.parametrize("name", ["hf_qwen3", "minimind_upstream"])
def test_outside_code_of_minimind_s_computation_scores_full_marks(graded, name):
    if name not in graded:
        pytest.skip("MINIMIND_UPSTREAM names no copy of upstream's model_minimind.py")
    record = graded[name]
    assert record.status == "graded", record.problem
    failing = [(t.name, t.message[:200]) for t in record.tests if not t.passed]
    assert {p: v.score for p, v in record.parts.items()} == FULL, failing
