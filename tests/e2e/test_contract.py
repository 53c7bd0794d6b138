"""Every lesson of course.yml keeps its contract, checked by `grader selftest` (one
graded class per lesson: solution, stub, known mistakes, correct variants): the one
end-to-end contract test, shared by all lessons instead of a copy per lesson."""
from pathlib import Path

import pytest

from grader import config
from grader.judge.reference import load_mistakes
from grader.author.selftest import default_correct, selftest
from grader.author.selftest.findings import CHECKS, OK

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(config.load(ROOT / "course.yml").lessons)
_FOUND: dict[str, list] = {}


def findings(course: config.Course, key: str) -> list:
    """The lesson's selftest, run once per test session."""
    if key not in _FOUND:
        _FOUND[key] = selftest(course, key, default_correct(course, key), jobs=2)
    return _FOUND[key]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_keeps_its_contract(course, lesson, check):
    mine = [f for f in findings(course, lesson) if f.check == check]
    assert not [f for f in mine if f.failed], "\n".join(
        f"{f.subject}: {f.message}" for f in mine if f.failed)
    if check != "correct" or default_correct(course, lesson):  # correct variants: optional
        assert any(f.status == OK for f in mine), f"nothing was checked for {check}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_mistake_and_variant_was_graded(course, lesson):
    """One finding per known mistake and per correct variant: none skipped silently."""
    tests = course.path(course.lesson(lesson).tests)
    graded = [f.subject for f in findings(course, lesson) if f.check == "mistakes"]
    assert graded == [m.id for m in load_mistakes(tests / "mistakes.yml")]
    folder = default_correct(course, lesson)
    variants = sorted(p.stem for p in folder.glob("*.py")) if folder else []
    assert [f.subject for f in findings(course, lesson) if f.check == "correct"] == variants

