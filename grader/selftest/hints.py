"""Mistake titles and hints render as written: in the terminal (`grader check` prints
them through rich, which would read "[cos, cos]" as markup and drop it) and in the
HTML page (autoescaped: "<" stays text). Each is rendered in every language."""
from __future__ import annotations

import io

from markupsafe import escape
from rich.console import Console

from grader.config import Course
from grader.feedback import STRINGS, clean, render_student
from grader.reference import Mistake
from grader.selftest.findings import Finding, failed, ok


def record_naming(m: Mistake) -> dict:
    """The smallest graded record whose part `m.part` is diagnosed as `m`."""
    diagnosis = {"id": m.id, "title": m.title, "hint": m.hint}
    test = {"name": "test_case", "part": m.part, "practice": False, "outcome": "failed",
            "message": "differs", "checks": [], "error": None, "diagnosis": diagnosis,
            "max_abs_diff": None, "pictures": [], "score": 0.0, "max_score": 1.0}
    return {"student_id": "selftest", "status": "graded", "problem": "", "output": "",
            "score": 0.0, "max_score": 1.0, "tests": [test],
            "parts": {m.part: {"score": 0.0, "max_score": 1.0, "passed": 0, "tests": 1,
                               "diagnosis": diagnosis}}}


def terminal(record: dict, course: Course, key: str, language: str) -> str:
    """What `grader check` prints for `record`, in `language`, one line per text."""
    from grader.cli import _print_check

    out = io.StringIO()
    shown = course.model_copy(update={"language": language})
    _print_check(record, shown, key, Console(file=out, width=100_000, highlight=False,
                                             color_system=None))
    return out.getvalue()


def _problems(m: Mistake, course: Course, key: str, language: str) -> list[str]:
    record = record_naming(m)
    printed = terminal(record, course, key, language)
    page = render_student(record, course, key, language)
    problems = []
    for what, text in (("title", m.title[language]), ("hint", m.hint[language])):
        if clean(text) != text:
            problems.append(f"{what} ({language}) has control characters")
        elif text not in printed:
            problems.append(f"{what} ({language}) prints altered in the terminal")
        elif str(escape(text)) not in page:
            problems.append(f"{what} ({language}) is not shown escaped in the HTML page")
    return problems


def check(course: Course, key: str, mistakes: list[Mistake]) -> list[Finding]:
    found = []
    for m in mistakes:
        problems = [p for lang in STRINGS for p in _problems(m, course, key, lang)]
        found.append(failed("hints", m.id, "; ".join(problems)) if problems
                     else ok("hints", m.id, "title and hint render as written"))
    return found
