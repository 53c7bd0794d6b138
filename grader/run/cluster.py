"""Grading a class on a Dask distributed cluster: the same warm sandbox on every worker.

    grader run --lesson 13 --scheduler tcp://head:8786      # a running scheduler
    grader run --lesson 13 --scheduler slurm --jobs 20      # dask-jobqueue, see below

Each Dask worker *process* keeps one warm sandbox `Slot` (a bubblewrap'd fork server
with torch preloaded, its own uid) and the lesson's reference outputs, in the
worker's `WarmSlot` plugin; a task grades a batch of submissions with
`runner.grade_many` on it, so a worker pays for torch, the hidden tests and the
reference once, not per task.

Nothing is assumed shared between the client and the workers but the installed
`grader` package (same version, same venv layout, bubblewrap, root for the sandbox):

* each submission travels as bytes and is written to a temp file on the worker;
* the lesson's course files (course.yml's lesson, its solution and hidden tests)
  travel once, scattered to every worker; a worker that has the very same files at
  the same place (a shared checkout: `course.version` agrees) grades from there, so
  its records are byte-for-byte those of `pool.grade_class`; otherwise it unpacks
  the copy into a temp folder (scores and feedback are the same; the raw pytest
  report then names that folder as its root).

Records come back to the client, each as results/ keeps it and with its
`tally.Entry` (made on the worker, as a pool's worker sends it), and the client alone
writes the output folder, through the same `Store.save` (feedback rendered by
`render_student`) as the local pool: atomic, incremental, resumable, one writer.

Workers should run one thread each (`dask worker --nthreads 1 --nworkers N`): a
process has one slot and one pytest at a time, so extra threads only queue.

Slurm/PBS: `--scheduler slurm` (or `pbs`, `sge`, `lsf`) starts a dask-jobqueue
cluster (`pip install dask-jobqueue`) of `--jobs` single-process, single-thread jobs.
Queue, account, cores, memory, walltime and the job's Python come from dask's
config (`~/.config/dask/jobqueue.yaml`, section `jobqueue.slurm` etc.); the job's
`python` must be this venv's interpreter (e.g. `python: /path/.venv/bin/python`), and
the jobs must run as root with bubblewrap for the sandbox (else `--unsandboxed`).

The pool's work (pool.py, one machine) spread over a Dask cluster's machines."""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import math
import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from distributed import WorkerPlugin

from grader.judge import runner
from grader.config import ConfigError, Course
from grader.judge.context import LessonContext
from grader.intake.capped import read_source
from grader.judge.plan import Submission, Summary
from grader.record import GradeRecord
from grader.store import Store, safe_name
from grader.judge.tally import Entry

if TYPE_CHECKING:  # imported where a slot is opened (a worker), not by the client
    from grader.sandbox.slot import Slot

JOBQUEUE = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster",
            "lsf": "LSFCluster"}
MAX_BATCH = 16


class SolutionFailsItsTests(RuntimeError):
    """The hidden tests fail the solution on a worker: stop the run, as the pool does."""


# ------------------------------------------------------------------ the client side

def grade_class(ctx: LessonContext, todo: list[Submission], out: Path,
                jobs: int, sandboxed: bool, language: str, summary: Summary,
                progress: Callable[[str, dict], None] = lambda kind, info: None, *,
                scheduler: str | object,
                collect: Callable[[Entry], None] = lambda entry: None) -> None:
    """`pool.grade_class` on a Dask cluster. `scheduler`: an address (tcp://host:8786),
    a `distributed.Client`, or slurm/pbs/sge/lsf to start a dask-jobqueue cluster of
    `jobs` workers. Progress hears one "done" per graded submission, `collect` gets
    its `Entry` (made on the worker): the client keeps a batch's records only while it
    saves them."""
    from distributed import as_completed

    from grader.pages.feedback import render_student, run_templates

    course, lesson_key = ctx.course, ctx.key
    store = Store(out)
    version = ctx.version
    client, owned = _connect(scheduler, jobs)
    try:
        prepare(client)
        bundle = client.scatter(course_bundle(course, lesson_key), broadcast=True, hash=False)
        workers = max(sum(client.nthreads().values()), 1)
        size = max(1, min(MAX_BATCH, math.ceil(len(todo) / (4 * workers))))
        futures = {}
        for i in range(0, len(todo), size):
            batch = todo[i:i + size]
            items = [_item(s) for s in batch]
            fut = client.submit(grade_batch, bundle, course, lesson_key, version, sandboxed,
                                items, pure=False, retries=1)
            futures[fut] = [s.student_id for s in batch]
        remaining = len(todo)
        for fut in as_completed(list(futures)):
            try:
                done = fut.result()
            except SolutionFailsItsTests as exc:
                client.cancel(list(futures))
                raise RuntimeError(str(exc)) from None
            except Exception as exc:  # noqa: BLE001 - a worker's failure, not a student's
                summary.worker_failures.append(
                    f"batch {futures[fut][0]}..{futures[fut][-1]}: {type(exc).__name__}: "
                    f"{str(exc)[-1500:]}")
                continue
            for record, entry in done:
                store.save(record, render_student(record, course, lesson_key, language,
                                                  run_templates(ctx)))
                collect(entry)
                remaining -= 1
                summary.count(record.status)
                progress("done", {"student_id": record.student_id, "status": record.status})
        if remaining:
            summary.worker_failures.append(
                f"{remaining} submission(s) were not graded (a worker failed); rerun to resume")
    finally:
        if owned:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()


def _connect(scheduler, jobs: int):
    """(client, whether we own it and must close it)."""
    from distributed import Client

    if isinstance(scheduler, Client):
        return scheduler, False
    name = str(scheduler)
    if name.lower() in JOBQUEUE:
        try:
            import dask_jobqueue
        except ImportError:
            raise RuntimeError(f"--scheduler {name} needs dask-jobqueue: "
                               "pip install dask-jobqueue") from None
        cls = getattr(dask_jobqueue, JOBQUEUE[name.lower()])
        try:  # one single-threaded worker process per job; the rest from jobqueue.yaml
            cluster = cls(processes=1, cores=1)
        except (ValueError, TypeError, OSError) as exc:
            raise RuntimeError(f"cannot start a {name} cluster: {exc} (set it in "
                               f"~/.config/dask/jobqueue.yaml, jobqueue.{name.lower()})") from None
        cluster.scale(jobs=max(jobs, 1))
        client = Client(cluster)
        client.wait_for_workers(1, timeout=3600)
        return client, True
    try:
        client = Client(name, timeout="60s")
    except OSError as exc:
        raise RuntimeError(f"cannot reach the Dask scheduler at {name}: {exc}") from None
    try:
        client.wait_for_workers(1, timeout=120)
    except TimeoutError:
        client.close()
        raise RuntimeError(f"the Dask scheduler at {name} has no workers") from None
    return client, True


def _item(sub: Submission) -> tuple[str, bytes | None, str, list[str], str, str]:
    """What a worker needs of a submission: (id, its file's bytes or None, fingerprint,
    notes, name, problem). Read here as `runner.read` reads it locally
    (`capped.read_source`): an oversized or unreadable file ships no byte, only the
    problem the worker's record then states, word for word as a local run's."""
    data, problem = None, ""
    if sub.path is not None:
        got = read_source(sub.path)
        data, problem = got.data, got.problem
    return sub.student_id, data, sub.fingerprint, list(sub.notes), sub.name, problem


def course_bundle(course: Course, lesson_key: str) -> bytes:
    """A tar of what grading the lesson reads: its solution and hidden tests, under
    their course-relative names (outside the course root: under _external/)."""
    lesson = course.lesson(lesson_key)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for label, rel in (("solution", lesson.solution), ("tests", lesson.tests)):
            if rel is None:  # a student bundle's course.yml: it has `recorded` instead
                raise ConfigError(f"this lesson gives no `{label}` in course.yml")
            src = course.path(rel)
            name = _bundle_name(course, label, rel)
            files = sorted(p for p in src.rglob("*") if p.is_file()
                           and "__pycache__" not in p.parts) if src.is_dir() else [src]
            for f in files:
                arc = name if f == src else f"{name}/{f.relative_to(src).as_posix()}"
                info = tarfile.TarInfo(arc)
                data = f.read_bytes()
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _bundle_name(course: Course, label: str, rel: Path) -> str:
    if not rel.is_absolute() and ".." not in rel.parts:
        return rel.as_posix()
    return f"_external/{label}/{rel.name}"


# ------------------------------------------------------------------ the worker side

@dataclass
class _Warm:
    key: tuple  # (bundle digest, course root, lesson, version, sandboxed)
    ctx: LessonContext
    slot: Slot  # it claims its own sandbox uid


class WarmSlot(WorkerPlugin):
    """A Dask worker process's grading state, owned by the worker (`Worker.plugins`):
    one warm slot and lesson context for one lesson version at a time, and the lock
    that makes batches take turns on them (one slot, one pytest per process)."""

    name = "minimind-grader"

    def setup(self, worker) -> None:
        self.warm: _Warm | None = None
        self.lock = threading.Lock()

    def teardown(self, worker) -> None:
        self.drop()

    def drop(self) -> None:
        """Close the slot and forget the lesson (its files changed, or it broke)."""
        warm, self.warm = self.warm, None
        if warm is not None:
            with contextlib.suppress(Exception):
                warm.slot.close()
            warm.ctx.reset()


def prepare(client) -> None:
    """Give every worker (and every worker that joins later) its grading state."""
    client.register_plugin(WarmSlot(), name=WarmSlot.name)


def grade_batch(bundle: bytes, course: Course, lesson_key: str, version: str,
                sandboxed: bool, items: list[tuple]) -> list[tuple[GradeRecord, Entry]]:
    """Runs on a Dask worker: grade (student_id, source bytes | None, fingerprint, notes,
    name, problem) items (`_item`) on this process's warm slot; return each record as
    results/ keeps it (`feedback.stored`: its page is the same) with its `Entry`, as a
    pool's worker sends."""
    from distributed import get_worker

    from grader.pages.feedback import stored

    state = get_worker().plugins[WarmSlot.name]
    if not isinstance(state, WarmSlot):  # `prepare` registers it on every worker
        raise RuntimeError(f"this worker's {WarmSlot.name!r} plugin is not the grader's")
    with state.lock:
        warm = _warm(state, bundle, course, lesson_key, version, sandboxed)
        lesson = warm.ctx.lesson
        tmp = Path(tempfile.mkdtemp(prefix="grader-batch-"))
        try:
            subs = []
            for sid, data, fp, notes, name, problem in items:
                path = None
                if data is not None:
                    path = tmp / safe_name(sid) / lesson.exercise
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                subs.append(Submission(sid, path, notes=list(notes), fingerprint=fp,
                                       name=name, problem=problem))
            done: list[tuple[GradeRecord, Entry]] = []
            try:
                runner.grade_many(warm.ctx, subs, warm.slot,
                                  lambda record: done.append((stored(record), Entry.of(record))))
            except BaseException:
                # the slot may be broken (its zygote gone): start afresh on the next batch;
                # the client retries this one once (grading is idempotent, it saves once)
                state.drop()
                raise
            return done
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _warm(state: WarmSlot, bundle: bytes, course: Course, lesson_key: str, version: str,
          sandboxed: bool) -> _Warm:
    key = (hashlib.sha256(bundle).hexdigest(), str(course.root), lesson_key, version, sandboxed)
    if state.warm is not None and state.warm.key == key:
        return state.warm
    state.drop()  # a new lesson or version: this process keeps one slot
    from grader.sandbox import bwrap
    from grader.sandbox.slot import Sandbox

    support = bwrap.probe() if sandboxed else None  # whether bwrap works on this node
    if support is not None and support.reason:
        raise RuntimeError(f"worker cannot sandbox student code: {support.reason}")
    local = _local_course(course, lesson_key, version) or _unpack(bundle, course, key[0])
    ctx = LessonContext(local, lesson_key)
    ctx.reset()  # an earlier version's test modules, imported under the same names
    try:
        runner.grade_solution(ctx)  # warms the reference, as the pool's parent does
    except RuntimeError as exc:
        raise SolutionFailsItsTests(str(exc)) from None
    lesson = ctx.lesson
    slot = Sandbox.for_lesson(local, lesson, sandboxed, support=support).sole_slot()
    state.warm = _Warm(key, ctx, slot)
    return state.warm


def _local_course(course: Course, lesson_key: str, version: str) -> Course | None:
    """The client's course, if this machine has the very same lesson files there."""
    try:
        return course if course.version(lesson_key) == version else None
    except OSError:
        return None


def _unpack(bundle: bytes, course: Course, digest: str) -> Course:
    root = Path(tempfile.gettempdir()) / f"grader-course-{digest[:16]}-{os.getpid()}"
    if not root.exists():
        part = Path(tempfile.mkdtemp(prefix=".grader-course-"))
        with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
            tar.extractall(part, filter="data")
        os.replace(part, root)
        atexit.register(shutil.rmtree, root, True)
    lessons = {}
    for k, lesson in course.lessons.items():
        update = {}
        for label in ("solution", "tests"):
            rel = getattr(lesson, label)
            update[label] = Path(_bundle_name(course, label, rel))
        lessons[k] = lesson.model_copy(update=update)
    return course.model_copy(update={"root": root, "lessons": lessons, "roster": None})
