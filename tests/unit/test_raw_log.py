"""One pytest session grades a stream of submissions (runner.GradingLoop): each gets a
raw log of its own, in pytest-json-report's format, and the practice tests are
those of test_practice_<part>.py files, with no marker written in them."""
from __future__ import annotations

from grader import runner
from grader.context import LessonContext

TEST_KEYS = {"nodeid", "lineno", "outcome", "keywords", "setup", "call", "teardown",
             "metadata"}


def test_each_submission_has_its_own_raw_log(course):
    ctx = LessonContext(course, "10")
    wrong = next(v.caller for v in ctx.refs.variants if v.mistake.id == "wrong_dim")
    reports: list[dict] = []
    right = ctx.refs.reference.twin()
    runner.run_tests(ctx, [(right, reports.append), (wrong, reports.append),
                           (right, reports.append)])
    first, mistaken, again = reports
    assert set(first) == {"created", "duration", "exitcode", "root", "environment",
                          "summary", "tests"}
    assert all(set(t) == TEST_KEYS for t in first["tests"])
    n = len(first["tests"])
    assert first["summary"] == {"passed": n, "total": n, "collected": n}
    assert mistaken["summary"]["failed"] == n
    assert all(t["metadata"]["failed"] for t in mistaken["tests"])
    # nothing of the failing submission is left in the next one's records
    assert again["summary"] == first["summary"]
    assert all(t["outcome"] == "passed" and not t["metadata"]["failed"]
               for t in again["tests"])


def test_practice_tests_are_those_of_practice_files(course):
    ctx = LessonContext(course, "10")
    files = {}
    for select in (runner.GRADED, runner.PRACTICE):
        reports: list[dict] = []
        runner.run_tests(ctx, [(ctx.refs.reference.twin(), reports.append)], select=select)
        files[select] = {t["nodeid"].split("::")[0] for t in reports[0]["tests"]}
    assert files[runner.PRACTICE] == {"test_practice_norm.py"}
    assert files[runner.GRADED] and not any(f.startswith("test_practice_")
                                            for f in files[runner.GRADED])
    assert "pytestmark" not in (ctx.tests / "test_practice_norm.py").read_text()
