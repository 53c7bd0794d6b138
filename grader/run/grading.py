"""A lesson's class graded, from the class folder to OUT: the sandbox, the roster,
intake, the plan, the grading (on this machine or a Dask cluster), scores.json and the
class report. Nothing here prints: what a TA should read goes to `Events`, what the
run did comes back as `Graded`, and a run that cannot go on raises `GradingError`, so
the CLI (or any other caller) decides how each is shown.
"""
from __future__ import annotations

import functools
import json
import time
from datetime import datetime, timezone
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from grader.intake import submissions as intake
from grader.run import interrupts
from grader.judge import kept
from grader.intake import roster as rosters
from grader.config import Course, Lesson
from grader.judge.context import LessonContext
from grader.judge.plan import Submission, Summary, plan
from grader.record import GradeRecord
from grader.store import Spool, Store, write_atomic
from grader.judge.tally import Entry, Line, Tally

if TYPE_CHECKING:
    from jinja2 import Environment

    from grader.sandbox.bwrap import Support
    from grader.sandbox.slot import Sandbox
    from grader.sandbox.template import Template


# what a grading step tells of its progress: ("done", {"student_id", "status"})
Progress = Callable[[str, dict], None]
CONTAINER_NOTE = ("container mode: without CAP_SYS_ADMIN, bubblewrap runs in a user namespace "
                  "the grader made; as in root mode, each submission has its own processes, "
                  "/tmp and files to see, an unprivileged uid, the same limits and its own "
                  "scratch folder")
BARE_CONTAINER_NOTE = (
    "container mode without namespaces ({why}): the container is the boundary; each "
    "submission runs as an unprivileged uid, with the same limits and its own scratch "
    "folder, and the course, the class and OUT are closed to it, but it can list the "
    "container's processes with their command lines and read its /tmp and every "
    "world-readable file")


class GradingError(Exception):
    """The run cannot go on (no sandbox, a solution failing its tests, no cluster): the
    message says why, for the TA."""


class NoSubmissions(GradingError):
    """Intake found no one to grade; `skipped` names what it left out."""

    def __init__(self, message: str, skipped: list[str]):
        super().__init__(message)
        self.skipped = skipped


class Stopped(KeyboardInterrupt):
    """Ctrl-C while grading: `graded` of `total` are saved, and a rerun resumes."""

    def __init__(self, graded: int, total: int):
        super().__init__(graded, total)
        self.graded, self.total = graded, total


class Events(Protocol):
    """What a run tells while it works, in the order it happens."""

    def note(self, text: str) -> None:
        """Something the TA should know (roster rows left out, the memory cap, container
        mode); `text` may hold the class's names: plain text."""

    def warn(self, text: str) -> None:
        """Something the TA must act on before the scores can be used (a Moodle
        download no worksheet maps); plain text."""

    def unsandboxed(self) -> None:
        """Student code is about to run without the sandbox (--unsandboxed)."""

    def grading(self, total: int) -> AbstractContextManager[Progress]:
        """The grading of `total` submissions, hearing each one done."""


@dataclass
class Graded:
    """What a run did: its counts, each student's line as scores.json lists them (in id
    order), what intake left out, and the roster's students it found nothing of."""

    summary: Summary
    students: list[Line]
    skipped: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)  # on the roster, nothing handed in
    by_number: str = ""  # the warning when a Moodle download's students are numbers only


def grade_lesson(course: Course, lesson_key: str, submissions: Path, out: Path, *,
                 jobs: int, events: Events, force: bool = False, unsandboxed: bool = False,
                 language: str | None = None, scheduler: str | None = None,
                 trust_worksheet: bool = False, container: bool = False,
                 private: tuple[Path, ...] = (), recorded_only: bool = False,
                 template: Template | None = None) -> Graded:
    """Grade the class in `submissions` into `out`: what changed since the last run
    (everything with `force`), then scores.json and the class report for all. A Moodle
    download whose names the grading worksheet contradicts is refused before anything
    is graded, unless `trust_worksheet` (then each disagreement is a note).
    `container`: the caller knows this is a container (container mode where bwrap
    cannot make namespaces as root, whatever markers the container has); `private`:
    paths beyond the class and OUT that container mode closes to submissions;
    `recorded_only`: the reference's side comes from the lesson's recording alone
    (`LessonContext.recorded_only`); `template`: the zygote is made from it
    (sandbox/template.py). The Gradescope run sets all four."""
    started = time.monotonic()
    lesson = course.lesson(lesson_key)
    # this run's one view of the lesson; on this machine, the reference's results an
    # earlier run kept (a cluster's workers compute their own)
    ctx = kept.context(course, lesson_key, "graded") if scheduler is None \
        else LessonContext(course, lesson_key)
    ctx.recorded_only = recorded_only
    # Unsandboxed, the zygote is a fork of this process (one torch import for both), made
    # now, before the class is read (no promise there: the code runs as this user and
    # may read it all). Sandboxed, it is a fresh exec, made only when there is work.
    from grader.sandbox import bwrap

    support = bwrap.probe(container)  # whether bwrap works here: once for the run
    store = Store(out)
    from grader.pages.feedback import language_of, run_templates

    language = language_of(course, language, out)
    # The sandbox lives until the grading is done, however the run ends: this block
    # alone owns it (closed once the class is graded, or on any error or Ctrl-C).
    with ExitStack() as lifetime:
        sandbox = None
        if scheduler is None and zygote_is_fork(unsandboxed, support):
            out.mkdir(parents=True, exist_ok=True)
            sandbox = lifetime.enter_context(
                boot(course, lesson, unsandboxed, support, (submissions, out, *private),
                     fork=True, template=template))
        roster = rosters.load(course, lesson_key)
        if roster.note():
            events.note(roster.note())
        from grader.judge import final

        try:  # a student's extension is their due date for intake's choice and notes too
            extensions = final.read_extensions(final.grades_folder(course.root, lesson_key),
                                               course.lms_zone(lesson_key))
        except final.RecordError as exc:
            raise GradingError(str(exc)) from None
        taken = intake.collect(submissions, lesson.exercise, cache=store.intake_path,
                               roster=roster.students, aliases=roster.aliases,
                               due=course.due(lesson_key), submitted=roster.submitted,
                               extended={s: e.due for s, e in extensions.items()})
        clashes = rosters.clashes(roster, taken.numbers, taken.names)
        if clashes and not trust_worksheet:
            raise GradingError(rosters.clash_message(clashes, roster.worksheet))
        if clashes:
            events.note(rosters.clash_note(clashes, roster.worksheet))
        by_number = by_number_warning(taken.by_number, course, lesson_key,
                                      bool(roster.missing))
        if by_number:
            events.warn(by_number)
        known = roster.students
        subs = [Submission(sid, path, notes=notes, name=(known[sid].name if sid in known
                                                         else "") or taken.names.get(sid, ""),
                           language=language)
                for sid, path, notes in taken.found]
        if not subs:
            raise NoSubmissions(f"no submissions found in {submissions}: "
                                + intake.layout_hint(submissions, lesson.exercise),
                                taken.skipped)
        with Spool(out) as spool:
            tally = Tally([s.student_id for s in subs], spool)
            tally.absent = list(taken.absent)
            todo = plan(store, subs, ctx.version, force,
                        kept=lambda record: tally.add(Entry.of(record)))
            summary = Summary(skipped=len(subs) - len(todo))
            if todo:
                if scheduler is None and sandbox is None:
                    sandbox = lifetime.enter_context(
                        boot(course, lesson, unsandboxed, support,
                             (submissions, out, *private), fork=False, template=template))
                grade(ctx, todo, out, summary, jobs=jobs, language=language,
                      sandbox=sandbox, unsandboxed=unsandboxed, support=support,
                      scheduler=scheduler, events=events, collect=tally.add)
            lifetime.close()  # graded: the sandbox is done with
            kept.remember(ctx)  # what this run computed from the solution, for the next
            summary.seconds = time.monotonic() - started
            for sub in subs:  # not graded now (a worker stopped): as its last result says
                if sub.student_id not in tally and (
                        old := store.load(sub.student_id)) is not None:
                    tally.add(Entry.of(old))
            ids = sorted(s.student_id for s in subs)
            entries, max_score = spool.entries(ids), lesson.max_score
            if lesson.written:  # answers read and marked again at every run
                from grader import points
                from grader.judge.written import apply_to_class

                entries = apply_to_class(course, lesson_key,
                                         {s.student_id: s.path for s in subs}, entries,
                                         store, language, run_templates(ctx))
                max_score = points.as_points(points.units(max_score, "the lesson")
                                             + points.units(lesson.written_points, "written"))
            found = final.Applied()
            try:  # the TAs' files are read before scores.json is written: all or nothing
                entries = final.apply_to_class(
                    course, lesson_key, taken.handed, entries,
                    set(known) | {s.student_id for s in subs} | set(taken.absent), found,
                    datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                    store, language, run_templates(ctx), taken.marked)
            except final.RecordError as exc:
                raise GradingError(str(exc)) from None
            store.write_scores(lesson_key, course.course, ctx.version, max_score,
                               entries, taken.by_number, taken.absent, language)
            if found.unknown:
                events.note("hand-in time unknown (the download gives none, so no late "
                            "credit is applied and no page says on time or late): "
                            + ", ".join(found.unknown))
            if found.marked_late:
                events.note("marked late by the LMS, which gives no hand-in time, so no "
                            "credit window applies and the grader applied no late credit "
                            "(let the LMS apply it: late.applied_by: lms): "
                            + ", ".join(found.marked_late))
            if found.stale:
                events.note("overrides made on an automatic score that has since changed "
                            "(stale; review them with `grader history`): "
                            + ", ".join(found.stale))
    write_report(tally, course, lesson_key, store, language, run_templates(ctx))
    students = sorted(tally.in_order(), key=lambda line: line.student_id)
    return Graded(summary, students, taken.skipped, taken.absent, by_number)


def by_number_warning(ids: list[str], course: Course, lesson_key: str, missing: bool) -> str:
    """What a TA must do when a Moodle download's students are known by participant
    number only (no grading worksheet maps them), or "": their scores cannot be
    imported into Moodle as they are."""
    if not ids:
        return ""
    worksheet = course.lesson(lesson_key).moodle_worksheet
    listed = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    download = ("the assignment's grading worksheet (View all submissions → Grading action "
                "→ Download grading worksheet)")
    if worksheet is None:
        why = "no Moodle grading worksheet names them"
        fix = (f"Download {download}, name it in course.yml as "
               f"lessons.{lesson_key}.moodle_worksheet")
    elif missing:
        why = "no Moodle grading worksheet names them"
        fix = f"Download {download} to {worksheet}"
    else:
        why = f"they are not in the grading worksheet {worksheet}"
        fix = f"Download {download} again over {worksheet}"
    return (f"a Moodle download, and {why}: {len(ids)} student(s) are known by their "
            f"participant number only ({listed}). Their pages and scores.json carry these "
            "numbers, and `grader export --to moodle` cannot match them to Moodle's users "
            f"(it writes no row for them and exits 1). {fix}, and run again.")


def available(unsandboxed: bool, support: Support) -> bool:
    """Sandbox (True), or not, where `unsandboxed` allows it; else a clear refusal.
    `support`: what bwrap.probe found."""
    from grader.sandbox import slot as slots

    try:
        return slots.available(unsandboxed, support)
    except RuntimeError as exc:
        raise GradingError(str(exc)) from None


def zygote_is_fork(unsandboxed: bool, support: Support) -> bool:
    """Will this run's zygote be a fork of this process (unsandboxed, allowed)? Where no
    sandbox can be had and none was allowed, no: the run is refused only if there is
    work (`boot`)."""
    from grader.sandbox import slot as slots

    try:
        sandboxed = slots.available(unsandboxed, support)
    except RuntimeError:
        return False
    return slots.forkable(support.mode if sandboxed and support.mode else "none")


def boot(course: Course, lesson: Lesson, unsandboxed: bool, support: Support,
         private: tuple[Path, ...], fork: bool, template: Template | None = None) -> Sandbox:
    """Boot the sandbox: it imports torch (once for every slot) while this process does
    the same for the reference, or, unsandboxed and as a fork, after this process has
    (one import for both sides), or from `template` (sandbox/template.py), where given.
    `private`: the class and OUT (and more), closed to submissions in container mode."""
    from grader.sandbox import slot as slots

    with interrupts.held():  # a fork imports torch here: a Ctrl-C in it must not be lost
        return slots.Sandbox.for_lesson(course, lesson, available(unsandboxed, support),
                                        fork=fork, private=private, support=support,
                                        template=template)


def grade(ctx: LessonContext, todo: list[Submission], out: Path, summary: Summary, *,
          jobs: int, language: str, sandbox: Sandbox | None, unsandboxed: bool,
          support: Support, scheduler: str | None, events: Events,
          collect: Callable[[Entry], None] = lambda entry: None) -> None:
    """Grade what changed on `sandbox` (or on the Dask cluster at `scheduler`); counts
    go into `summary`, each student's `Entry` to `collect`. Ctrl-C raises `Stopped`,
    saying how many were saved."""
    sandboxed = (sandbox.sandboxed if sandbox is not None
                 else available(unsandboxed, support))
    with interrupts.held():  # torch's first import, where a Ctrl-C would be lost
        from grader.run import pool
    if scheduler is None:
        kept.loaded(ctx)  # the results kept by an earlier run (a damaged file: computed)
    if sandbox is not None and sandbox.memory_note:
        events.note(sandbox.memory_note)
    if sandbox is not None and sandbox.confine_note:
        events.note(sandbox.confine_note)
    if sandbox is not None and sandbox.mode == "container":
        events.note(CONTAINER_NOTE if sandbox.refused is None
                    else BARE_CONTAINER_NOTE.format(why=sandbox.refused))
    if not sandboxed:
        events.unsandboxed()
    execute = (_cluster(scheduler, collect) if scheduler else
               functools.partial(pool.grade_class, sandbox=sandbox, collect=collect))
    try:
        with events.grading(len(todo)) as progress:
            execute(ctx, todo, out, jobs, sandboxed, language, summary, progress)
    except (RuntimeError, ValueError) as exc:
        raise GradingError(str(exc)) from None
    except KeyboardInterrupt:
        raise Stopped(summary.graded, len(todo)) from None


def _cluster(scheduler: str, collect: Callable[[Entry], None]) -> Callable[..., None]:
    """The same grading on a Dask cluster."""
    try:
        import distributed  # noqa: F401 - only whether it is installed

        from grader.run import cluster
    except ImportError as exc:
        raise GradingError(f"--scheduler needs dask distributed ({exc}): "
                           "pip install 'minimind-grader[cluster]'") from None
    return lambda *args: cluster.grade_class(*args, scheduler=scheduler, collect=collect)


def write_report(tally: Tally, course: Course, lesson_key: str, store: Store,
                 language: str, pages: Environment) -> None:
    """OUT/report.html over the class's counts, linking the similarity report if OUT has one."""
    from grader.judge import final, written
    from grader.pages.report import render_report

    similarity = store.similarity_path
    folder = final.grades_folder(course.root, lesson_key)
    write_atomic(store.report_path,
                 render_report(tally, course, lesson_key, language,
                               similarity.name if similarity.is_file() else None, pages,
                               final.report_rows(store.scores_path),
                               final.open_requests(folder),
                               written.report_rows(course.lesson(lesson_key).written, folder,
                                                   store.scores_path)))


def rewrite_report(course: Course, lesson_key: str, out: Path, language: str,
                   pages: Environment) -> bool:
    """The class report again from OUT/results, read one at a time (False: nothing
    graded there)."""
    store = Store(out)
    results = store.result_files()
    if not results:
        return False
    tally = Tally()
    for path in results:
        tally.add(Entry.of(GradeRecord.from_json(json.loads(path.read_text(encoding="utf-8")))))
    tally.absent = store.absent()
    write_report(tally, course, lesson_key, store, language, pages)
    return True
