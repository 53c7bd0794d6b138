#!/usr/bin/env python
"""How fast `grader run` grades a class, against the compute it does, measured here and now.

    .venv/bin/python scripts/benchmark.py            # 200 copies, --jobs = the cores
    .venv/bin/python scripts/benchmark.py --n 100 --jobs 2
    .venv/bin/python scripts/benchmark.py --class-sizes 100,1000,10000 [--against OLD_CHECKOUT]
    .venv/bin/python scripts/benchmark.py --busy 10,60 [--against OLD_CHECKOUT]
    .venv/bin/python scripts/benchmark.py --compare-lessons 13,13b [--against OLD_CHECKOUT]

It grades N copies of the lesson-13 solution (each with its own trailing comment, so
no cache by content can help) through the `grader` CLI as a subprocess, as a TA
would, and prints, all measured in this one run on the same cores:

* submissions per second of a first run (and its start-up: time to the first result);
* the pure probe compute per submission: the solution answering every request the
  graded tests make, warm, in this one process (CPU time, one thread, as in the
  sandbox): what grading one student cannot do without;
* the machine's busy CPU per submission during the first run after start-up
  (/proc/stat from the first result on disk to the end, so other load shows too),
  and the sandboxed child's share of it;
* the ratio of the two: the harness's overhead over the compute (target: 3x or less).
  `import torch` is no yardstick: it took 1 s to 5 s on the same machines;
* a no-change rerun against the first run;
* peak memory per worker, from /proc sampled every 0.2 s during a separate --force
  run (sampling costs CPU the timed run must not lose): VmHWM (the kernel's peak RSS
  per process) of the trusted workers, the sandbox's zygote and slots, and the
  per-submission children, and the peak PSS of the workers and the sandbox together,
  divided by the jobs (PSS splits pages shared after fork, so it sums honestly,
  where RSS would count torch once per process);
* kill-and-resume: a second run, SIGKILLed (its whole process group) once half the
  results are on disk, then rerun; its scores.json must equal the first run's,
  student by student, with nothing graded twice.

With --class-sizes it measures instead how the parent's memory grows with the class:
for each size, a class of that many copies of the sample class's students (examples/13,
but for frank, whose endless loop holds a worker 20 s a copy), graded, then read back
by a no-change rerun; it prints the parent's peak memory (VmHWM) in each, how much
the largest class's grading peak exceeds the smallest's (target: 5 %), and the KB each
sample student takes in OUT (results/, raw/ and the page). With --against
(a checkout of the old code, e.g. `git worktree add /tmp/old main`) the old code grades
the smallest class and reads back each class too, and both codes' scores.json and
report.html of each class are compared byte for byte.

With --busy SMALL,LARGE it measures instead the busy CPU per student: a class of SMALL
and one of LARGE copies of the solution (a correct class), then of examples/13/grace
(every student a known mistake), each graded --rounds times; a student's figure is the
difference of the two runs' CPU over the difference of their sizes (start-up cancels
out), against the pure compute measured before and after each round (targets: 3x and
6x), and how much of it the sandboxed children spent. With --against, the old code's
figures beside the new code's, in the same run: each code grades its own checkout's
course (an old grader reads neither a newer course.yml nor hidden tests written for a
newer one) and is divided by the compute of its own course's graded requests, which
each code measures in a process of its own (`code_compute`).

With --compare-lessons KEY,KEY,... it measures instead each lesson's busy CPU and wall
time per submission, a class of N copies of its solution against one of N/10 (start-up
cancels out), the lessons' runs alternating, and prints each lesson's figures against
the first's: lesson 13b (its stand-ins answered by the trusted side) against lesson 13
is issue 57's yardstick. With --against, the old code grades the same classes of its own
course's lessons in the same rounds, and its ratios are printed beside the new code's.

Exit status 1 only when a correctness check fails; speed targets are reported.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from grader.store import Store  # OUT's layout: its one home

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv" / "bin"
PYTHON = VENV / "python"
GRADER = VENV / "grader"
LESSON = "13"
SAMPLE = REPO / "examples" / LESSON
LEFT_OUT = ("frank",)  # his endless loop holds a worker for the 20 s timeout, every copy
PARENT_EVERY = 0.02    # s between reads of the parent's VmHWM: its peak may come at its end


# ------------------------------------------------------------------------ set-up

def make_class(root: Path, n: int, solution: Path, exercise: str = "13_moe.py") -> Path:
    solution = solution.read_text(encoding="utf-8")
    subs = root / "subs"
    for i in range(n):
        d = subs / f"s{i:05d}"
        d.mkdir(parents=True)
        (d / exercise).write_text(f"{solution}\n# benchmark copy {i}\n", encoding="utf-8")
    return subs


def make_sample_class(root: Path, n: int) -> Path:
    """n students, copies of the sample class's in turn, each file marked as its own."""
    students = sorted(d for d in SAMPLE.iterdir() if d.is_dir() and d.name not in LEFT_OUT)
    subs = root / f"class-{n}"
    shutil.rmtree(subs, ignore_errors=True)
    for i in range(n):
        src = students[i % len(students)]
        dest = subs / f"{src.name}-{i:05d}"
        dest.mkdir(parents=True)
        for f in src.iterdir():
            if f.suffix == ".py":
                (dest / f.name).write_text(f"{f.read_text(encoding='utf-8')}\n# copy {i}\n",
                                           encoding="utf-8")
            elif f.suffix == ".ipynb":
                nb = json.loads(f.read_text(encoding="utf-8"))
                nb.setdefault("metadata", {})["benchmark_copy"] = i
                (dest / f.name).write_text(json.dumps(nb), encoding="utf-8")
            else:
                shutil.copy2(f, dest / f.name)
    return subs


def snapshot_course(dest: Path, checkout: Path = REPO) -> Path:
    """A frozen copy of `checkout`'s course.yml and every lesson's solution, stub and
    hidden tests: an edit of the course in the work tree while this runs (which changes
    the lesson version, so everything is regraded) cannot spoil the rerun and resume
    figures. Each code of --busy grades its own checkout's course: an old code reads
    neither a newer course.yml nor hidden tests written for a newer grader."""
    from grader import config

    course = config.load(checkout / "course.yml")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copy2(checkout / "course.yml", dest / "course.yml")
    paths = [p for lesson in course.lessons.values()
             for p in (lesson.solution, lesson.stub, lesson.tests)]
    if isinstance(course.roster, Path):
        paths.append(course.roster)
    for rel in paths:
        src = course.path(rel)
        if rel.is_absolute() or not src.exists():
            continue
        if src.is_dir():
            shutil.copytree(src, dest / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest / "course.yml"


COURSE = REPO / "course.yml"  # replaced by the snapshot in main()


def grader_cmd(subs: Path, out: Path, jobs: int, extra: list[str],
               course: Path | None = None, lesson: str = LESSON) -> list[str]:
    return [str(GRADER), "run", "--course", str(course or COURSE), "--lesson", lesson,
            "--submissions", str(subs), "--out", str(out), "--jobs", str(jobs), *extra]


# ------------------------------------------------------------------------ /proc

def _stat(pid: int) -> tuple[int, str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1:raw.rindex(")")]
    ppid = int(raw[raw.rindex(")") + 2:].split()[1])
    return ppid, comm


def _status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """pid -> (ppid, comm) for every live descendant of root (root included)."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            procs[int(entry)] = st
    children = defaultdict(list)
    for pid, (ppid, _) in procs.items():
        children[ppid].append(pid)
    out, stack = {}, [root]
    while stack:
        pid = stack.pop()
        if pid in procs:
            out[pid] = procs[pid]
            stack.extend(children[pid])
    return out


class MemorySampler:
    """Roles in a `grader run` tree: parent -> trusted workers, and parent -> bwrap ->
    zygote and its slots -> submission child (the parent starts the sandbox, each
    worker uses one slot)."""

    def __init__(self, root: int, every: float = 0.2):
        self.root, self.every = root, every
        self.hwm = defaultdict(int)      # role -> max VmHWM (kB) of any process in it
        self.run_pss = 0                 # max PSS (kB) of the workers and the sandbox
        self.counts = defaultdict(set)   # role -> pids seen
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "MemorySampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _roles(self, tree: dict[int, tuple[int, str]]) -> dict[int, tuple[str, int]]:
        """pid -> (role, the slot part it belongs to: a trusted worker or a sandbox).
        The parent starts both the workers and the sandbox (bwrap -> zygote/slots -> child)."""
        roles: dict[int, tuple[str, int]] = {self.root: ("parent", 0)}
        order = sorted(tree)  # parents before children is not guaranteed: iterate to fixpoint
        changed = True
        while changed:
            changed = False
            for pid in order:
                if pid in roles or tree[pid][0] not in roles:
                    continue
                prole, group = roles[tree[pid][0]]
                comm = tree[pid][1]
                if prole == "parent":
                    role, group = ("bwrap", -pid) if comm == "bwrap" else ("trusted worker", pid)
                elif prole == "bwrap":
                    role = "bwrap" if comm == "bwrap" else "zygote"
                elif prole == "trusted worker":
                    role = "trusted worker"
                else:
                    role = "submission child"
                roles[pid] = (role, group)
                changed = True
        return roles

    def _run(self) -> None:
        tick, every = 0, max(1, round(self.every / PARENT_EVERY))
        while not self._stop.is_set():
            # the parent's peak may come in its last moments (scores.json, the report):
            # its own VmHWM is read often, the whole tree less often (smaps costs CPU)
            self.hwm["parent"] = max(self.hwm["parent"], _status_kb(self.root, "VmHWM"))
            tick += 1
            if (tick - 1) % every:
                self._stop.wait(PARENT_EVERY)
                continue
            tree = descendants(self.root)
            roles = self._roles(tree)
            pss = 0
            for pid, (role, _group) in roles.items():
                self.hwm[role] = max(self.hwm[role], _status_kb(pid, "VmHWM"))
                self.counts[role].add(pid)
                if role != "parent":
                    pss += _pss_kb(pid)
            self.run_pss = max(self.run_pss, pss)
            self.samples += 1
            self._stop.wait(PARENT_EVERY)


# ------------------------------------------------------------------------ runs

def count_results(out: Path) -> int:
    return sum(1 for p in Store(out).result_files() if not p.name.startswith("."))


def graded_now(log: str) -> int | None:
    m = re.search(r"graded now\s*│\s*(\d+)", log)
    return int(m.group(1)) if m else None


def busy_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy (user, system, irq), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed_run(cmd: list[str], log: Path, sample_memory: bool = False,
              watch: Path | None = None, env: dict | None = None) -> dict:
    """Run the CLI; time it, and optionally sample memory and the first result's time."""
    busy = busy_cpu_seconds()
    started = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True, env=env)
        sampler = MemorySampler(proc.pid).start() if sample_memory else None
        first, busy_first, done_first = None, None, 0
        while proc.poll() is None:
            if watch is not None and first is None and (done_first := count_results(watch)):
                first, busy_first = time.monotonic() - started, busy_cpu_seconds()
            time.sleep(0.05)
        seconds = time.monotonic() - started
        busy = busy_cpu_seconds() - busy
        if sampler:
            sampler.stop()
    text = log.read_text()
    if proc.returncode != 0:
        sys.exit(f"grader run failed ({proc.returncode}): {' '.join(cmd)}\n{text[-3000:]}")
    return {"seconds": seconds, "first": first, "memory": sampler, "graded": graded_now(text),
            "busy": busy, "busy_after_first": (None if busy_first is None else
                                              busy_cpu_seconds() - busy_first),
            "done_first": done_first}


def probe_compute(course_yml: Path, reps: int) -> dict:
    """CPU seconds for the solution to answer every request of the graded tests once,
    warm, in this process: the compute a submission's grading cannot avoid."""
    import torch

    from grader import config
    from grader.judge import runner
    from grader.judge.context import LessonContext

    torch.set_num_threads(1)  # as the sandbox and the trusted workers run
    ctx = LessonContext(config.load(course_yml), LESSON)
    requests = runner.grade_solution(ctx)
    refs = ctx.refs
    calls = [(getattr(refs.probes, r["probe"]), r["args"]) for r in requests.values()]

    def once() -> None:
        for probe, args in calls:
            probe(refs.reference.module, **args)

    once()  # warm: first-use costs are paid once per worker in the real run too
    started = time.process_time()
    for _ in range(reps):
        once()
    return {"requests": len(calls), "cpu_s": (time.process_time() - started) / reps}


def kill_and_resume(subs: Path, out: Path, jobs: int, n: int, logs: Path) -> dict:
    cmd = grader_cmd(subs, out, jobs, [])
    with open(logs / "killed.log", "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True)
        tree: dict = {}
        while proc.poll() is None and count_results(out) < n // 2:
            tree = descendants(proc.pid) or tree
            time.sleep(0.02)
        tree = descendants(proc.pid) or tree
        if proc.poll() is not None:
            sys.exit("the run to kill ended before half of its results were written; "
                     "use a larger --n")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    at_kill = count_results(out)
    time.sleep(1.0)  # the sandbox dies with its parent (PR_SET_PDEATHSIG)
    survivors = [pid for pid in tree if pid != proc.pid and _stat(pid) is not None
                 and _stat(pid)[0] in tree]
    torn = [p.name for p in Store(out).results_path.iterdir() if p.name.startswith(".tmp-")]
    resumed = timed_run(cmd, logs / "resumed.log")
    return {"at_kill": at_kill, "survivors": survivors, "torn": len(torn),
            "resume_seconds": resumed["seconds"], "resume_graded": resumed["graded"]}


def child_times(out: Path) -> list[float]:
    """CPU seconds of each student's sandboxed children (each result's timing.cpu_s)."""
    return [json.loads(p.read_text(encoding="utf-8"))["timing"]["cpu_s"]
            for p in Store(out).result_files()]


def child_cpu(out: Path) -> float:
    """Mean CPU seconds of the sandboxed child per student (from the results)."""
    times = child_times(out)
    return sum(times) / max(len(times), 1)


def per_student(out: Path) -> dict:
    doc = json.loads(Store(out).scores_path.read_text(encoding="utf-8"))
    return {s["student_id"]: (s["score"], s["status"],
                              tuple(sorted((k, v["score"]) for k, v in s["parts"].items())))
            for s in doc["students"]}


# ------------------------------------------------------------------------ report

def mib(kb: int) -> str:
    return f"{kb / 1024:.0f} MiB"


def table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    vwidth = max(len(v) for _, v in rows)
    line = f"+-{'-' * width}-+-{'-' * vwidth}-+"
    return "\n".join([line, *(f"| {k:<{width}} | {v:>{vwidth}} |" for k, v in rows), line])


def out_per_student(out: Path) -> dict[str, float]:
    """KB a student takes in OUT (results/, raw/ and their page), for the first copy of
    each sample student: alice is correct, bob and grace each have a known mistake."""
    store, sizes = Store(out), {}
    for result in (p for p in store.result_files() if re.fullmatch(r".*-0000\d", p.stem)):
        sid = result.stem  # the sample ids are plain names: their own file names
        files = [result, store.raw_log_path(sid), store.feedback_path(sid)]
        sizes[sid.rsplit("-", 1)[0]] = sum(f.stat().st_size for f in files if f.exists()) / 1000
    return sizes


def old_cmd(subs: Path, out: Path, jobs: int, old: Path,
            course: Path | None = None, lesson: str = LESSON) -> tuple[list[str], dict]:
    """`grader run` as the code in `old` runs it: its package first on the path (before
    the working folder, which `python -c` puts first, and which is this checkout)."""
    cmd = grader_cmd(subs, out, jobs, [], course, lesson)
    env = {**os.environ, "PYTHONPATH": str(old)}
    code = f"import sys; sys.path.insert(0, {str(old)!r}); from grader.cli import main; main()"
    return [str(PYTHON), "-c", code, *cmd[1:]], env


def class_sizes(root: Path, sizes: list[int], jobs: int, old: Path | None) -> bool:
    """The parent's peak memory against the class size (see the module's doc); False
    when the old code wrote other bytes than the new."""
    rows, peaks, same = [], {}, True
    # The reference's results kept (grader.judge.kept) before any class is measured: where
    # the cache is cold, as after any change to the grader's code, the first class's
    # parent would import the solution and compute them, and its peak would hold that.
    print("warming the kept results …", flush=True)
    timed_run(grader_cmd(make_sample_class(root, min(sizes)), root / "out-warm", jobs, []),
              root / "warm.log")
    shutil.rmtree(root / "out-warm", ignore_errors=True)
    for n in sizes:
        subs = make_sample_class(root, n)
        out = root / f"out-{n}"
        shutil.rmtree(out, ignore_errors=True)
        print(f"class of {n}: grading …", flush=True)
        graded = timed_run(grader_cmd(subs, out, jobs, []), root / f"class-{n}.log",
                           sample_memory=True)
        print(f"class of {n}: reading back …", flush=True)
        reread = timed_run(grader_cmd(subs, out, jobs, []), root / f"reread-{n}.log",
                           sample_memory=True)
        peaks[n] = graded["memory"].hwm["parent"]
        if n == min(sizes):
            rows += [(f"OUT per student: {name} (results, raw, page)", f"{kb:.0f} KB")
                     for name, kb in out_per_student(out).items()]
        rows += [(f"{n} students: grading, wall time", f"{graded['seconds']:.0f} s"),
                 (f"{n} students: grading, parent peak (VmHWM)", mib(peaks[n])),
                 (f"{n} students: no-change rerun, parent peak",
                  mib(reread["memory"].hwm["parent"]))]
        if old is not None and n == min(sizes):  # grading the largest twice: too long
            print(f"class of {n}: the old code grades it …", flush=True)
            cmd, env = old_cmd(subs, root / f"out-old-{n}", jobs, old)
            shutil.rmtree(root / f"out-old-{n}", ignore_errors=True)
            theirs = timed_run(cmd, root / f"old-class-{n}.log", sample_memory=True, env=env)
            rows.append((f"{n} students: grading, old code, parent peak",
                         mib(theirs["memory"].hwm["parent"])))
        if old is not None:
            print(f"class of {n}: the old code reads it back …", flush=True)
            mine = {f: f.read_bytes() for f in (Store(out).scores_path, Store(out).report_path)}
            cmd, env = old_cmd(subs, out, jobs, old)
            theirs = timed_run(cmd, root / f"old-reread-{n}.log", sample_memory=True, env=env)
            equal = all(f.read_bytes() == b for f, b in mine.items())
            same = same and equal and theirs["graded"] == 0
            rows += [(f"{n} students: no-change rerun, old code, parent peak",
                      mib(theirs["memory"].hwm["parent"])),
                     (f"{n} students: old code wrote the same scores.json and report",
                      "yes" if equal else "NO")]
    print()
    print(table(rows))
    small, large = min(sizes), max(sizes)
    if large > small:
        growth = 100 * (peaks[large] / peaks[small] - 1)
        print(f"\nparent peak while grading, {large} against {small} students: "
              f"{growth:+.1f} % ({'meets' if growth <= 5 else 'MISSES'} the 5 % target)")
    print("notes: VmHWM of the `grader run` process from /proc, read every "
          f"{PARENT_EVERY} s; the class is examples/{LESSON}'s students but "
          f"{', '.join(LEFT_OUT)}, copied in turn")
    print(f"logs and outputs: {root}")
    return same


CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1's CPU accounting, where root has it


def tree_cpu(cmd: list[str], log: Path, env: dict | None = None) -> float:
    """CPU seconds of every process of a run: as root where cgroup v1's cpuacct is
    mounted, the usage of a cgroup of its own, which every process it starts stays in
    (the sandbox's too, however each ends); else the run's rusage once reaped, which
    holds only what each parent reaped (a process killed with the sandbox's pid
    namespace is not). Other work on the machine is in neither, as it is in /proc/stat."""
    group = None
    if os.geteuid() == 0 and (CPUACCT / "cpuacct.usage").exists():
        group = CPUACCT / f"grader-bench-{os.getpid()}"
        group.mkdir(exist_ok=True)

    def enter() -> None:  # in the child, before it runs anything
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    try:
        with open(log, "w") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO,
                                    start_new_session=True, env=env, preexec_fn=enter)
            _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"grader run failed: {' '.join(cmd)}\n{log.read_text()[-3000:]}")
        if group is None:
            return usage.ru_utime + usage.ru_stime
        while (group / "cgroup.procs").read_text().strip():  # stragglers: let them end
            time.sleep(0.1)
        return int((group / "cpuacct.usage").read_text()) / 1e9
    finally:
        if group is not None:
            group.rmdir()


def code_cmd(subs: Path, out: Path, jobs: int, code: Path,
             course: Path) -> tuple[list[str], dict]:
    """`grader run` as the checkout `code` runs it (this checkout's .venv)."""
    return old_cmd(subs, out, jobs, code, course)


def code_compute(code: Path, course: Path, reps: int) -> float:
    """The pure compute of `probe_compute`, as the checkout `code` measures it on its
    own course (`course`): its graded requests, its grader, in a process of its own."""
    script = (f"import json, sys; sys.path[:0] = [{str(code)!r}, {str(code / 'scripts')!r}]; "
              "from pathlib import Path; import benchmark; "
              f"print(json.dumps(benchmark.probe_compute(Path({str(course)!r}), {reps})))")
    done = subprocess.run([str(PYTHON), "-c", script], cwd=code, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(code)})
    if done.returncode != 0:
        sys.exit(f"the compute of {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["cpu_s"]


def busy_run(root: Path, kind: str, name: str, code: tuple[Path, Path], subs: Path,
             jobs: int, label: str, said: str) -> tuple[float, float]:
    """One run of `code` on the class: its CPU (`tree_cpu`), and how much of it the
    sandboxed children spent (`child_times`: the rest is the trusted workers', the
    slots' and the parent's). Each code has a cache of its own: a code's first run
    computes the reference's results and keeps them (kept.py), and the codes' kept
    recordings are named by their code, so in a shared cache each run of one code
    replaced the other's, and the next run of the other computed them again: in
    whichever class size it came first, which skewed the difference either way (each
    code's first run is an untimed warm-up)."""
    out = root / f"busy-out-{kind}-{name}-{label}"
    shutil.rmtree(out, ignore_errors=True)
    cmd, env = code_cmd(subs, out, jobs, *code)
    env["XDG_CACHE_HOME"] = str(root / f"cache-{name}")
    print(f"busy CPU: {kind}, {name} code, {said} …", flush=True)
    total = tree_cpu(cmd, root / f"busy-{kind}-{name}-{label}.log", env)
    return total, sum(child_times(out))


def busy_per_student(root: Path, small: int, large: int, jobs: int, rounds: int,
                     codes: dict[str, tuple[Path, Path]],
                     compute: Callable[[str], float],
                     only: str | None = None) -> None:
    """Busy CPU per student for a correct class (copies of the solution) and a
    mistaken one (copies of examples/13/grace: two known mistakes, every failing part
    explained), each code's, as the difference between a class of `large` and one of
    `small` (start-up cancels out), divided by the pure compute; codes alternate run
    by run so that load on the machine falls on both alike. The compute is measured
    again in every round, beside the runs it divides: on a shared machine a CPU second
    buys more or less work from one minute to the next (the same warm compute read 48
    and 78 ms in one hour here), and a ratio of two readings taken apart skews with it.
    `codes`: name -> (checkout, its course snapshot); each code is divided by the compute
    of its own course's graded requests (`compute(name)`); `only` keeps one class."""
    kinds = {"correct": COURSE.parent / "solutions" / "13_moe.py",
             "mistaken": SAMPLE / "grace" / "13_moe.py"}
    kinds = {k: v for k, v in kinds.items() if only in (None, k)}
    cpu: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
    computes: dict[tuple[str, str], list[float]] = defaultdict(list)
    for name in codes:  # each code's own kept recording (kept.py): see `busy_run`
        shutil.rmtree(root / f"cache-{name}", ignore_errors=True)
    for kind, source in kinds.items():
        for n in (small, large):
            shutil.rmtree(root / f"busy-{kind}-{n}", ignore_errors=True)
        classes = {n: make_class(root / f"busy-{kind}-{n}", n, source) for n in (small, large)}
        for name in codes:
            busy_run(root, kind, name, codes[name], classes[small], jobs, "warm",
                     "warming its kept results")
        for r in range(rounds):
            before = {name: compute(name) for name in codes}
            names = list(codes) if r % 2 == 0 else list(reversed(codes))
            for name in names:
                for n, subs in classes.items():
                    cpu[kind, name, n].append(busy_run(
                        root, kind, name, codes[name], subs, jobs, str(n),
                        f"{n} students (round {r + 1})"))
            for name in codes:  # the round's, either side
                computes[kind, name].append((before[name] + compute(name)) / 2)
    rows = []
    ratio: dict[tuple[str, str], float] = {}
    ms: dict[tuple[str, str], float] = {}  # the median of the rounds' CPU per student
    for kind in kinds:
        for name in codes:
            span = large - small
            by_round = [((b - a) / span, (cb - ca) / span, c)
                        for (a, ca), (b, cb), c in zip(cpu[kind, name, small],
                                                       cpu[kind, name, large],
                                                       computes[kind, name])]
            each = sorted((per / c, per, child) for per, child, c in by_round)
            ratio[kind, name], per, child = each[len(each) // 2]  # the median round's
            ms[kind, name] = sorted(p for p, _, _ in by_round)[len(by_round) // 2]
            rows.append((f"{kind} class, {name} code: CPU per student (median of {rounds})",
                         f"{1000 * per:.0f} ms = {ratio[kind, name]:.1f}x compute"))
            rows.append(("  of which the sandboxed child / the rest",
                         f"{1000 * child:.0f} ms / {1000 * (per - child):.0f} ms"))
            rows.append(("  each round, against its compute",
                         ", ".join(f"{x:.1f}x" for x, _, _ in each)))
    print()
    print(table(rows))
    for kind in kinds:
        for name in codes:
            print(f"pure probe compute of the {name} code's course beside the {kind} "
                  "class's rounds: " + ", ".join(f"{1000 * c:.1f}" for c in
                                                  computes[kind, name]) + " ms")
    how = "a cpuacct cgroup's usage" if os.geteuid() == 0 and \
        (CPUACCT / "cpuacct.usage").exists() else "rusage of the reaped tree"
    targets = {"correct": 3, "mistaken": 6}
    for kind in kinds:
        line = f"  {kind}: {ratio[kind, 'new']:.1f}x compute " \
               f"({'meets' if ratio[kind, 'new'] <= targets[kind] else 'MISSES'} " \
               f"the {targets[kind]}x target)"
        if "old" in codes:
            line += (f"; new / old {ratio[kind, 'new'] / ratio[kind, 'old']:.2f} against "
                     f"each code's compute, {ms[kind, 'new'] / ms[kind, 'old']:.2f} in CPU "
                     "per student")
        print(line)
    print(f"notes: each figure is (CPU of a {large}-student run - CPU of a {small}-student "
          f"run) / {large - small}, the CPU of every process of the run ({how}), so other "
          "load on the machine is not counted; the compute is the solution answering "
          "every graded request, warm, one process, measured before and after each round "
          "(the mean of the two divides that round); the median round is shown; the "
          "child's share is the same difference of the results' timing.cpu_s (each "
          "child's rusage, reaped by its slot), the rest is the trusted workers', the "
          "slots' and the parent's")


def compare_lessons(root: Path, keys: list[str], n: int, jobs: int, rounds: int,
                    old: Path | None = None) -> None:
    """Lessons against one another in this one run (issue 57: lesson 13b at lesson 13's
    speed): for each, a class of n copies of its solution and a class of `n // 10`,
    graded --rounds times, the lessons' runs alternating so that load on the machine
    falls on each alike. A submission's busy CPU is the difference of the two runs' CPU
    (`tree_cpu`: every process of the run, no other load) over the difference of their
    sizes, so that start-up cancels out; its wall time likewise. Each lesson's median
    round, and each against the first lesson's. With `old` (a checkout), the old code
    grades the same classes of its own course's lessons too, in the same rounds."""
    from grader import config

    course = config.load(COURSE)
    codes = {"": None} if old is None else {
        "": None, " (old code)": (old, snapshot_course(root / "course-old", old))}
    small = max(2, n // 10)
    if n <= small:
        sys.exit(f"--n {n} is too small to compare lessons: use 20 or more")
    env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache-compare")}
    classes = {}
    for key in keys:
        lesson = course.lesson(key)
        if lesson.solution is None:
            sys.exit(f"lesson {key} has no solution to grade")
        for size in (small, n):
            shutil.rmtree(root / f"compare-{key}-{size}", ignore_errors=True)
        classes[key] = {size: make_class(root / f"compare-{key}-{size}", size,
                                         course.path(lesson.solution), lesson.exercise)
                        for size in (small, n)}
    runs = [(key, said, code) for said, code in codes.items() for key in keys]
    for key, said, code in runs:  # the reference's results kept (kept.py), untimed
        lesson_run(root, key, classes[key][small], jobs, "warm", env,
                   f"warming its kept results{said}", code)
    per: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        for key, said, code in (runs if r % 2 == 0 else list(reversed(runs))):
            (cpu_a, wall_a, child_a), (cpu_b, wall_b, child_b) = (
                lesson_run(root, key, classes[key][size], jobs, str(size), env,
                           f"{size} students (round {r + 1}){said}", code)
                for size in (small, n))
            span = n - small
            per[key + said].append(((cpu_b - cpu_a) / span, (wall_b - wall_a) / span,
                                    (child_b - child_a) / span))
            loads.append(os.getloadavg()[0])
    median = {key: sorted(rows)[len(rows) // 2] for key, rows in per.items()}
    rows = []
    for key in per:
        cpu, wall, child = median[key]
        rows += [(f"lesson {key}: busy CPU per submission (median of {rounds})",
                  f"{1000 * cpu:.0f} ms"),
                 ("  of which the sandboxed child / the rest",
                  f"{1000 * child:.0f} ms / {1000 * (cpu - child):.0f} ms"),
                 (f"lesson {key}: wall time per submission (--jobs {jobs})",
                  f"{1000 * wall:.0f} ms"),
                 ("  each round: CPU, wall", ", ".join(
                     f"{1000 * c:.0f}/{1000 * w:.0f} ms" for c, w, _ in per[key]))]
    print()
    print(table(rows))
    for said in codes:
        first = keys[0] + said
        for key in (k + said for k in keys[1:]):
            print(f"lesson {key} / lesson {first}, per submission: busy CPU "
                  f"{median[key][0] / median[first][0]:.2f}, wall time "
                  f"{median[key][1] / median[first][1]:.2f} (1.00 or less: at lesson "
                  f"{first}'s speed or better)")
    print(f"notes: each figure is (a run of {n} - a run of {small}) / {n - small}, every "
          "process of the run counted (busy CPU) and the run's wall time; the child's share "
          "is the same difference of the results' timing.cpu_s; load average (1 min) "
          f"{', '.join(f'{x:.1f}' for x in loads)} on {len(os.sched_getaffinity(0))} cores, "
          "before and after each lesson's round")
    print(f"logs and outputs: {root}")


def lesson_run(root: Path, key: str, subs: Path, jobs: int, label: str, env: dict,
               said: str, code: tuple[Path, Path] | None = None) -> tuple[float, float, float]:
    """One `grader run` of lesson `key` on the class (by this checkout's code, or by
    `code`: a checkout and its course): its CPU (`tree_cpu`), its wall time, and the
    CPU of its sandboxed children (`child_times`)."""
    name = f"{key}-{label}" + ("" if code is None else "-old")
    out = root / f"compare-out-{name}"
    shutil.rmtree(out, ignore_errors=True)
    print(f"lesson {key}: {said} …", flush=True)
    cmd, env = ((grader_cmd(subs, out, jobs, [], lesson=key), env) if code is None else
                old_cmd(subs, out, jobs, *code, lesson=key))
    if code is not None:  # a cache of its own: the codes' kept recordings differ
        env["XDG_CACHE_HOME"] = str(root / "cache-compare-old")
    started = time.monotonic()
    cpu = tree_cpu(cmd, root / f"compare-{name}.log", env)
    wall = time.monotonic() - started
    short = [s["student_id"] for s in json.loads(Store(out).scores_path.read_text("utf-8"))
             ["students"] if any(p["score"] != p["max_score"] for p in s["parts"].values())]
    if short:  # a copy of the solution below full marks: the figures would mean nothing
        sys.exit(f"lesson {key}: {len(short)} copies of the solution lost points in a "
                 f"part ({', '.join(short[:3])}): see {out}")
    return cpu, wall, sum(child_times(out))


def main() -> None:
    cores = len(os.sched_getaffinity(0))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="copies of the solution to grade")
    ap.add_argument("--jobs", type=int, default=cores, help="grader --jobs (default: cores)")
    ap.add_argument("--compute-reps", type=int, default=20,
                    help="passes over every graded request for the pure compute figure")
    ap.add_argument("--no-kill", action="store_true", help="skip the kill-and-resume check")
    ap.add_argument("--workdir", type=Path, help="keep the class and outputs here")
    ap.add_argument("--class-sizes", metavar="N,N,...",
                    help="instead: the parent's peak memory at these class sizes")
    ap.add_argument("--against", type=Path, metavar="CHECKOUT",
                    help="with --class-sizes: the old code, which reads back each class; "
                         "with --busy or --compare-lessons: the old code, measured beside "
                         "this one")
    ap.add_argument("--busy", metavar="SMALL,LARGE",
                    help="instead: busy CPU per student, correct and mistaken classes")
    ap.add_argument("--rounds", type=int, default=3,
                    help="with --busy or --compare-lessons: runs of each")
    ap.add_argument("--compare-lessons", metavar="KEY,KEY,...",
                    help="instead: busy CPU and wall time per submission of each lesson's "
                         "solution, a class of --n, and each against the first lesson's")
    ap.add_argument("--only", choices=("correct", "mistaken"),
                    help="with --busy: that class alone")
    ap.add_argument("--code", type=Path, metavar="CHECKOUT", default=REPO,
                    help="with --busy: the new code (default: this checkout)")
    args = ap.parse_args()
    if not GRADER.exists():
        sys.exit(f"no {GRADER}: install the project into .venv first")

    root = args.workdir or Path(tempfile.mkdtemp(prefix="grader-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    for name in ("subs", "out-first", "out-killed", "course"):
        shutil.rmtree(root / name, ignore_errors=True)
    n, jobs = args.n, args.jobs
    print(f"benchmark: lesson {args.compare_lessons or LESSON}, "
          f"{args.class_sizes or n} submissions, --jobs {jobs}, {cores} cores, "
          f"workdir {root}, load average {os.getloadavg()[0]:.1f}", flush=True)
    global COURSE
    COURSE = snapshot_course(root / "course")
    if args.compare_lessons:
        compare_lessons(root, args.compare_lessons.split(","), n, jobs, args.rounds,
                        args.against)
        return
    if args.busy:
        small, large = (int(x) for x in args.busy.split(","))
        codes = {"new": (args.code, COURSE if args.code == REPO else
                         snapshot_course(root / "course-new", args.code))}
        if args.against:
            codes["old"] = (args.against, snapshot_course(root / "course-old", args.against))
        busy_per_student(root, small, large, jobs, args.rounds, codes,
                         lambda name: code_compute(*codes[name], args.compute_reps), args.only)
        return
    if args.class_sizes:
        sizes = [int(x) for x in args.class_sizes.split(",")]
        if not class_sizes(root, sizes, jobs, args.against):
            sys.exit(1)
        return
    subs = make_class(root, n, COURSE.parent / "solutions" / "13_moe.py")

    print("pure probe compute …", flush=True)
    compute = probe_compute(COURSE, args.compute_reps)
    print("first run …", flush=True)
    first = timed_run(grader_cmd(subs, root / "out-first", jobs, []), root / "first.log",
                      sample_memory=True, watch=root / "out-first")
    print("no-change rerun …", flush=True)
    rerun = timed_run(grader_cmd(subs, root / "out-first", jobs, []), root / "rerun.log")
    # Memory is sampled in a run of its own: reading /proc/*/smaps_rollup several
    # times a second costs CPU the timed run would lose.
    print("memory run (--force, sampled) …", flush=True)
    sampled = timed_run(grader_cmd(subs, root / "out-first", jobs, ["--force"]),
                        root / "memory.log", sample_memory=True)
    kill = None
    if not args.no_kill:
        print("kill-and-resume …", flush=True)
        kill = kill_and_resume(subs, root / "out-killed", jobs, n, root)

    rate = n / first["seconds"]
    after = first["busy_after_first"]
    per_sub = after / max(n - first["done_first"], 1) if after is not None else None
    mem = sampled["memory"]
    steady = (n - 1) / max(first["seconds"] - first["first"], 1e-9) if first["first"] else None
    rows = [
        ("submissions", str(n)),
        ("jobs / cores", f"{jobs} / {cores}"),
        ("first run: wall time", f"{first['seconds']:.1f} s"),
        ("first run: submissions per second", f"{rate:.2f}/s"),
        ("  start-up (to first result on disk)", f"{first['first']:.1f} s" if first["first"] else "-"),
        ("  after start-up", f"{steady:.2f}/s" if steady else "-"),

        (f"pure probe compute ({compute['requests']} requests, warm, 1 process)",
         f"{1000 * compute['cpu_s']:.1f} ms"),
        ("first run: machine CPU busy (all processes)", f"{first['busy']:.1f} CPU-s"),
        ("  per submission, start-up included", f"{1000 * first['busy'] / n:.0f} ms"),
        ("  per submission, after start-up",
         f"{1000 * per_sub:.0f} ms" if per_sub is not None else "-"),
        ("  per submission, its sandboxed child", f"{1000 * child_cpu(root / 'out-first'):.0f} ms"),
        ("no-change rerun: wall time", f"{rerun['seconds']:.2f} s"),
        ("no-change rerun: graded again", str(rerun["graded"])),
        ("peak RSS (VmHWM), parent", mib(mem.hwm["parent"])),
        ("peak RSS (VmHWM), trusted worker", mib(mem.hwm["trusted worker"])),
        ("peak RSS (VmHWM), sandbox zygote or slot", mib(mem.hwm["zygote"])),
        ("peak RSS (VmHWM), submission child", mib(mem.hwm["submission child"])),
        ("peak PSS, workers + sandbox (all slots)", mib(mem.run_pss)),
        ("  per worker (that / jobs)", mib(mem.run_pss // jobs)),
        ("memory run (sampled, --force): wall time", f"{sampled['seconds']:.1f} s"),
        ("processes seen (workers/zygote+slots/children)",
         f"{len(mem.counts['trusted worker'])}/{len(mem.counts['zygote'])}/"
         f"{len(mem.counts['submission child'])}"),
    ]
    same = None
    if kill:
        a, b = per_student(root / "out-first"), per_student(root / "out-killed")
        same = a == b and len(a) == n
        nodup = kill["resume_graded"] == n - kill["at_kill"]
        rows += [
            ("kill: results on disk at SIGKILL", f"{kill['at_kill']}/{n}"),
            ("kill: processes left alive / torn temp files",
             f"{len(kill['survivors'])} / {kill['torn']}"),
            ("resume: graded now (expected)", f"{kill['resume_graded']} ({n - kill['at_kill']})"),
            ("resume: wall time", f"{kill['resume_seconds']:.1f} s"),
            ("resume: scores.json equals the first run's", "yes" if same else "NO"),
        ]
        same = same and nodup and not kill["survivors"]
    print()
    print(table(rows))
    ratio = per_sub / compute["cpu_s"] if per_sub is not None else float("nan")
    rerun_pct = 100 * rerun["seconds"] / first["seconds"]
    print()
    print("ratios")
    print(f"  busy CPU per submission / pure compute: {ratio:.1f}x  "
          f"({'meets' if ratio <= 3 else 'MISSES'} the 3x target)")
    print(f"  no-change rerun / first run:    {rerun_pct:.1f} %  "
          f"({'meets' if rerun_pct < 5 else 'MISSES'} the < 5 % target)")
    if kill:
        print(f"  kill at {kill['at_kill']}/{n}, resume / first run: "
              f"{100 * kill['resume_seconds'] / first['seconds']:.0f} %; scores "
              f"{'identical' if same else 'DIFFER (or duplicates or survivors)'}")
    print()
    print("notes: the pure compute is the mean of "
          f"{args.compute_reps} warm passes in one process; the busy CPU counts every process "
          "on the machine from the first result on disk to the end of the run, divided by "
          "the submissions graded in that time. Memory: /proc/<pid>/status VmHWM "
          "(peak RSS, counts pages shared with the zygote in each child) and "
          "/proc/<pid>/smaps_rollup Pss summed over the trusted workers and the sandbox (one "
          "zygote, its slots and their children), sampled every 0.2 s in a separate --force "
          f"run ({mem.samples} samples; children living < 0.2 s can be missed).")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {cores} cores "
          "(other work on the machine slows both sides alike, not evenly)")
    print(f"logs and outputs: {root}")
    if kill and not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
