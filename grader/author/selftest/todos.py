"""No `TODO(new-lesson)` left: `grader new-lesson` marks every place the instructor
must write something, and a lesson with one left grades nothing meaningful there."""
from __future__ import annotations

from pathlib import Path

from grader.config import Course
from grader.author.newlesson.templates import MARK
from grader.author.selftest.findings import Finding, failed, ok


def _places(course: Course, key: str) -> dict[str, str]:
    """The lesson's files by the name to report, each with its text, and its example
    class's README (the expected scores)."""
    lesson = course.lesson(key)
    texts = {str(lesson.solution): course.solution(lesson).read_text(encoding="utf-8")}
    if lesson.submissions is not None:
        examples = course.path(lesson.submissions) / "README.md"
        if examples.is_file():
            texts[str(lesson.submissions / "README.md")] = examples.read_text(encoding="utf-8")
    tests: Path = course.path(lesson.tests)
    for f in sorted(tests.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            texts[str(lesson.tests / f.relative_to(tests))] = f.read_text(
                encoding="utf-8", errors="replace")
    return texts


def _titles(course: Course, key: str) -> list[str]:
    """The course.yml keys of the lesson's titles that still hold the mark."""
    lesson = course.lesson(key)
    titles = {f"lessons.{key}.title": lesson.title,
              **{f"lessons.{key}.parts.{name}.title": part.title
                 for name, part in lesson.parts.items()}}
    return [where for where, text in titles.items() if MARK in text]


def inspect(course: Course, key: str) -> list[Finding]:
    found = []
    for name, text in _places(course, key).items():
        lines = [n for n, line in enumerate(text.splitlines(), start=1) if MARK in line]
        if lines:
            found.append(failed("todos", name, f"{len(lines)} {MARK} left, line(s) "
                                + ", ".join(map(str, lines[:10]))))
    if titles := _titles(course, key):
        found.append(failed("todos", "course.yml", f"{len(titles)} {MARK} left, in "
                            + ", ".join(titles)))
    return found or [ok("todos", "", f"no {MARK} left")]
