"""Grades one submission: a session in the sandboxed worker, hidden tests in-process.

The hidden tests run under pytest (with pytest-json-report) on the trusted side;
the submission is reached only through probe calls on its session. The raw
pytest-json-report is kept beside the scores, which are computed from it.
"""
from __future__ import annotations

import io
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_jsonreport.plugin import JSONReport

from grader.config import Course
from grader.plugin import GradingPlugin, StudentCaller, part_of
from grader.reference import lesson_refs
from grader.sandbox.slot import Slot

MAX_SOURCE = 1024 * 1024


@dataclass
class Submission:
    student_id: str
    path: Path | None          # None: nothing was submitted
    source: str | None = None  # read and checked by `read`
    problem: str = ""          # why it cannot be graded, shown to the student


def read(sub: Submission) -> Submission:
    """Load the source, turning every unreadable case into a clear problem."""
    if sub.path is None or not sub.path.is_file():
        sub.problem = "no file was submitted"
        return sub
    data = sub.path.read_bytes()
    if len(data) > MAX_SOURCE:
        sub.problem = f"the file is {len(data)} bytes, over the {MAX_SOURCE}-byte limit"
    elif not data.strip():
        sub.problem = "the submitted file is empty"
    else:
        try:
            sub.source = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            sub.problem = f"the file is not UTF-8 text ({exc.reason} at byte {exc.start})"
    if "\x00" in (sub.source or ""):
        sub.source, sub.problem = None, "the file contains NUL bytes; submit Python source"
    return sub


def run_tests(course: Course, lesson_key: str, student: StudentCaller | None,
              select: str = "") -> tuple[dict, dict]:
    """Run the lesson's hidden tests; returns (json report, per-test metadata)."""
    lesson = course.lesson(lesson_key)
    tests = course.path(lesson.tests)
    refs = lesson_refs(lesson_key, course.path(lesson.solution), tests)
    plugin = GradingPlugin(student, refs, course.tolerances(lesson_key), course.language)
    report = JSONReport()
    args = [str(tests), "-q", "-p", "no:cacheprovider", "--tb=short",
            "--rootdir", str(tests), "-c", "/dev/null", "--json-report-file=none",
            "-W", "ignore"]
    if select:
        args += ["-m", select]
    sink = io.StringIO()
    with redirect_stdout(sink), redirect_stderr(sink):
        code = pytest.main(args, plugins=[plugin, report])
    if code not in (0, 1) or not report.report.get("tests"):
        raise RuntimeError(f"hidden tests of lesson {lesson_key} did not run "
                           f"(pytest exit {code}): {sink.getvalue()[-2000:]}")
    return report.report, plugin.meta


def score(course: Course, lesson_key: str, report: dict) -> dict:
    """Points per test: each part's points shared equally by its tests."""
    lesson = course.lesson(lesson_key)
    tests = report["tests"]
    per_part: dict[str, int] = {}
    for t in tests:
        per_part[part_of(t["nodeid"].split("::")[0])] = per_part.get(
            part_of(t["nodeid"].split("::")[0]), 0) + 1
    unknown = set(per_part) - set(lesson.parts)
    if unknown:
        raise RuntimeError(f"hidden tests name parts not in course.yml: {sorted(unknown)}")
    parts = {name: {"score": 0.0, "max_score": p.points, "passed": 0,
                    "tests": per_part.get(name, 0)} for name, p in lesson.parts.items()}
    records = []
    for t in tests:
        part = part_of(t["nodeid"].split("::")[0])
        worth = lesson.parts[part].points / per_part[part]
        meta = t.get("metadata", {})
        passed = t["outcome"] == "passed"
        got = worth if passed else 0.0
        parts[part]["score"] += got
        parts[part]["passed"] += passed
        checks = meta.get("checks", [])
        diffs = [c["max_abs_diff"] for c in checks if c.get("max_abs_diff") is not None]
        failing = [c for c in checks if not c.get("passed")]
        error = meta.get("error")
        message = (error["message"] if error else
                   "; ".join(f"{c['name']}: {c.get('message', '')}" for c in failing[:3]))
        if not passed and not message:
            message = _crash_text(t)
        records.append({
            "name": t["nodeid"].split("::", 1)[1], "part": part,
            "outcome": "passed" if passed else "failed",
            "score": round(got, 4), "max_score": round(worth, 4),
            "max_abs_diff": max(diffs) if diffs else None,
            "message": message, "checks": checks, "error": error,
            "diagnosis": meta.get("diagnosis"),
            "duration_s": round(t.get("call", {}).get("duration", 0.0), 4),
        })
    for p in parts.values():
        p["score"] = round(p["score"], 4)
    total = round(sum(p["score"] for p in parts.values()), 4)
    return {"score": total, "max_score": lesson.max_score, "parts": parts, "tests": records}


def _crash_text(test: dict) -> str:
    """A hidden test that broke on its own is a grader bug: say so, show no source."""
    return "the grader could not run this test (a grader error, not yours)"


def grade(course: Course, lesson_key: str, sub: Submission, slot: Slot | None) -> dict:
    """The full record for one student: scores, tests, output, raw report."""
    lesson = course.lesson(lesson_key)
    started = time.monotonic()
    base = {"student_id": sub.student_id, "lesson": lesson_key,
            "sandboxed": bool(slot and slot.sandboxed)}
    sub = read(sub)
    if sub.problem:
        report, _ = run_tests(course, lesson_key, _Missing(sub.problem))
        result = score(course, lesson_key, report)
        return {**base, **result, "status": "missing" if sub.path is None or not sub.path.exists()
                else "unreadable", "problem": sub.problem, "output": "",
                "elapsed_s": round(time.monotonic() - started, 3), "raw_report": report}
    session = slot.open(sub.source, lesson.exercise, lesson.provides, course.limits(lesson_key))
    caller = StudentCaller(session)
    try:
        report, _ = run_tests(course, lesson_key, caller)
    finally:
        session.close()
    result = score(course, lesson_key, report)
    status = "graded"
    problem = ""
    if session.fatal is not None:
        status = "timeout" if session.fatal.kind == "timeout" else "import_error"
        problem = session.fatal.message
    elif any(t["error"] and t["error"]["kind"] == "timeout" for t in result["tests"]):
        status = "timeout"
    return {**base, **result, "status": status, "problem": problem,
            "import_traceback": session.fatal.traceback if session.fatal else "",
            "output": session.output.text(), "cpu_s": round(session.cpu_s, 3),
            "elapsed_s": round(time.monotonic() - started, 3), "raw_report": report}


class _Missing:
    """Stands in for a submission that cannot be run: every probe call fails alike."""

    def __init__(self, problem: str):
        from grader.sandbox.slot import StudentError
        self.error = StudentError("missing", problem)
        self.current_test = ""

    def call(self, probe: str, **args) -> dict:
        raise self.error
