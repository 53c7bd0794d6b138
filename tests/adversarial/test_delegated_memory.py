"""Rootless, a memory cgroup the machine delegates to the TA caps a student's processes
together, as root mode's does: the grader started in a cgroup of the TA's own
(systemd's `Delegate=yes`, or one an administrator made and chowned; simulated here
by root making one below its own and giving it to the user the run is graded as)
makes the run's cgroup below it, and each slot its own below that.

The attack forks three helpers of 120 MiB each, each under the 256 MiB per-process
cap, then takes 200 MiB itself: 560 MiB together. Without a cgroup the fork is
refused (test_memory_alone.py); with one the fork is allowed and the cgroup stops the
sum: the page says the processes together exceeded the limit (which limit fired,
never a time). The course's wall limits are far above what filling 560 MiB takes on
a loaded machine, and the child takes its share only once every helper holds its
own (a pipe, not a sleep)."""
from __future__ import annotations

import shutil

import pytest

import modes
from conftest import FULL, PARTS, SOLUTION, failed_messages, fork_and_hold, hostile, lost

pytestmark = pytest.mark.slow

MEMORY_MB = 256
LIMITS = {"memory_mb": MEMORY_MB, "test_wall_s": 120, "submission_wall_s": 1200}

FORK_AND_HOLD = hostile(dispatch=fork_and_hold(
    120, 200, 'raise RuntimeError(f"ATTACK WORKED: {len(got)} helpers and the child held 560 MiB")'))


@pytest.mark.parametrize("abi", [None, "0"], ids=["landlock", "no-landlock"])
def test_a_delegated_cgroup_caps_a_students_processes_together(abi):
    if reason := modes.reason("userns-delegated"):
        pytest.skip(reason)
    top = modes.class_folder(LIMITS)
    try:
        records, said = modes.grade(
            top, "userns-delegated", {"a-fork": FORK_AND_HOLD, "z-honest": SOLUTION.read_text()},
            extra_env={"GRADER_LANDLOCK_ABI": abi} if abi else None)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert "no writable memory cgroup" not in said, said
    messages = failed_messages(records["a-fork"], "dispatch")
    assert lost(records["a-fork"]) == {"dispatch": PARTS["dispatch"]}, (messages[:2], said)
    assert not any("ATTACK WORKED" in m or "one process on this machine" in m
                   for m in messages), messages[:2]
    assert all(f"processes together exceeded the {MEMORY_MB} MiB memory limit" in m
               for m in messages), messages[:2]
    assert records["a-fork"]["sandbox"] == "userns", records["a-fork"]["sandbox"]
    assert records["z-honest"]["score"] == FULL, records["z-honest"]["problem"]
