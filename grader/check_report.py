"""What `grader check` tells a student about one record: per part, the practice tests
passed, the failing ones with their messages, and the likely mistake.

One summary serves both outputs (`grader check` prints it, `--json` writes it), so the
two never disagree; a test asserts the project's, the notebook's and the bundle's
checks give the same summary.
"""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from grader.config import Course
from grader.record import MISSING, UNREADABLE, GradeRecord, TestRecord

# Exit status of `grader check`, documented in docs/students.md
PASSED, FAILED, WRONG_INPUT, GRADER_FAILED = 0, 1, 2, 3
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
SYNTAX_HINT = ("Python could not read your file, so no test ran. The caret marks where "
               "it stopped; the mistake is often just before it (a missing comma, "
               "bracket, colon or quote, here or on the line above).")


def summary(record: GradeRecord, course: Course, lesson_key: str, notes: list[str]) -> dict:
    """The record as the student's report: every field plain JSON."""
    from grader.divergence import sentence
    from grader.feedback import STRINGS
    lesson = course.lesson(lesson_key)
    lang = course.language
    tests = record.tests
    parts = {}
    for name, part in record.parts.items():
        mine = [t for t in tests if t.part == name]  # practice: not in the counters
        diagnosis = part.diagnosis
        failing = any(not t.passed for t in mine)
        parts[name] = {
            "where": sentence(part.where, STRINGS[lang]) if failing else "",
            "title": lesson.parts[name].title,
            "passed": sum(t.passed for t in mine), "total": len(mine),
            "likely_mistake": {"id": diagnosis.id, "title": diagnosis.title[lang],
                               "hint": diagnosis.hint[lang]}
            if diagnosis and diagnosis.id else None,
            "tests": [{"name": t.name, "outcome": t.outcome, "message": t.message,
                       "traceback": (t.error or {}).get("traceback") or "",
                       "checks": [c for c in t.checks if not c.get("passed")]}
                      for t in mine]}
    return {"lesson": lesson_key, "status": record.status, "problem": record.problem,
            "syntax_error": _syntax_error(tests), "traceback": record.import_traceback,
            "notes": notes, "passed": sum(t.passed for t in tests), "total": len(tests),
            "parts": parts, "output": record.output}


def _syntax_error(tests: list[TestRecord]) -> bool:
    return any((t.error or {}).get("type") in SYNTAX_ERRORS for t in tests)


def exit_status(report: dict) -> int:
    """0: every practice test passed; 2: there was no file to grade (missing, unreadable,
    not a notebook); 1: otherwise (some test failed)."""
    if report["status"] in (MISSING, UNREADABLE):
        return WRONG_INPUT
    return PASSED if report["total"] and report["passed"] == report["total"] else FAILED


def print_check(record: GradeRecord, report: dict, course: Course, lesson_key: str,
                out: Console | None = None) -> None:
    """A record as `grader check` shows it, from its `summary` (on `out`: `grader
    selftest` reads it back). A file that could not be run (a syntax error, a failed
    import) is shown once, with its traceback, not again under every part."""
    from grader.feedback import STRINGS, lesson_stub, missing_from_stub

    out = out or Console(highlight=False)
    for note in (n for n in report["notes"] if n not in report["problem"]):  # said below
        out.print(f"note: {note}", markup=False)
    if report["problem"]:
        out.print(f"[bold red]{escape(report['problem'])}[/]")
        if report["traceback"]:
            out.print(report["traceback"].rstrip("\n"), markup=False)
        if report["syntax_error"]:
            out.print("[yellow]hint:[/] ", end="")
            out.print(SYNTAX_HINT, markup=False)
    stub = lesson_stub(course, lesson_key)
    for name, part in report["parts"].items():
        mark = "[green]✓[/]" if part["passed"] == part["total"] else "[red]✗[/]"
        out.print(f"{mark} {escape(name):9} {part['passed']}/{part['total']} practice tests  "
                  f"[dim]{escape(part['title'])}[/]")
        if report["problem"]:
            continue  # said once, above
        for t in (t for t in part["tests"] if t["outcome"] != "passed"):
            out.print(f"    {t['name']}: ", end="", markup=False)
            out.print(t["message"][:300], markup=False)
            if t["traceback"]:
                out.print("      " + t["traceback"].strip().replace("\n", "\n      "),
                          markup=False)
            for c in t["checks"]:
                if c.get("max_abs_diff") is not None:
                    out.print(f"      {c['name']}: max abs diff {c['max_abs_diff']:.3g} at "
                              f"{c.get('where')}, got {c.get('got_value')}, expected "
                              f"{c.get('ref_value')} (tolerance {c.get('atol')} + "
                              f"{c.get('rtol')}·|ref|)", markup=False)
        failing = [t for t in record.tests if t.part == name and not t.passed]
        for where in missing_from_stub(failing, stub):
            out.print("    " + STRINGS[course.language]["missing_in_stub"].format(**where),
                      markup=False)
        if part["where"]:
            out.print("    [yellow]where:[/] ", end="")
            out.print(part["where"], markup=False)
        if part["likely_mistake"]:
            # The instructor's text is printed as is: "torch.cat([cos, cos])" is no markup.
            out.print("    [yellow]likely mistake:[/] ", end="")
            out.print(part["likely_mistake"]["title"], markup=False)
            out.print("    [yellow]hint:[/] ", end="")
            out.print(part["likely_mistake"]["hint"], markup=False)
    if report["output"]:
        out.print("[dim]your code printed:[/]")
        out.print(report["output"][:2000], markup=False)
    out.print(f"practice tests: {report['passed']}/{report['total']} passed. "
              "The graded run has more tests, hidden.")
