"""The run's memory cgroup: made fresh, and what killed runs left is cleared."""
import os
import subprocess

import pytest

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
