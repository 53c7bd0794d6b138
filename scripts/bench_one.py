#!/usr/bin/env python
"""How long one submission alone takes, against the student's own imports, here and now.

    .venv/bin/python scripts/bench_one.py            # 3 rounds, on 2 cores and on 1
    .venv/bin/python scripts/bench_one.py --rounds 5 --cores 1
    .venv/bin/python scripts/bench_one.py --old ../main --no-gradescope  # old beside new
    .venv/bin/python scripts/bench_one.py --old ../main --only-gradescope --rounds 2
    .venv/bin/python scripts/bench_one.py --only-gradescope --lesson 13b
    .venv/bin/python scripts/bench_one.py --only-gradescope --submission FILE

What a student waits for is `grader check` and a Gradescope run. Their yardstick is
what the student's own file costs before it computes anything:
`python -c "import torch, transformers.activations"`. Each round runs, pinned to the
same cores and one after the other (so a busy moment hits them alike):

* imports: that yardstick;
* check, project: `grader check` on the solution in the project, where the grader
  holds the solution, so the student's code runs in a sandbox of its own;
* check, sandboxed: `grader check` in a student bundle, run by the `grader` the bundle
  installs, with bubblewrap where this machine has it (the whole check runs inside
  it, its zygote a fork of the grader);
* check, no bwrap: the same where bubblewrap is not installed (most students' laptops):
  the sandbox's zygote is a fork of the grader's process, one import for both;
* watch re-check: with `grader check --watch`, from a save to its report (each
  round saves twice: a known mistake, then the fix); target: under 0.5 s;
* gradescope: the autograder zip's run_autograder on one submission, as Gradescope
  runs it, in container mode (as root: CAP_SYS_ADMIN dropped with capsh, as
  Gradescope's Docker profile does), in its own memory cgroup, whose peak is the whole
  process tree's memory. `--only-gradescope`: the imports and this alone;
  `--lesson` (13 unless given) and `--submission` (the lesson's solution unless given,
  e.g. a file whose unlisted mistake makes the run answer stand-ins) pick what it
  grades.

With `--old DIR` (another checkout of the grader, e.g. the main branch), each round
also runs the three checks with that checkout's code, beside this one's: its bundle is
this one's with its own grader package and templates (the recorded practice results
are the same data); and the Gradescope run of the zip that checkout builds. Every command runs once, untimed, before the rounds: what a
student's second check costs (the project's check keeps the practice results it
computed in a cache, `grader.judge.kept`: here one of the run's own for each checkout).

It prints each one's median wall time and its ratio to the imports' median of the same
rounds (target: 1.25 or less), and the peak memory (target: under 600 MB). Exit 0:
targets are reported, not asserted (machines are noisy).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
IMPORTS = [PY, "-c", "import torch, transformers.activations"]


def timed(cmd: list[str], cores: int, cwd: Path | None = None,
          env: dict | None = None) -> float:
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):  # check exits 1 when a test fails
        sys.exit(f"{cmd[:4]} failed ({done.returncode}):\n{done.stdout[-2000:]}"
                 f"{done.stderr[-2000:]}")
    return seconds


def no_bwrap_path(tmp: Path) -> str:
    """A PATH without bubblewrap: the grader then runs check without it."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    return str(bin_dir)


def gradescope_setup(tmp: Path, repo: Path = REPO, lesson: str = "13",
                     submission: Path | None = None) -> Path | None:
    """The zip `repo`'s grader builds of `lesson`, unpacked as Gradescope would, with one
    submission (`submission`, else the lesson's solution): the autograder's root
    (source/, submission/)."""
    if os.geteuid() != 0 or not shutil.which("capsh"):
        return None
    tmp.mkdir(exist_ok=True)
    subprocess.run([PY, "-c", "import sys; from pathlib import Path\n"
                    "try:\n    from grader.deliver.autograder_zip import build\n"
                    "except ImportError:  # a checkout from before the stage packages\n"
                    "    from grader.autograder_zip import build\n"
                    "build(Path(sys.argv[1]), sys.argv[3], Path(sys.argv[2]))",
                    str(repo), str(tmp / "zip"), lesson], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(repo)})
    (zip_path,) = (tmp / "zip").glob("*.zip")
    root = tmp / "gs"
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    (root / "submission").mkdir(parents=True)
    entry = {str(k): v for k, v in yaml.safe_load((REPO / "course.yml").read_text(
        encoding="utf-8"))["lessons"].items()}[lesson]
    shutil.copy(submission or REPO / entry["solution"], root / "submission" / entry["exercise"])
    return root


def gradescope_run(root: Path, cores: int) -> tuple[float, int]:
    """The zip's run_autograder, as Gradescope runs it (as root, CAP_SYS_ADMIN dropped):
    seconds and peak bytes of the process tree (0 without a memory cgroup)."""
    from grader.sandbox import cgroup

    shutil.rmtree(root / "results", ignore_errors=True)
    group, _ = cgroup.create()
    enter = f"echo $$ > {group / 'cgroup.procs'}; " if group else ""
    cmd = [shutil.which("capsh") or "capsh", "--drop=cap_sys_admin", "--", "-c",
           f"{enter}exec {root / 'source' / 'run_autograder'}"]
    env = {"PATH": "/usr/bin:/bin", "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": PY}
    try:
        seconds = timed(cmd, cores, cwd=root, env=env)
        if not (root / "results" / "results.json").is_file():
            sys.exit(f"{root}: the Gradescope run wrote no results.json")
        peak = 0
        if group is not None:
            v1 = (group / "memory.max_usage_in_bytes").exists()
            peak = int((group / ("memory.max_usage_in_bytes" if v1 else "memory.peak"))
                       .read_text())
    finally:
        if group is not None:
            cgroup.remove(group)
    return seconds, peak


def watch_rechecks(cmd: list[str], file: Path, cores: int, rounds: int, cwd: Path,
                   env: dict | None = None) -> list[float]:
    """`grader check --watch --json FILE`: seconds from each save (a known mistake and
    the fix, in turn, renamed over the file as editors do) to its report."""
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    solution = (REPO / "solutions" / "13_moe.py").read_text()
    versions = [solution.replace("dim=-1)", "dim=0)", 1), solution]
    file.write_text(solution)

    def start() -> None:  # pinned, and with Ctrl-C as a terminal has it: this script
        os.sched_setaffinity(0, cpus)  # run in the background (`... &`) ignores SIGINT,
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # and the watch would never end

    proc = subprocess.Popen([*cmd[:-1], "--watch", "--json", str(file)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=start)
    seconds = []
    try:
        proc.stdout.readline()  # the first check
        for i in range(2 * rounds):
            tmp = file.with_name(".swp")
            tmp.write_text(versions[i % 2])
            started = time.monotonic()
            os.replace(tmp, file)
            if not proc.stdout.readline():
                sys.exit(f"{cmd[:4]} --watch ended")
            seconds.append(time.monotonic() - started)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait()
    return seconds


def bundles_check(bundle: Path) -> list[str]:
    """`grader check 13_moe.py` as the bundle's own `grader` runs it: the command group
    its pyproject.toml names (`grader.cli`'s before it had a module of its own, then
    `grader.student_cli`'s, now `grader.cli.student`'s)."""
    package = bundle / "grader"
    home = ("cli.student" if (package / "cli" / "student.py").exists() else
            "student_cli" if (package / "student_cli.py").exists() else "cli")
    return [PY, "-c", f"from grader.{home} import student; student()", "check", "13_moe.py"]


def old_bundle(bundle: Path, old: Path, dest: Path) -> Path:
    """This checkout's bundle with the old checkout's grader package and templates."""
    shutil.copytree(bundle, dest)
    for folder in ("grader", "templates"):
        shutil.rmtree(dest / folder)
        shutil.copytree(old / folder, dest / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cores", type=int, nargs="*", default=[2, 1])
    ap.add_argument("--old", type=Path, metavar="DIR",
                    help="another checkout whose checks run beside this one's")
    ap.add_argument("--no-gradescope", action="store_true",
                    help="leave out the Gradescope run (it builds the autograder zip)")
    ap.add_argument("--only-gradescope", action="store_true",
                    help="the imports and the Gradescope run alone (no check)")
    ap.add_argument("--lesson", default="13", help="the Gradescope run's lesson")
    ap.add_argument("--submission", type=Path, metavar="FILE",
                    help="what the Gradescope run grades (default: the lesson's solution)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-one-"))
    tmp.chmod(0o755)  # container mode's submission user crosses it to its scratch
    try:
        bundle = tmp / "bundle"
        if not args.only_gradescope:  # (the Gradescope run needs no bundle)
            subprocess.run([PY, "-m", "grader.cli", "student-bundle", "--lesson", "13",
                            "--out", str(bundle)], cwd=REPO, check=True, capture_output=True)
            shutil.copy(REPO / "solutions" / "13_moe.py", bundle / "13_moe.py")
        check = [PY, "-m", "grader.cli", "check", "--lesson", "13", "13_moe.py"]
        trees = [("", REPO, bundle)]
        if args.old:
            old = args.old.resolve()
            trees.append(("old ", old, bundle if args.only_gradescope
                          else old_bundle(bundle, old, tmp / "old-bundle")))
        # each checkout keeps its practice results in a cache of its own: in one cache,
        # a check keeps one recording per lesson, and the two would remove each other's
        cached = {tag: {**os.environ, "XDG_CACHE_HOME": str(tmp / f"{tag}cache")}
                  for tag, _, _ in trees}
        plain_path = no_bwrap_path(tmp)
        commands = [(f"{tag}check, {name}", cmd, cwd, env) for tag, repo, bun in trees
                    for name, cmd, cwd, env in (
                        ("project", [*check[:-1], "solutions/13_moe.py"], repo, cached[tag]),
                        ("sandboxed", bundles_check(bun), bun, cached[tag]),
                        ("no bwrap", bundles_check(bun), bun, {**cached[tag], "PATH": plain_path}))]
        commands.sort(key=lambda c: c[0].removeprefix("old "))  # old beside new
        if args.only_gradescope:
            commands = []
        for _, cmd, cwd, env in commands:  # warm: the disk cache, the practice results
            timed(cmd, max(args.cores), cwd=cwd, env=env)
        gs = {} if args.no_gradescope else {
            tag: setup for tag, repo, _ in trees
            if (setup := gradescope_setup(tmp / f"{tag}gs".replace(" ", ""), repo,
                                          args.lesson, args.submission))}
        for setup in gs.values():  # warm too
            gradescope_run(setup, max(args.cores))
        print(f"python {sys.version.split()[0]}, {args.rounds} rounds, medians "
              f"(ratio to the imports of the same rounds)")
        for cores in args.cores:
            times: dict[str, list[float]] = {}
            peaks: dict[str, list[int]] = {}
            for _ in range(args.rounds):
                times.setdefault("imports", []).append(timed(IMPORTS, cores))
                for name, cmd, cwd, env in commands:
                    times.setdefault(name, []).append(timed(cmd, cores, cwd=cwd, env=env))
                for tag, setup in gs.items():
                    seconds, peak = gradescope_run(setup, cores)
                    times.setdefault(f"{tag}gradescope (container mode)", []).append(seconds)
                    peaks.setdefault(tag, []).append(peak)
            for tag, repo, bun in trees:
                if not args.only_gradescope and any(  # the old one has no --watch
                        next((repo / "grader").rglob(name), None)
                        for name in ("practice_run.py", "checking.py")):
                    work = tmp / f"watch-{cores}"
                    work.mkdir(exist_ok=True)
                    times[f"{tag}watch re-check, project"] = watch_rechecks(
                        check, work / "13_moe.py", cores, args.rounds, repo, cached[tag])
                    times[f"{tag}watch re-check, sandboxed"] = watch_rechecks(
                        bundles_check(bun), bun / "13_moe.py", cores, args.rounds, bun, cached[tag])
            base = statistics.median(times["imports"])
            print(f"\n{cores} core(s):")
            for name, values in times.items():
                med = statistics.median(values)
                print(f"  {name:30} {med:6.2f} s  x{med / base:.2f}   "
                      f"(runs: {', '.join(f'{v:.2f}' for v in values)})")
            for tag, values in peaks.items():
                if any(values):
                    print(f"  {tag}gradescope peak memory, whole tree: "
                          f"{max(values) / 2**20:.0f} MiB")
        if not gs:
            print("\n(gradescope run skipped: " + ("--no-gradescope)" if args.no_gradescope
                                                   else "it needs root and capsh)"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
