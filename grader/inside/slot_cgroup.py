"""A slot's own memory cgroup, below the run's (grader/sandbox/cgroup.py makes that one
on the trusted side): the cap on all of one submission's processes together. Runs
inside the sandbox, loaded by path (zygote.py says why): only the standard library.
"""
from __future__ import annotations

import os

COW_MARGIN_MB = 128  # warm pages a child copies on write are charged to its cgroup


class SlotCgroup:
    """A slot's memory cgroup, `path` (v1 or v2 file names): a cap on all a
    submission's processes together, and whether the kernel's OOM killer acted on
    them. Its files are opened once, here, so that the slot can then unmount the
    cgroup tree (confine.detach_cgroup)."""

    def __init__(self, path: str):
        os.mkdir(path)
        v1 = os.path.exists(os.path.join(path, "memory.limit_in_bytes"))
        names = (("memory.limit_in_bytes", "memory.oom_control") if v1 else
                 ("memory.max", "memory.events"))
        self.limit = os.open(os.path.join(path, names[0]), os.O_WRONLY)
        self.events = os.open(os.path.join(path, names[1]), os.O_RDONLY)
        # times the slot's own cap was reached (v1: memory.failcnt; v2: "oom" events)
        self.failcnt = (os.open(os.path.join(path, "memory.failcnt"), os.O_RDONLY) if v1
                        else None)
        self.procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)

    def cap(self, memory_mb: int) -> tuple[int, int]:
        """Set the cap for the next child; the counts so far (`counts`)."""
        os.write(self.limit, str((memory_mb + COW_MARGIN_MB) << 20).encode())
        return self.counts()

    def counts(self) -> tuple[int, int]:
        """(processes the OOM killer took from this slot, times the slot's own cap was
        reached). A kill with the cap never reached came from outside: the machine or
        the container ran out, not the submission's allowance."""
        events = {}
        for line in os.pread(self.events, 4096, 0).decode().splitlines():
            name, _, value = line.partition(" ")
            events[name] = int(value) if value.strip().isdigit() else 0
        hits = (int(os.pread(self.failcnt, 64, 0)) if self.failcnt is not None
                else events.get("oom", 0))
        return events.get("oom_kill", 0), hits

    def enter(self) -> None:
        """Move the calling process in (its children follow)."""
        os.write(self.procs, str(os.getpid()).encode())
