"""Mistake titles and hints render as written: in the terminal (`grader check` prints
them through rich, which would read "[cos, cos]" as markup and drop it) and in the
HTML page (autoescaped: "<" stays text). Each is rendered in every language."""
from __future__ import annotations

import io

from jinja2 import Environment
from markupsafe import escape
from rich.console import Console

from grader.run.practice_output import outcome, print_outcome
from grader.config import Course
from grader.pages.feedback import STRINGS, clean, render_student, templates
from grader.record import GRADED, Diagnosis, GradeRecord, PartRecord, TestRecord
from grader.judge.reference import Mistake
from grader.author.selftest.findings import Finding, failed, ok


def record_naming(m: Mistake) -> GradeRecord:
    """The smallest graded record whose part `m.part` is diagnosed as `m`."""
    diagnosis = Diagnosis(m.id, m.title, m.hint)
    test = TestRecord(name="test_case", part=m.part, practice=False, outcome="failed",
                      message="differs", diagnosis=diagnosis, max_score=1.0)
    return GradeRecord(student_id="selftest", lesson="", status=GRADED, score=0.0,
                       max_score=1.0, tests=[test],
                       parts={m.part: PartRecord(0.0, 1.0, 0, 1, diagnosis)})


def terminal(record: GradeRecord, course: Course, key: str, language: str) -> str:
    """What `grader check` prints for `record`, in `language`, one line per text."""
    out = io.StringIO()
    shown = course.model_copy(update={"language": language})
    print_outcome(record, outcome(record, shown, key, []), shown, key,
                Console(file=out, width=100_000, highlight=False, color_system=None))
    return out.getvalue()


def _problems(m: Mistake, course: Course, key: str, language: str,
              pages: Environment) -> list[str]:
    record = record_naming(m)
    printed = terminal(record, course, key, language)
    page = render_student(record, course, key, language, pages)
    problems = []
    for what, text in (("title", m.title[language]), ("hint", m.hint[language])):
        if clean(text) != text:
            problems.append(f"{what} ({language}) has control characters")
        elif text not in printed:
            problems.append(f"{what} ({language}) prints altered in the terminal")
        elif str(escape(text)) not in page:
            problems.append(f"{what} ({language}) is not shown escaped in the HTML page")
    return problems


def inspect(course: Course, key: str, mistakes: list[Mistake]) -> list[Finding]:
    found, pages = [], templates()
    for m in mistakes:
        problems = [p for lang in STRINGS for p in _problems(m, course, key, lang, pages)]
        found.append(failed("hints", m.id, "; ".join(problems)) if problems
                     else ok("hints", m.id, "title and hint render as written"))
    return found
