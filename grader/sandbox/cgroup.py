"""A memory cgroup per run: caps what a submission's processes use together.

RLIMIT_AS caps each process; a submission may start several (up to the process
limit), so only a cgroup bounds their sum. The trusted side creates one cgroup
for the run below its own (cgroup v1 `memory`, or v2 with the memory controller
enabled) and the sandbox sees just that directory: each slot makes its own child
cgroup in it, sets the limit per submission and moves each child in before the
child drops its privileges. Rootless, the grader's own cgroup serves where the machine
delegated it to the user: a v1 memory cgroup the user owns, or a v2 one (systemd's
`Delegate=yes`, e.g. the grader started by `systemd-run --user --scope -p
Delegate=yes`) whose processes `_make_room` moves into a leaf first. Where no writable
memory cgroup exists, grading goes on with the per-process cap alone and the run says
so.

The trusted side makes and removes the run's cgroup (`create`, `remove`, here); a slot
holds its own below it (grader/inside/slot_cgroup.py, on the sandbox's side).
"""
from __future__ import annotations

import errno
import os
import time
import uuid
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup/unified")
PREFIX = "minimind-grader-"
LEAF = "grader"  # a delegated v2 cgroup's own processes, moved below it (`_make_room`)


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
            if os.geteuid() != 0 and _delegated(base):
                bases.append(base)
                break
    return bases


def _delegated(base: Path) -> bool:
    """Rootless: a v2 cgroup given to this user (its files ours to write), with the
    memory controller available to it. As root, the grader's own cgroup is the
    machine's to arrange (a login's scope, a service's), never rearranged here."""
    try:
        offered = (base / "cgroup.controllers").read_text().split()
    except OSError:
        return False
    return "memory" in offered and all(
        os.access(base / name, os.W_OK) for name in (".", "cgroup.procs",
                                                     "cgroup.subtree_control"))


def _make_room(base: Path, tries: int = 5) -> None:
    """cgroup v2 lets a cgroup (but the root) hold processes or give controllers to
    its children, not both: a delegated cgroup's processes (the grader among them,
    started in a delegated scope) move into a leaf of their own (`LEAF`), then its
    children get the memory controller. A process started meanwhile makes the kernel
    refuse (EBUSY): moved too, on the next try."""
    control = base / "cgroup.subtree_control"
    leaf = base / LEAF
    for _ in range(tries):
        if "memory" in control.read_text().split():
            return
        leaf.mkdir(exist_ok=True)
        for pid in (base / "cgroup.procs").read_text().split():
            try:
                (leaf / "cgroup.procs").write_text(pid)
            except ProcessLookupError:  # ended meanwhile
                pass
        try:
            control.write_text("+memory")
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
    control.write_text("+memory")  # (the last refusal is raised, with its reason)


def create() -> tuple[Path | None, str]:
    """A fresh cgroup for this run, or (None, why there is none)."""
    reasons = []
    for base in _bases():
        path = base / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            if not (base / "memory.limit_in_bytes").exists():  # v2
                _make_room(base)
            _remove_stale(base)
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
                  "default and 256 open files" + ("" if os.geteuid() == 0 else
                  ". To cap several processes together, start the grader in a cgroup "
                  "delegated to you (`systemd-run --user --scope -p Delegate=yes "
                  "grader ...`)"))


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
