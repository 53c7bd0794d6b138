"""`grader selftest --lesson KEY`: a lesson's contract, checked in one command.

In the manner of Otter-Grader's solution check, extended to what this grader
promises: no `TODO(new-lesson)` of a skeleton is left; the solution scores full
marks and the stub zero; every known mistake loses points in its own part only and
is named there (one that raises, or that the tests can't tell from another, is
listed as such); each correct variant scores full marks with no diagnosis, and so do
the solution's higher-precision variants (precision is not a mistake); part, module
and exercise names are the lesson's alone; no solution line reaches students; hints
render as written in the terminal and the HTML. Everything graded is graded as one
class, through the same path as `grader run`.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from grader.config import Course
from grader.judge.reference import load_mistakes
from grader.author.selftest import graded, hints, leaks, names, precision, todos
from grader.author.selftest.findings import CHECKS, SKIPPED, Finding, failed

def default_correct(course: Course, key: str) -> Path | None:
    """The lesson's correct variants, where course.yml names them (`correct`): the
    course's, so an installed grader has them as the project's checkout does."""
    folder = course.lesson(key).correct
    return course.path(folder) if folder is not None else None


def static(course: Course, key: str) -> list[Finding]:
    """The checks that grade nothing (a second or so)."""
    mistakes = load_mistakes(course.path(course.lesson(key).tests) / "mistakes.yml")
    return [*todos.inspect(course, key), *names.inspect(course, key),
            *leaks.inspect(course, key, mistakes),
            *hints.inspect(course, key, mistakes), leaks.stub_current(course, key)]


def grading(course: Course, key: str, correct: Path | None, out: Path,
            jobs: int) -> list[Finding]:
    """Grade the solution, the stub, the mistakes and the correct variants as a class."""
    mistakes = load_mistakes(course.path(course.lesson(key).tests) / "mistakes.yml")
    variants = sorted(correct.glob("*.py")) if correct else []
    files = graded.write_class(course, key, mistakes, variants, out / "submissions")
    try:
        records = graded.grade(course, key, files, out / "graded", jobs)
    except RuntimeError as exc:  # the self-check refuses a solution that fails its tests
        return [failed("solution", graded.SOLUTION, str(exc)),
                *(Finding(c, "", SKIPPED, "not graded: the solution must pass first")
                  for c in ("stub", "mistakes", "correct"))]
    return [graded.solution(records[graded.SOLUTION]), graded.practice(course, key),
            *precision.inspect(course, key),
            graded.stub(records[graded.STUB]),
            *(graded.mistake(m, records[graded.mistake_id(m)]) for m in mistakes),
            *(graded.correct(p.stem, records[graded.variant_id(p)]) for p in variants)]


def selftest(course: Course, key: str, correct: Path | None = None, jobs: int = 2,
             out: Path | None = None) -> list[Finding]:
    """Every finding, in CHECKS order; the graded class goes to `out` (or a temp dir)."""
    course.lesson(key)
    with tempfile.TemporaryDirectory(prefix="selftest-") as tmp:
        found = static(course, key) + grading(course, key, correct, out or Path(tmp), jobs)
    return sorted(found, key=lambda f: CHECKS.index(f.check))
