"""`grader check --watch`: the warm sandbox stays up and checks the file again on each
save, in the project (the trusted side outside, the code in its sandbox) and in a
student bundle (where bwrap works, the whole check inside it, fed each saved version
by the process outside); Ctrl-C ends it cleanly. Saves are made as editors make them:
a new file renamed over the old one."""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.run import practice_run

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = (ROOT / "solutions" / "13_moe.py").read_text()
# a known mistake in router: softmax over the tokens
MISTAKE = SOLUTION.replace("F.softmax(gate(x_flat), dim=-1)", "F.softmax(gate(x_flat), dim=0)")
WAIT_S = 600  # far above what a loaded machine takes: a hung watch fails, a slow one not

pytestmark = pytest.mark.slow


def save(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    os.replace(tmp, path)


def lines(proc: subprocess.Popen) -> "queue.Queue[str]":
    """The process's stdout, line by line, read by a thread (a hung watch fails the
    test after WAIT_S instead of hanging it)."""
    found: queue.Queue[str] = queue.Queue()

    def read() -> None:
        with proc.stdout:  # closed when it ends: the test leaves no pipe open
            for line in proc.stdout:
                found.put(line)
        found.put("")

    threading.Thread(target=read, daemon=True).start()
    return found


def watch_saves(file: Path, versions: list[str], cwd: Path, env: dict | None = None,
                options: tuple[str, ...] = (),
                grader: tuple[str, ...] = ("-m", "grader.cli")) -> tuple[list[dict], str]:
    """`grader check --watch --json` on `file`, saved with each version in turn (the
    first before it starts), a report awaited after each; then Ctrl-C: the reports and
    what it wrote on stderr."""
    save(file, versions[0])
    # as a terminal starts it: a test run launched in the background (`make test &`)
    # ignores SIGINT, which the watch would inherit, and Python then never raises
    # KeyboardInterrupt (the watch ran on after Ctrl-C until WAIT_S)
    proc = subprocess.Popen([sys.executable, *grader, "check", *options,
                             "--watch", "--json", str(file)], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out = lines(proc)
    reports = []
    try:
        for following in [*versions[1:], None]:
            line = out.get(timeout=WAIT_S)
            assert line, proc.stderr.read()
            reports.append(json.loads(line))
            if following is not None:
                save(file, following)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:  # Ctrl-C lost: fail with what it printed
            proc.kill()
            code = proc.wait()
    with proc.stderr:
        stderr = proc.stderr.read()
    assert code == 130, stderr  # ended by Ctrl-C, having checked every version
    return reports, stderr


def watch_two_saves(work: Path, cwd: Path, env: dict | None = None,
                    grader: tuple[str, ...] = ("-m", "grader.cli")) -> tuple[list[dict], str]:
    """The reports of a watch on a correct file, saved with a mistake, saved fixed."""
    return watch_saves(work / "13_moe.py", [SOLUTION, MISTAKE, SOLUTION], cwd, env,
                       grader=grader)


def outcome(report: dict) -> dict:
    return {name: (part["passed"], (part["likely_mistake"] or {}).get("id"))
            for name, part in report["parts"].items()}


def assert_rechecked(reports: list[dict], stderr: str) -> None:
    first, mistaken, fixed = reports
    assert first["passed"] == first["total"] == 5
    assert outcome(mistaken)["router"] == (0, "softmax_token_dim"), mistaken
    assert mistaken["passed"] < 5
    assert outcome(fixed) == outcome(first)
    assert "Traceback" not in stderr, stderr


def test_watch_in_the_project_checks_again_on_each_save(tmp_path):
    assert_rechecked(*watch_two_saves(tmp_path, ROOT))


def test_watch_in_a_bundle_checks_again_on_each_save(student_bundle, tmp_path):
    """Run from the student's work folder, as an installed bundle's command is (its
    pyproject.toml's `grader`): the bundle's course.yml is found beside its grader."""
    bundle = student_bundle("13")
    env = {**os.environ, "PYTHONPATH": str(bundle)}
    bundles_grader = ("-c", "from grader.cli.student import student; student()")
    assert_rechecked(*watch_two_saves(tmp_path, tmp_path, env, grader=bundles_grader))


def test_a_watch_warms_what_failing_parts_ask_and_stops_at_a_save(course):
    """`--watch` computes, while the student edits, the reference's side of every fresh
    input a failing part's feedback uses, so that a failing save does not pay for the
    solution's import and traces; a save stops it before its next request."""
    from grader.judge import divergence
    from grader.judge.context import LessonContext

    ctx = LessonContext(course, "13")
    warm = threading.Event()
    practice_run._warm(ctx, lambda: True, warm)  # saved at once: nothing computed
    assert not warm.is_set() and not ctx.refs.traces
    practice_run._warm(ctx, lambda: False, warm)
    assert warm.is_set() and len(ctx.refs.traces) >= 50
    # all recorded now: a trace asks nothing of the correct variants (seconds to find)
    again = LessonContext(course, "13")
    again.refs.traces.update(ctx.refs.traces)
    lessons = divergence.lesson_traces(again)
    for part in ("router", "dispatch"):
        assert lessons.references(part)
    assert callable(lessons.variants)  # never needed, never generated


def test_a_watch_ended_by_sigterm_or_a_closed_terminal_cleans_up(tmp_path):
    """A closed terminal (SIGHUP) or a kill (SIGTERM) ends a watch as Ctrl-C does: its
    sandbox closed and its temporary folders removed, the status 128 + the signal's
    number. A SIGHUP the shell had ignored (`nohup`) stays ignored: the watch goes on
    checking saves."""
    file, scratch = tmp_path / "13_moe.py", tmp_path / "tmp"
    scratch.mkdir()
    save(file, SOLUTION)

    def with_sighup(handler) -> Callable[[], None]:
        def setup() -> None:  # whatever the test run was started with (`nohup` ignores it)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, handler)
        return setup

    for signum, ignored in ((signal.SIGHUP, False), (signal.SIGTERM, True)):
        setup = with_sighup(signal.SIG_IGN if ignored else signal.SIG_DFL)
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "check", "--watch",
                                 "--json", str(file)], cwd=ROOT,
                                env={**os.environ, "TMPDIR": str(scratch)}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=setup)
        out = lines(proc)
        try:
            assert out.get(timeout=WAIT_S), proc.stderr.read()
            assert list(scratch.iterdir()), "the watch keeps its file in TMPDIR"
            if ignored:  # a save is still checked
                proc.send_signal(signal.SIGHUP)
                save(file, MISTAKE)
                line = out.get(timeout=WAIT_S)
                assert line and outcome(json.loads(line))["router"][0] == 0
            proc.send_signal(signum)
            code = proc.wait(timeout=WAIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        with proc.stderr:
            stderr = proc.stderr.read()
        assert code == 128 + signum, stderr
        assert "Traceback" not in stderr, stderr
        assert list(scratch.iterdir()) == []
        save(file, SOLUTION)
