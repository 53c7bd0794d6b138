#!/usr/bin/env python
"""Where the test suite's CPU goes, every process counted: the suite run under the
kernel's process accounting, each finished process's CPU charged to the test whose
process started it.

    .venv/bin/python scripts/suite_cpu.py                 # as root: make test's pytest run
    .venv/bin/python scripts/suite_cpu.py -- tests/e2e    # as root: any pytest arguments
    .venv/bin/python scripts/suite_cpu.py --report ACCT CPU_LOG  # an earlier run's files

`pytest --cpu-log` alone counts a test's process and the children it waited for. A
bwrap'd sandbox's processes are reaped by their PID namespace's init, which outlives
the bwrap the test waits for: that CPU reaches no test's counters (test_cli's log saw
70 of its 132 CPU-s). The accounting file has every process that ended, with its
parent; a namespace's init, whose parent is gone when it ends, is tied to the bwrap
that forked it (the bwrap just before it).

It prints the run's CPU (every process's, the part the CPU log saw, and how many
cores' worth that is over the run's wall time), what the test processes spent
themselves, then by file and by test: CPU, and the processes that spent 1.5 s or more
each (a torch import: a sandbox boot or a `grader` process).

Needs root and `accton` and `dump-acct` (Debian's package acct). Accounting is
machine-wide: run nothing else meanwhile. Exit 0: figures are reported, not asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAKE_TEST = ["-q", "-n", "3", "--dist", "loadgroup"]  # the Makefile's XDIST
HEAVY_S = 1.5  # a process that spent this much CPU imported torch at least
LINK_PIDS = 5  # how far before a namespace's init its bwrap's pid may be


@dataclass(frozen=True)
class Process:
    """One accounting record: a process that ended."""
    comm: str
    cpu_s: float
    pid: int
    ppid: int
    started: float  # epoch seconds (the record keeps whole seconds)
    ended: float

    def alive_at(self, when: float) -> bool:
        return self.started - 1 <= when <= self.ended + 1


def read_accounting(path: Path) -> list[Process]:
    """Every record of `path`, through dump-acct (its fields: comm, version, user,
    system and elapsed time in ticks, ..., pid, ppid, ..., start time)."""
    try:
        text = subprocess.run(["dump-acct", str(path)], capture_output=True, text=True,
                              check=True).stdout
    except FileNotFoundError:
        sys.exit("suite_cpu.py: no dump-acct here: install Debian's package acct")
    hz = os.sysconf("SC_CLK_TCK")
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split("|")]
        started = time.mktime(time.strptime(f[14], "%a %b %d %H:%M:%S %Y"))
        out.append(Process(f[0], (float(f[2]) + float(f[3])) / hz, int(f[9]), int(f[10]),
                           started, started + float(f[4]) / hz))
    return out


def charge(processes: list[Process], tests: list[dict]) -> tuple[dict[str, list[Process]],
                                                                 list[Process]]:
    """Each process not a test process's own, under the test its test process ran
    when it started; the rest (started between tests, or not traced to one). A pid is
    used again in a long run (pid_max may be 32768): a parent is the process of that
    pid alive when its child started."""
    workers = {t["pid"] for t in tests}
    by_pid = defaultdict(list)
    for p in processes:
        by_pid[p.pid].append(p)

    def alive(pid: int, when: float, comm: str | None = None) -> Process | None:
        return next((q for q in by_pid.get(pid, ()) if q.alive_at(when)
                     and (comm is None or q.comm == comm)), None)

    runs = defaultdict(list)
    for t in tests:
        runs[t["pid"]].append((t["began"] - 1, t["began"] + t["wall_s"] + 1, t["test"]))

    def parent(p: Process) -> Process | None:
        if p.comm == "bwrap" and p.ppid == 1:  # a PID namespace's init: its bwrap
            for pid in range(p.pid - 1, p.pid - 1 - LINK_PIDS, -1):
                q = alive(pid, p.started, "bwrap")
                if q and q.ppid != 1:
                    return q
        return alive(p.ppid, p.started)

    charged, rest = defaultdict(list), []
    for p in processes:
        if p.pid in workers:
            continue
        q, test = p, None
        for _ in range(64):
            if q is None or q.ppid in workers:
                break
            q = parent(q)
        if q is not None and q.ppid in workers:
            test = next((name for a, b, name in runs[q.ppid] if a <= p.started <= b), None)
        (charged[test] if test else rest).append(p)
    return charged, rest


def report(processes: list[Process], tests: list[dict], top: int) -> None:
    charged, rest = charge(processes, tests)
    workers = {t["pid"] for t in tests}
    total = sum(p.cpu_s for p in processes)
    own = sum(t["own_s"] for t in tests)
    began = [p.started for p in processes if p.pid in workers] or [t["began"] for t in tests]
    span = max(p.ended for p in processes) - min(began)  # from the test processes' start
    print(f"every process: {total:.0f} CPU-s, {len(processes)} processes; the CPU log "
          f"saw {sum(t['cpu_s'] for t in tests):.0f}; over the run's {span:.0f} s, "
          f"{total / max(span, 1):.2f} cores' worth")
    print(f"test processes themselves: {own:.0f} CPU-s in tests, "
          f"{sum(p.cpu_s for p in processes if p.pid in workers) - own:.0f} outside them; "
          f"their children, charged to a test: "
          f"{sum(p.cpu_s for ps in charged.values() for p in ps):.0f}; "
          f"not traced to one: {sum(p.cpu_s for p in rest):.0f}")
    heavy = [p for ps in charged.values() for p in ps if p.cpu_s >= HEAVY_S]
    print(f"processes of {HEAVY_S} CPU-s or more: {len(heavy)}, "
          f"{sum(p.cpu_s for p in heavy):.0f} CPU-s")
    cpu, count = Counter(), Counter()
    for t in tests:
        cpu[t["test"]] += t["own_s"]
    for test, ps in charged.items():
        cpu[test] += sum(p.cpu_s for p in ps)
        count[test] += sum(p.cpu_s >= HEAVY_S for p in ps)
    for title, key in (("file", lambda name: name.split("::")[0]), ("test", lambda n: n)):
        c, n = Counter(), Counter()
        for name in cpu:
            c[key(name)] += cpu[name]
            n[key(name)] += count[name]
        print(f"\nby {title}: CPU-s, processes of {HEAVY_S} s or more")
        for name, s in c.most_common(top):
            print(f"{s:8.1f} {n[name]:4d}  {name}")


def run(pytest_args: list[str], folder: Path) -> tuple[Path, Path]:
    """The suite under accounting: (accounting file, CPU log)."""
    acct, log = folder / "pacct", folder / "cpu.jsonl"
    acct.write_bytes(b"")  # both are appended to: an earlier run's are not this one's
    log.unlink(missing_ok=True)
    try:
        subprocess.run(["accton", str(acct)], check=True, capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("suite_cpu.py: no accton here: install Debian's package acct")
    except subprocess.CalledProcessError as refused:
        sys.exit(f"suite_cpu.py: accton refused ({refused.stderr.strip()}): run as root")
    try:
        subprocess.run([sys.executable, "-m", "pytest", *pytest_args, "--cpu-log", str(log)],
                       cwd=REPO)
    finally:
        subprocess.run(["accton", "off"], capture_output=True)
    return acct, log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", nargs=2, metavar=("ACCT", "CPU_LOG"),
                    help="report on an earlier run's accounting file and CPU log")
    ap.add_argument("--keep", type=Path, help="the folder for the run's two files "
                    "(default: a new one in the temporary folder)")
    ap.add_argument("--top", type=int, default=30, help="lines per table")
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments "
                    f"(default: {' '.join(MAKE_TEST)})")
    args = ap.parse_args()
    if args.report:
        acct, log = map(Path, args.report)
    else:
        folder = args.keep or Path(tempfile.mkdtemp(prefix="suite-cpu-"))
        folder.mkdir(parents=True, exist_ok=True)
        acct, log = run(args.pytest_args or MAKE_TEST, folder)
        print(f"\nthe run's files: {acct} {log}")
    tests = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] \
        if log.exists() else []
    if not tests:
        sys.exit(f"suite_cpu.py: no test ran (nothing in {log}): nothing to report")
    report(read_accounting(acct), tests, args.top)


if __name__ == "__main__":
    main()
