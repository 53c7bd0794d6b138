"""One pytest session grades a stream of submissions (runner.GradingLoop): each gets a
raw log of its own, in pytest-json-report's format, and the practice tests are
those of test_practice_<part>.py files, with no marker written in them."""
from __future__ import annotations

import pytest

from grader.judge import runner
from grader.lesson import testfile
from grader.judge.context import LessonContext

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
    for select in (runner.GRADED_TESTS, runner.PRACTICE_TESTS):
        reports: list[dict] = []
        runner.run_tests(ctx, [(ctx.refs.reference.twin(), reports.append)], select=select)
        files[select] = {t["nodeid"].split("::")[0] for t in reports[0]["tests"]}
    assert files[runner.PRACTICE_TESTS] == {"test_practice_norm.py"}
    assert files[runner.GRADED_TESTS] and not any(f.startswith("test_practice_")
                                            for f in files[runner.GRADED_TESTS])
    assert "pytestmark" not in (ctx.tests / "test_practice_norm.py").read_text()


def _without_durations(report: dict) -> list[dict]:
    return [{**t, "call": {k: v for k, v in t["call"].items() if k != "duration"}}
            for t in report["tests"]]


@pytest.mark.slow  # grades the lesson twice, directly and through pytest: ~13 CPU-s
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


def _fields(nodeid: str) -> list[str]:
    """The case fields a test id names: `test_x[E=4 K=2 float32 N=10]` → E, K, dtype, N."""
    inside = nodeid.partition("[")[2].rstrip("]")
    return [w.split("=")[0] if "=" in w else "dtype" for w in inside.split()]


@pytest.mark.parametrize("lesson", ["10", "11", "12", "13"])
def test_practice_ids_name_their_case_as_the_graded_ids_do(course, lesson):
    """`grader check` prints practice test ids: each names its case (`[E=4 K=2 ...]` where
    the part's graded ids name fields, a case's name where they name cases)."""
    ctx = LessonContext(course, lesson)
    ids: dict[str, dict[str, set]] = {runner.GRADED_TESTS: {}, runner.PRACTICE_TESTS: {}}
    for select in ids:
        reports: list[dict] = []
        runner.run_tests(ctx, [(ctx.refs.reference.twin(), reports.append)], select=select)
        for t in reports[0]["tests"]:
            part = testfile.part_of(t["nodeid"].split("::")[0])
            ids[select].setdefault(part, set()).add(t["nodeid"].split("::")[1])
    assert set(ids[runner.PRACTICE_TESTS]) == set(ids[runner.GRADED_TESTS])
    for part, practice in ids[runner.PRACTICE_TESTS].items():
        graded = ids[runner.GRADED_TESTS][part]
        assert all("[" in n for n in practice | graded), (part, practice)
        named = {tuple(_fields(n)) for n in graded if "=" in n}
        assert all(tuple(_fields(n)) in named for n in practice) if named else True, (
            part, practice, named)
