"""A child cannot end its slot, and where a slot still ends while a child runs, only
that student pays.

Rootless, a child is its slot's own uid outside, and before Landlock's signal scoping
(Linux 6.12) its `kill(1, SIGINT)` reached the slot, the init of the child's pid
namespace, whose Python handler raised KeyboardInterrupt: the slot ended, with `--jobs
1` no one after the attacker was graded, and every rerun stopped at the attacker
again. Older kernels are tried on this one by capping the run's Landlock ABI
(GRADER_LANDLOCK_ABI: 5 is a kernel before 6.12, 0 one without Landlock).
"""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

import modes
from conftest import SOLUTION, hostile, require_sandbox

# every signal a child could send its slot (SIGKILL and SIGSTOP: the kernel drops
# them for a pid namespace's init, whatever the slot does)
SIGNALS = [int(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
                            signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE,
                            signal.SIGXCPU, signal.SIGXFSZ, signal.SIGTSTP, signal.SIGCHLD,
                            signal.SIGCONT, signal.SIGWINCH, signal.SIGVTALRM,
                            signal.SIGRTMIN, signal.SIGKILL, signal.SIGSTOP)]
ATTACK = f"""
import os as _os, time as _time
for _sig in {SIGNALS!r}:
    try:
        _os.kill(1, _sig)
    except OSError:
        pass
    _time.sleep(0.05)
_time.sleep(1)
"""
HONEST = ("b-honest", "c-honest")


@pytest.mark.parametrize(("mode", "abi"), modes.SLOT_CASES)
def test_a_child_cannot_signal_its_slot(mode, abi):
    """The attacker signals pid 1 (its slot, where it has its own pid namespace) with
    every signal, in a probe call: the slot ignores them all, the attacker is graded as
    its code deserves (full marks: it is the solution), and so is everyone after it on
    the same slot (`modes.grade` also asserts the run's exit status is 0)."""
    records, said = modes.grade_once(mode, abi, {
        "a-attacker": hostile(route=ATTACK), **{s: SOLUTION.read_text() for s in HONEST}})
    for sid, record in records.items():
        assert (record["status"], record["score"]) == ("graded", 10.0), (sid, said)


NAME = "mmg-slot-me"  # what the attacker names itself (PR_SET_NAME) once some tests passed
SLEEPER = f"""
import ctypes as _c, time as _t
_c.CDLL(None).prctl(15, {NAME.encode()!r}, 0, 0, 0)
_t.sleep(8)
"""


def _descendants(top: int) -> list[tuple[int, int, str]]:
    """(pid, parent, name) of every process below `top`."""
    rows = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = dict(line.split(":\t", 1) for line in
                              (entry / "status").read_text().splitlines() if ":\t" in line)
                rows[int(entry.name)] = (int(fields["PPid"]), fields["Name"].strip())
            except (OSError, KeyError, ValueError):
                continue

    def below(pid: int) -> bool:
        seen = set()
        while pid in rows and pid not in seen:
            seen.add(pid)
            pid = rows[pid][0]
            if pid == top:
                return True
        return False

    return [(pid, parent, name) for pid, (parent, name) in rows.items() if below(pid)]


def _kill_first_slot(stop: threading.Event, killed: list[int]) -> None:
    """Kill, from outside, the slot of the attacker's child, once it has named itself
    (in its router's probe: its ffn tests have passed by then)."""
    while not stop.is_set() and not killed:
        for _, parent, name in _descendants(os.getpid()):
            if name == NAME:
                os.kill(parent, signal.SIGKILL)
                killed.append(parent)
                return
        time.sleep(0.05)


def test_a_slot_that_ends_costs_its_student_alone():
    """However a slot ends while a child runs (killed here from outside, as root: no
    child can do it any more), that student's record says so, with 0 points and a
    note on the page (a record: a rerun does not stop at that student again); the worker
    is replaced and every other student is graded."""
    if os.geteuid() != 0:
        pytest.skip("killing a slot from outside needs root")
    require_sandbox()
    top = modes.class_folder()
    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_first_slot, args=(stop, killed), daemon=True)
    watcher.start()
    try:
        sources = {"a-attacker": hostile(route=SLEEPER),
                   **{s: SOLUTION.read_text() for s in HONEST}}
        records, said = modes.grade(top, "own", sources)
        stop.set()
        assert killed, said
        lost = records["a-attacker"]
        assert (lost["status"], lost["score"]) == ("worker_stopped", 0), said
        assert "worker" in lost["problem"], lost["problem"]
        page = top / "out" / "feedback" / "a-attacker.html"
        assert page.exists() and "worker" in page.read_text(), said
        for sid in HONEST:
            assert (records[sid]["status"], records[sid]["score"]) == ("graded", 10.0), said
    finally:
        stop.set()
        shutil.rmtree(top, ignore_errors=True)
