"""The run's memory cgroup: made fresh, and what killed runs left is cleared."""
import os
import subprocess

import pytest

from grader.inside.slot_cgroup import SlotCgroup
from grader.sandbox import cgroup


def test_a_run_cgroup_is_made_and_removed_and_stale_ones_cleared():
    path, why = cgroup.create()
    if path is None:
        pytest.skip(why)
    try:
        assert path.is_dir() and path.name.startswith(f"{cgroup.PREFIX}{os.getpid()}-")
        dead = _dead_pid()
        stale = path.parent / f"{cgroup.PREFIX}{dead}-00000000"
        stale.mkdir()
        (stale / "slot-61000").mkdir()
        again, _ = cgroup.create()
        assert again is not None and not stale.exists()
        cgroup.remove(again)
        assert not again.exists()
    finally:
        cgroup.remove(path)
    assert not path.exists()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("events, failcnt, expected", [
    ("oom 0\noom_kill 2\nmax 7\n", None, (2, 0)),              # v2: killed, cap never hit
    ("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n", None, (1, 1)),  # v2: its own cap
    ("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "5\n", (3, 5)),  # v1
], ids=["v2-outside", "v2-own", "v1"])
def test_a_slot_tells_its_own_cap_from_the_machine_running_out(tmp_path, events, failcnt,
                                                               expected):
    """(OOM kills, times the slot's own cap was reached): a kill with no hit of the cap
    came from outside, and is reported as the grader's problem, not the student's."""
    slot = SlotCgroup.__new__(SlotCgroup)
    (tmp_path / "events").write_text(events)
    slot.events = os.open(tmp_path / "events", os.O_RDONLY)
    slot.failcnt = None
    if failcnt is not None:
        (tmp_path / "failcnt").write_text(failcnt)
        slot.failcnt = os.open(tmp_path / "failcnt", os.O_RDONLY)
    try:
        assert slot.counts() == expected
    finally:
        os.close(slot.events)
        if slot.failcnt is not None:
            os.close(slot.failcnt)


def test_a_delegated_v2_cgroup_moves_its_processes_into_a_leaf_first(tmp_path, monkeypatch):
    """cgroup v2's no-internal-process rule, as the kernel keeps it (EBUSY while the
    cgroup holds a process), here in a stand-in: the delegated cgroup's processes go to
    a leaf, then the memory controller is given to its children; a process started
    between the two (the kernel refuses once) is moved on the next try."""
    import errno
    from pathlib import Path

    base = tmp_path / "delegated"
    leaf = base / cgroup.LEAF
    base.mkdir()
    procs = {base: ["101", "102"], leaf: []}
    enabled: list[str] = []
    started = ["103"]  # begins after the first listing

    def read_text(self, *args, **kwargs):
        if self.name == "cgroup.procs":
            return "\n".join(procs[self.parent])
        return " ".join(enabled)

    def write_text(self, text, *args, **kwargs):
        if self.name == "cgroup.procs":
            procs[base].remove(text)
            procs[self.parent].append(text)
        else:
            procs[base].extend(started)
            started.clear()
            if procs[base]:
                raise OSError(errno.EBUSY, "Device or resource busy")
            enabled.append(text.lstrip("+"))
        return len(text)

    monkeypatch.setattr(Path, "read_text", read_text)
    monkeypatch.setattr(Path, "write_text", write_text)
    cgroup._make_room(base)
    assert procs == {base: [], leaf: ["101", "102", "103"]} and enabled == ["memory"]
