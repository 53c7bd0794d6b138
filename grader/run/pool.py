"""Grading a class on one machine: warm, forked workers, each with its own sandbox slot.

The parent pays once for torch, the hidden tests and the reference outputs (it
grades the solution itself first, which also proves the hidden tests give it
full marks), then forks N workers that inherit all of that. The sandbox boots
once (torch and the lesson's imports, while the parent warms up) and gives each
worker a slot of its own (its own uid and namespaces). Each worker runs one
pytest session over the submissions it pulls from a shared queue, and writes
each result atomically as soon as it has it.

Its counterpart on many machines is cluster.py (Dask): both give each worker one
warm slot and grade with `runner.grade_many`; the parent (here) or the client (there)
alone writes OUT."""
from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import queue
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from grader.judge import runner
from grader.judge.runner import grade_solution
from grader.judge.context import LessonContext
from grader.pages.feedback import render_student, run_templates, stored
from grader.judge.plan import Submission, Summary
from grader.record import GradeRecord
from grader.sandbox.limits import Limits, SandboxError
from grader.sandbox.slot import Sandbox, Slot
from grader.store import Store
from grader.judge.tally import Entry

DONE = None


def _worker(index: int, slot: Slot, ctx: LessonContext, out: Path, language: str,
            tasks: mp.Queue, events: mp.Queue) -> None:
    # Ctrl-C reaches the whole process group: the parent alone stops the run (it kills
    # the workers), so a worker prints no traceback and no half-run pytest's complaint.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    store = Store(out)

    def subs():
        while (item := tasks.get()) is not DONE:
            sid, path, fp, notes, name = item
            yield Submission(sid, path, notes=notes, fingerprint=fp, name=name)

    def save(record: GradeRecord) -> None:
        html = render_student(record, ctx.course, ctx.key, language, run_templates(ctx))
        store.save(stored(record), html)
        # what the parent keeps of the student: it never reads the result back
        events.put(("done", record.student_id, record.status, Entry.of(record)))

    try:
        runner.grade_many(ctx, subs(), slot, save)
    except BaseException:  # noqa: BLE001 - report, the parent decides and prints it
        events.put(("crash", f"worker {index}: {traceback.format_exc()[-1500:]}"))
        sys.exit(1)
    if slot.lost:  # its slot ended under a student, who is recorded: the parent replaces it
        events.put(("lost", index))


def grade_class(ctx: LessonContext, todo: list[Submission], out: Path,
                jobs: int, sandboxed: bool, language: str, summary: Summary,
                progress: Callable[[str, dict], None] = lambda kind, info: None,
                sandbox: Sandbox | None = None,
                collect: Callable[[Entry], None] = lambda entry: None) -> None:
    """Grade `todo` (already planned) on this machine; counts go into `summary`, each
    student's `Entry` to `collect`. `sandbox` may already be booting
    (`grading.grade_lesson` starts it before importing torch, and closes it); without
    one, a sandbox is made here and closed here."""
    lesson = ctx.lesson
    jobs = min(jobs, len(todo))
    with contextlib.ExitStack() as lifetime:
        if sandbox is None:
            sandbox = lifetime.enter_context(Sandbox.for_lesson(ctx.course, lesson,
                                                                sandboxed))
        _grade_on(ctx, todo, out, jobs, language, summary, progress, sandbox, collect)


def _grade_on(ctx: LessonContext, todo: list[Submission], out: Path, jobs: int,
              language: str, summary: Summary, progress: Callable[[str, dict], None],
              sandbox: Sandbox, collect: Callable[[Entry], None]) -> None:
    """Grade `todo` on `sandbox`'s slots, opened and closed here."""
    slots: list[Slot | _LazySlot] = []
    try:
        # One submission of a lesson recorded when its zip was built (a Gradescope run):
        # the solution was checked then.
        requests = (grade_solution(ctx)  # while the sandbox boots
                    if len(todo) > 1 or not ctx.refs.recorded else {})
        if len(todo) == 1:
            lazy = _LazySlot(sandbox)
            slots = [lazy]
            _grade_here(ctx, todo[0], out, lazy, language, summary, progress, collect)
            return
        sandbox.hold(requests)  # before the slots: each of them inherits the requests
        opened = [sandbox.slot() for _ in range(jobs)]
        slots = [*opened]
        _run_workers(ctx, todo, out, opened, language, summary, progress, collect)
    finally:
        for slot in slots:  # the parent opened them: it closes them, after the workers
            slot.close()


class _LazySlot:
    """The sandbox's slot, taken when the submission's first child is spawned: after
    pytest has collected the hidden tests, which it does while the sandbox boots.
    A session needs only `spawn`, `kill` and `held` of its slot."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox, self.sandboxed = sandbox, sandbox.sandboxed
        self._slot: Slot | None = None
        self.held: dict[str, bytes] = {}  # one child: the requests are sent to it alone

    def _taken(self) -> Slot:
        if self._slot is None:
            self._slot = self.sandbox.slot()
        return self._slot

    def spawn(self, limits: Limits) -> tuple[socket.socket, int]:
        return self._taken().spawn(limits)

    def kill(self) -> dict:
        return self._taken().kill()

    @property
    def lost(self) -> bool:
        return self._slot is not None and self._slot.lost

    def close(self) -> None:
        if self._slot is not None:
            self._slot.close()


def _grade_here(ctx: LessonContext, sub: Submission, out: Path,
                slot: _LazySlot, language: str, summary: Summary,
                progress: Callable[[str, dict], None],
                collect: Callable[[Entry], None]) -> None:
    """One submission, in this process: no worker to fork and start pytest in."""
    store = Store(out)

    def save(record: GradeRecord) -> None:
        store.save(stored(record), render_student(record, ctx.course, ctx.key, language,
                                                  run_templates(ctx)))
        collect(Entry.of(record))
        summary.count(record.status)
        progress("done", {"student_id": record.student_id, "status": record.status})

    try:
        runner.grade_many(ctx, [sub], slot, save)
    except Exception:  # noqa: BLE001 - as a worker's crash: named, the run goes on
        summary.worker_failures.append(f"grading {sub.student_id}: "
                                       f"{traceback.format_exc()[-1500:]}")


def _replace(slots: list[Slot], index: int, summary: Summary) -> bool:
    """A new slot for worker `index`, whose slot ended under a student (recorded as
    such by the worker): the students still queued are graded on it. False, said in
    the summary, where the sandbox can give no slot any more."""
    old = slots[index]
    old.close()
    try:
        slots[index] = old.sandbox.slot()
    except (SandboxError, OSError) as exc:
        summary.worker_failures.append(f"worker {index}: its slot ended and no new one "
                                       f"could be had: {exc}")
        return False
    return True


def _run_workers(ctx: LessonContext, todo, out, slots, language, summary, progress,
                 collect: Callable[[Entry], None]) -> None:
    # What the workers inherit (torch, the hidden tests, the reference outputs) lives
    # for the run: out of the garbage collector's reach, a worker's full collection
    # walks only what it made itself (not 335k objects, 145 ms, every ~20 students)
    # and copies no page it shares with this process.
    gc.collect()
    gc.freeze()
    forks = mp.get_context("fork")
    tasks, events = forks.Queue(), forks.Queue()
    for sub in todo:
        tasks.put((sub.student_id, sub.path, sub.fingerprint, sub.notes, sub.name))
    for _ in slots:
        tasks.put(DONE)

    def worker(i: int) -> mp.process.BaseProcess:
        w = forks.Process(target=_worker, args=(i, slots[i], ctx, out, language, tasks, events),
                          daemon=True)
        w.start()
        return w

    workers = [worker(i) for i in range(len(slots))]
    remaining = len(todo)
    try:
        while remaining and (any(w.is_alive() for w in workers) or not events.empty()):
            try:
                event = events.get(timeout=0.5)
            except queue.Empty:
                continue
            if event[0] == "done":
                remaining -= 1
                collect(event[3])
                summary.count(event[2])
                progress("done", {"student_id": event[1], "status": event[2]})
            elif event[0] == "crash":
                summary.worker_failures.append(event[1])
            elif event[0] == "lost" and _replace(slots, event[1], summary):
                workers.append(worker(event[1]))
    except KeyboardInterrupt:  # results are saved atomically: a killed worker loses none
        for w in workers:
            w.kill()
        with contextlib.suppress(queue.Empty, OSError, EOFError):  # count what was saved
            while True:
                event = events.get(timeout=0.2)
                if event[0] == "done":
                    summary.count(event[2])
        raise
    for w in workers:
        w.join(timeout=30)
        if w.is_alive():
            w.kill()
    if remaining:
        summary.worker_failures.append(
            f"{remaining} submission(s) were not graded (a worker stopped); rerun to resume")
