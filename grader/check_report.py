"""What `grader check` tells a student about one record: per part, the practice tests
passed, the failing ones with their messages, and the likely mistake.

One summary serves both outputs (`grader check` prints it, `--json` writes it), so the
two never disagree; a test asserts the project's, the notebook's and the bundle's
checks give the same summary.
"""
from __future__ import annotations

from grader.config import Course

# Exit status of `grader check`, documented in docs/students.md
PASSED, FAILED, WRONG_INPUT, GRADER_FAILED = 0, 1, 2, 3
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
SYNTAX_HINT = ("Python could not read your file, so no test ran. The caret marks where "
               "it stopped; the mistake is often just before it (a missing comma, "
               "bracket, colon or quote, here or on the line above).")


def summary(record: dict, course: Course, lesson_key: str, notes: list[str]) -> dict:
    """The record as the student's report: every field plain JSON."""
    lesson = course.lesson(lesson_key)
    lang = course.language
    tests = record["tests"]
    parts = {}
    for name, part in record["parts"].items():
        mine = [t for t in tests if t["part"] == name]  # practice: not in the counters
        diagnosis = part.get("diagnosis") or {}
        parts[name] = {
            "title": lesson.parts[name].title,
            "passed": sum(t["outcome"] == "passed" for t in mine), "total": len(mine),
            "likely_mistake": {"id": diagnosis["id"], "title": diagnosis["title"][lang],
                               "hint": diagnosis["hint"][lang]}
            if diagnosis.get("id") else None,
            "tests": [{"name": t["name"], "outcome": t["outcome"], "message": t["message"],
                       "traceback": (t["error"] or {}).get("traceback") or "",
                       "checks": [c for c in t["checks"] if not c.get("passed")]}
                      for t in mine]}
    return {"lesson": lesson_key, "status": record["status"], "problem": record["problem"],
            "syntax_error": _syntax_error(tests),
            "traceback": record.get("import_traceback") or "", "notes": notes,
            "passed": sum(t["outcome"] == "passed" for t in tests), "total": len(tests),
            "parts": parts, "output": record.get("output") or ""}


def _syntax_error(tests: list[dict]) -> bool:
    return any((t["error"] or {}).get("type") in SYNTAX_ERRORS for t in tests)


def exit_status(report: dict) -> int:
    """0: every practice test passed; 2: there was no file to grade (missing, unreadable,
    not a notebook); 1: otherwise (some test failed)."""
    if report["status"] in ("missing", "unreadable"):
        return WRONG_INPUT
    return PASSED if report["total"] and report["passed"] == report["total"] else FAILED
