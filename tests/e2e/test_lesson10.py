"""The second lesson (RMSNorm) proves the harness is lesson-agnostic: it is only
course.yml entries, a solution with markers, probes, hidden tests and mistakes."""
import re
from pathlib import Path

import pytest

from grader import runner
from grader.reference import load_mistakes
from grader.release import make_stub
from tests.conftest import open_slot

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "10_rmsnorm.py"
MISTAKES = load_mistakes(ROOT / "hidden_tests" / "10_rmsnorm" / "mistakes.yml")


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("rms")
    files = {"solution": SOLUTION, "stub": ROOT / "exercises" / "10_rmsnorm.py"}
    for m in MISTAKES:
        files[m.id] = tmp / f"{m.id}.py"
        files[m.id].write_text(m.apply(SOLUTION.read_text()))
    out: dict[str, dict] = {}
    slot = open_slot(course, "10")
    try:
        runner.grade_many(course, "10", [runner.Submission(k, v) for k, v in files.items()],
                          slot, lambda r: out.__setitem__(r["student_id"], r))
    finally:
        slot.close()
    return out


def test_solution_full_marks_stub_zero(graded):
    assert graded["solution"]["score"] == graded["solution"]["max_score"] == 2.0
    assert graded["stub"]["score"] == 0.0
    assert all("not implemented" in t["message"] for t in graded["stub"]["tests"])


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_mistakes_lose_points_and_are_named(graded, mistake):
    r = graded[mistake.id]
    assert r["score"] < r["max_score"]
    assert r["parts"]["norm"]["diagnosis"]["id"] == mistake.id


def test_stub_is_generated():
    assert make_stub(SOLUTION.read_text()) == (ROOT / "exercises" / "10_rmsnorm.py").read_text()


def test_grader_package_names_no_lesson():
    """Nothing under grader/ knows lesson 13's parts or API."""
    words = re.compile(r"\b(13_moe|MOEFeedForward|FeedForward|route|dispatch|"
                       r"load_balancing_loss|aux_loss|RMSNorm)\b")
    for path in (ROOT / "grader").rglob("*.py"):
        code = path.read_text(encoding="utf-8")
        hits = [line for line in code.splitlines()
                if words.search(line) and "e.g." not in line]
        assert not hits, (path, hits)
