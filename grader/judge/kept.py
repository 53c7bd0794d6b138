"""The reference's results kept in the user's cache between runs, where the course has
its solution (the project): what the trusted side computed from the solution (the
reference's and the known mistakes' results, the mistakes' signatures, the traces) is
written at a run's end as a recording, and the next run of the same lesson loads it
instead of importing the solution and computing them again (3 to 4 s of a `grader run`
before its first student, and most of a `grader check`'s own time).

A recording is named by everything its contents depend on: the lesson's version (its
solution, tests and course.yml entry), torch's version, and the grader's own code (the
signatures and traces are the grader's computations). One per use: `grader run`'s holds
the hidden tests' results, `grader check`'s the practice tests'. A damaged one is
computed afresh, and a home that cannot be written is no error: the next run computes
again, no worse. A student bundle and the autograder zip ship their own (`recorded`).

"Kept" here is this cache only: not the records OUT keeps (store.py), nor the
similarity's `KEPT` (characters of code with names kept, run/similarity.py)."""
from __future__ import annotations

import contextlib
import hashlib
import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from grader import config
from grader.judge.context import LessonContext
from grader.store import safe_name

if TYPE_CHECKING:
    from grader.judge.reference import LessonRefs

GRADER = Path(__file__).resolve().parents[1]


def path(course: config.Course, lesson_key: str, use: Literal["graded", "practice"]) -> Path:
    """Where the results of this very lesson, torch and grader are kept for `use`
    (torch's version read from its metadata: a run not yet grading imports no torch)."""
    code = hashlib.sha256()
    for f in sorted(GRADER.rglob("*.py")):
        code.update(f.relative_to(GRADER).as_posix().encode() + b"\0" + f.read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = safe_name(f"{course.version(lesson_key)}-torch{metadata.version('torch')}"
                        f"-grader{code.hexdigest()[:12]}")
    return cache / "minimind-grader" / use / f"{_lesson_name(course, lesson_key)}{version}.bin"


def _lesson_name(course: config.Course, lesson_key: str) -> str:
    """What a recording's name begins with: its course and lesson (a safe file name)."""
    return safe_name(f"{course.course}-{lesson_key}") + "-"


def context(course: config.Course, lesson_key: str,
            use: Literal["graded", "practice"]) -> LessonContext:
    """The lesson's context, reading the results kept for `use` where the course has
    its solution and ships no recording of its own."""
    lesson = course.lesson(lesson_key)
    if lesson.solution is None or lesson.recorded is not None:
        return LessonContext(course, lesson_key)
    return LessonContext(course, lesson_key, kept=path(course, lesson_key, use))


def loaded(ctx: LessonContext) -> LessonRefs:
    """Load the references now (while the sandbox boots); a damaged kept recording,
    whatever it raised, is removed and its results computed afresh."""
    try:
        return ctx.refs
    except Exception:  # noqa: BLE001 - a damaged recording in the cache
        if ctx.kept is None:
            raise  # a bundle's or zip's own recording: nothing to compute it from
        ctx.kept.unlink(missing_ok=True)
        ctx.reset()
        return ctx.refs


def remember(ctx: LessonContext) -> None:
    """Keep what this run computed from the solution beyond what it loaded, for the
    next run; nothing to do where nothing is kept or nothing new was computed."""
    refs = ctx.loaded_refs()
    if ctx.kept is None or refs is None:
        return
    now = refs.computed()
    if now == ctx.loaded:
        return
    from grader.judge.reference import lesson_digest, recording
    from grader.store import write_atomic

    try:
        write_atomic(ctx.kept, recording(refs, lesson_digest(
            ctx.course.solution(ctx.lesson), ctx.tests)))
    except OSError:
        return  # a read-only home: the next run computes them again, no worse
    ctx.loaded = now
    # one recording per lesson and use: those of its earlier versions (the lesson's,
    # torch's or the grader's) are never read again
    for old in ctx.kept.parent.glob(f"{_lesson_name(ctx.course, ctx.key)}*.bin"):
        if old != ctx.kept:
            with contextlib.suppress(OSError):  # another's, in a cache shared with it
                old.unlink(missing_ok=True)
