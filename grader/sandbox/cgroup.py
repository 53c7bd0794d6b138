"""A memory cgroup per run: caps what a submission's processes use together.

RLIMIT_AS caps each process; a submission may start several (up to the process
limit), so only a cgroup bounds their sum. The trusted side creates one cgroup
for the run below its own (cgroup v1 `memory`, or v2 with the memory controller
enabled) and the sandbox sees just that directory: each slot makes its own child
cgroup in it, sets the limit per submission and moves each child in before the
child drops its privileges. Where no writable memory cgroup exists, grading goes
on with the per-process cap alone and the run says so.

The trusted side makes and removes the run's cgroup (`create`, `remove`); a slot
holds its own below it (`SlotCgroup`). This module is also loaded by path inside
the sandbox (zygote.py says why): only the standard library here.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup/unified")
PREFIX = "minimind-grader-"
COW_MARGIN_MB = 128  # warm pages a child copies on write are charged to its cgroup


def _own(controller: str) -> str | None:
    """This process's cgroup path for a v1 controller ("memory") or v2 ("")."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(",") or (controller == "" and names == ""):
            return path
    return None


def _bases() -> list[Path]:
    bases = []
    if (rel := _own("memory")) is not None and (V1_ROOT / "memory.limit_in_bytes").exists():
        bases.append(V1_ROOT / rel.lstrip("/"))
    if (rel := _own("")) is not None:
        for root in (V2_ROOT, Path("/sys/fs/cgroup")):
            base = root / rel.lstrip("/")
            control = base / "cgroup.subtree_control"
            if control.exists() and "memory" in control.read_text().split():
                bases.append(base)
                break
    return bases


def create() -> tuple[Path | None, str]:
    """A fresh cgroup for this run, or (None, why there is none)."""
    reasons = []
    for base in _bases():
        _remove_stale(base)
        path = base / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
            if not (path / "memory.limit_in_bytes").exists():  # v2: let slots use it
                (path / "cgroup.subtree_control").write_text("+memory")
            return path, ""
        except OSError as exc:
            reasons.append(f"{base}: {exc.strerror}")
    return None, ("no writable memory cgroup (" + ("; ".join(reasons) or "no memory "
                  "controller") + "): each student process is capped, not their sum")


def _remove_stale(base: Path) -> None:
    """Cgroups of runs that were killed (SIGKILL skips every clean-up): empty by now."""
    for path in base.glob(f"{PREFIX}*"):
        pid = path.name.removeprefix(PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            remove(path, tries=1)


def remove(path: Path, tries: int = 50) -> None:
    """Remove the run's cgroup once its processes are gone (they die with the sandbox,
    a moment after it is closed: retry briefly)."""
    for _ in range(tries):
        try:
            for child in sorted(p for p in path.iterdir() if p.is_dir()):
                child.rmdir()
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


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
