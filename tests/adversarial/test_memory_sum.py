"""Memory held by a submission's processes together is capped (a cgroup per slot),
not only each process on its own: helpers that each stay under the per-process
limit cannot add up to more, and the student is told what happened.

The memory limit is the one tested: the course's wall limits are far above what
filling 560 MiB takes on a loaded machine (a 5-s test wall time could fire first),
and the child takes its share only once every helper holds its own (a pipe, not a
sleep that a busy machine can outlast)."""
from __future__ import annotations

import pytest

from conftest import (FULL, PARTS, SOLUTION, course_copy, failed_messages, fork_and_hold,
                      grade_all, hostile, lost, open_slot, require_sandbox, wait_no_processes)

MEMORY_MB = 256  # the cgroup allows this plus a margin for pages copied from the zygote
LIMITS = {"memory_mb": MEMORY_MB, "test_wall_s": 120, "submission_wall_s": 1200}

# Three helpers hold 120 MiB each (each under the 256 MiB per-process limit), then
# the child itself takes 200 MiB more: 560 MiB together.
SPREAD = hostile(dispatch=fork_and_hold(
    120, 200, 'raise RuntimeError("ATTACK WORKED: 560 MiB held together")'))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    require_sandbox()
    course = course_copy(tmp_path_factory.mktemp("course"), LIMITS)
    slot = open_slot(course)
    if slot.sandbox.cgroup_path is None:
        slot.close()
        pytest.skip(slot.sandbox.memory_note)
    try:
        yield grade_all(course, slot, tmp_path_factory.mktemp("sum"), {
            "spread": SPREAD, "honest-after": SOLUTION.read_text()})
    finally:
        slot.close()
    assert wait_no_processes(uids=[slot.uid]) == []


def test_processes_together_are_capped(records):
    rec = records["spread"]
    messages = failed_messages(rec, "dispatch")
    assert lost(rec) == {"dispatch": PARTS["dispatch"]}, messages[:2]
    assert not any("ATTACK WORKED" in m for m in messages), messages[:2]
    assert all(f"processes together exceeded the {MEMORY_MB} MiB memory limit" in m
               for m in messages), messages[:2]


def test_next_submission_is_unaffected(records):
    assert records["honest-after"]["score"] == FULL
