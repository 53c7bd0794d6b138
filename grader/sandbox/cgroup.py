"""A memory cgroup per run: caps what a submission's processes use together.

RLIMIT_AS caps each process; a submission may start several (up to the process
limit), so only a cgroup bounds their sum. The trusted side creates one cgroup
for the run below its own (cgroup v1 `memory`, or v2 with the memory controller
enabled) and the sandbox sees just that directory: each slot makes its own child
cgroup in it, sets the limit per submission and moves each child in before the
child drops its privileges. Where no writable memory cgroup exists, grading goes
on with the per-process cap alone and the run says so.

The trusted side makes and removes the run's cgroup (`create`, `remove`, here); a slot
holds its own below it (grader/inside/slot_cgroup.py, on the sandbox's side).
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup/unified")
PREFIX = "minimind-grader-"


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
                  "controller") + "): a student's code runs as one process (threads "
                  "only: starting another is refused), capped at limits.memory_mb of "
                  "address space, with memfd refused, socket buffers at the machine's "
                  "default and 256 open files")


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
