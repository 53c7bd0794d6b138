"""The CPU-time limit and the per-submission time budget, with copies of course.yml
that tighten them (so the suite stays fast); they point at the real solution and
hidden tests by absolute path.

The CPU limit is tested in a course of its own whose wall-time limits are far above
it: when another job loads both cores, 1 s of CPU takes many seconds of wall time,
and a tight test wall time or budget would fire first and hide which limit works.
Likewise the budget's course sets the per-test wall time far above a call's 3 s, so
only the budget can stop the slow submission, and its work is counted by what it
printed, not timed."""
from __future__ import annotations

import pytest

from conftest import (FULL, PARTS, SOLUTION, course_copy, error_kinds, failed_messages,
                      grade_alone, hostile, lost, require_sandbox)

LIMITS = {"test_wall_s": 60, "submission_wall_s": 10, "cpu_s": 1}
CPU_LIMITS = {"test_wall_s": 60, "submission_wall_s": 600, "cpu_s": 1}


SLEEP = "print('SLEEP', flush=True)\nimport time\ntime.sleep(3)"


def small_course(tmp_path):
    return course_copy(tmp_path, LIMITS)


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    require_sandbox()
    return small_course(tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="module")
def records(tight, tmp_path_factory):
    return grade_alone(tight, tmp_path_factory.mktemp("small"), {
        "honest": SOLUTION.read_text(),
        # every graded call takes 3 s: far under the per-test limit, over the budget
        "slow": hostile(route=SLEEP, dispatch=SLEEP, load_balancing_loss=SLEEP),
        "honest-after": SOLUTION.read_text(),
    })


@pytest.fixture(scope="module")
def cpu_records(tmp_path_factory):
    require_sandbox()
    course = course_copy(tmp_path_factory.mktemp("cpu-course"), CPU_LIMITS)
    # burns CPU in a part: the 1 s CPU limit comes long before a 60 s wall time
    return grade_alone(course, tmp_path_factory.mktemp("cpu"), {
        "cpu-burn": hostile(dispatch="while True:\n    pass"),
        "cpu-burn-ignoring": hostile(dispatch="import signal\n"
                                     "signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
                                     "while True:\n    pass")})


def test_limits_loaded(tight):
    limits = tight.limits("13")
    assert (limits.test_wall_s, limits.submission_wall_s, limits.cpu_s) == (60, 10, 1)


def test_honest_within_tight_limits(records):
    assert records["honest"]["score"] == FULL
    assert records["honest-after"]["score"] == FULL


def test_cpu_limit(cpu_records):
    rec = cpu_records["cpu-burn"]
    # if another part lost points, what each part that lost any was told
    told = {part: failed_messages(rec, part)[:2] for part in lost(rec)}
    assert lost(rec) == {"dispatch": PARTS["dispatch"]}, told
    for msg in failed_messages(rec, "dispatch"):  # each test restarts it; each is killed
        assert msg.startswith("your code exceeded the CPU time limit of 1 s in dispatch ("), msg
    assert error_kinds(rec, "dispatch") == {"crash"}  # killed by SIGXCPU, not a timeout


def test_cpu_limit_when_sigxcpu_is_ignored(cpu_records):
    """The hard limit, a second after the soft one, still ends it, as the CPU limit."""
    rec = cpu_records["cpu-burn-ignoring"]
    assert lost(rec) == {"dispatch": PARTS["dispatch"]}
    for msg in failed_messages(rec, "dispatch"):
        assert msg.startswith("your code exceeded the CPU time limit of 1 s in dispatch ("), msg


def test_submission_budget(records):
    rec = records["slow"]
    msgs = failed_messages(rec)
    budget = "the submission used up its time budget of 10 s; this test was not run"
    assert budget in msgs
    # graded in file order: aux_loss first (its first three 3-s calls pass, the fourth
    # is cut short by the budget); every later part finds the budget gone
    assert 0 < rec["parts"]["aux_loss"]["score"] < PARTS["aux_loss"]
    assert any(m.startswith("the submission used up its time budget of 10 s in aux_loss (")
               for m in msgs)
    for part in ("dispatch", "ffn", "moe", "router"):
        assert rec["parts"][part]["score"] == 0
        assert set(failed_messages(rec, part)) == {budget}
    assert rec["status"] == "timeout"
    # the budget bounds the work: at most four 3-s calls began in its 10 s
    assert 0 < rec["output"].count("SLEEP") <= 4, rec["output"][-500:]
