"""One pytest session grades a stream of submissions (runner.GradingLoop): each gets a
raw log of its own, in pytest-json-report's format, and the practice tests are
those of test_practice_<part>.py files, with no marker written in them."""
from __future__ import annotations

from grader import runner
from grader.context import LessonContext

# each test's call phase; another phase only where it did not pass
TEST_KEYS = {"nodeid", "lineno", "outcome", "call", "metadata"}


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


def _without_durations(report: dict) -> list[dict]:
    return [{**t, "call": {k: v for k, v in t["call"].items() if k != "duration"}}
            for t in report["tests"]]


def test_a_test_called_directly_reports_as_through_pytests_protocol(course, monkeypatch):
    """Every hidden test takes only the grading plugin's fixtures, so the loop calls it
    without pytest's per-item protocol: the records are the same either way, verdicts,
    evidence and diagnoses alike, for a correct and a mistaken submission."""
    ctx = LessonContext(course, "13")
    wrong = next(v.caller for v in ctx.refs.variants if v.mistake.part == "router")
    decided: list[bool] = []
    directly = runner.runs_directly
    monkeypatch.setattr(runner, "runs_directly",
                        lambda item: decided.append(directly(item)) or decided[-1])

    def reports() -> list[dict]:
        got: list[dict] = []
        runner.run_tests(ctx, [(ctx.refs.reference.twin(), got.append),
                               (wrong, got.append)])
        return got

    direct = reports()
    assert decided and all(decided)  # every hidden test of the lesson
    monkeypatch.setattr(runner, "runs_directly", lambda item: False)
    protocol = reports()
    # scored (which draws the heatmaps a page shows, in the checks): the same points
    assert [runner.score(ctx, r).score for r in direct] == \
        [runner.score(ctx, r).score for r in protocol]
    assert [r["summary"] for r in direct] == [r["summary"] for r in protocol]
    assert direct[1]["summary"]["failed"] > 0
    assert [_without_durations(r) for r in direct] == [_without_durations(r) for r in protocol]

