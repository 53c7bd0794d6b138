"""The `grader` command: run (TAs), check (students), release and report (staff)."""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import click
from rich.console import Console

from grader import config
from grader.run import interrupts
from grader.cli.console import (RunConsole, console, left_out, print_findings, print_upload,
                            stopped, summary_table, worker_failures)
from grader.deliver.export import FORMATS
from grader.record import ClassScores
from grader.run.similarity import KEPT, THRESHOLD
from grader.store import Store
from grader.cli.options import (COURSE, GRADED_OUT, LESSON, TRUST_WORKSHEET,
                                class_folders, graded_folder, language, out as out_option)
from grader.cli.student import check

# `grader run` in a container its markers do not show (a CI job as root): GRADER_CONTAINER=1
# says so, read here once (the Gradescope run passes it as an argument)
CONTAINER = "GRADER_CONTAINER"
PAIRS_SHOWN = 20                # similar pairs printed; the page has all that fit it


def _load(path: str) -> config.Course:
    """The course file; one that is not there names --course."""
    try:
        return config.load(path)
    except config.ConfigError as exc:
        hint = (" (run this in the course's folder, or give --course path/to/course.yml)"
                if not Path(path).exists() else "")
        raise config.ConfigError(f"{exc}{hint}") from None


def _course(path: str) -> config.Course:
    try:
        return _load(path)
    except config.ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _lesson(course: config.Course, key: str) -> config.Lesson:
    """The lesson `--lesson` names; another key is a usage error (exit 2)."""
    try:
        return course.lesson(key)
    except config.ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="'--lesson'") from None


JOBS = click.option("--jobs", type=click.IntRange(min=1), default=os.cpu_count() or 1,
                    metavar="N", show_default="the cores",
                    help="submissions graded at once, each by a warm worker")
BUG = ("This is a bug in the grader, not in your files or the students' code: please "
       "report it to the grader's maintainers with the command you ran and the lines above.")


class Grader(click.Group):
    """Every failure as a message: a course file's or roster's problem says what and
    where, Ctrl-C says how to resume, and only a bug in the grader shows a traceback,
    with a line asking to report it."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit,
                click.exceptions.Abort):
            raise
        except config.ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:  # the machine's, not the grader's: a full disk, a mode
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from None
        except KeyboardInterrupt:
            click.echo(f"stopped ({interrupts.stop_name()}). What was written before is "
                       "kept; rerun the same command to resume.", err=True)
            ctx.exit(interrupts.status())
        except Exception:  # noqa: BLE001 - everything expected is handled above
            click.echo(traceback.format_exc(), err=True, nl=False)
            click.echo(BUG, err=True)
            ctx.exit(70)


@click.group(cls=Grader)
@click.version_option(package_name="minimind-grader", prog_name="grader")
def main() -> None:
    """Auto-grading for the MiniMind course."""


@main.command()
@COURSE
@LESSON
@click.option("--submissions", type=click.Path(path_type=Path),
              help="DIR/<student_id>/<exercise>, a Canvas zip or a Gradescope export "
                   "(default: the lesson's `submissions` in course.yml)")
@out_option("the graded folder it writes: scores.json, the pages, the report (default: "
            "the lesson's `out` in course.yml)")
@JOBS
@click.option("--force", is_flag=True, help="regrade even unchanged submissions")
@click.option("--unsandboxed", is_flag=True,
              help="allow grading without the sandbox when it cannot be set up (trusted work only)")
@language("the pages' language")
@click.option("--scheduler", metavar="ADDRESS",
              help="grade on a Dask cluster: tcp://host:8786, or slurm/pbs/sge/lsf to start "
                   "--jobs dask-jobqueue workers (needs the `cluster` extra)")
@TRUST_WORKSHEET
def run(course_path, lesson_key, submissions, out, jobs, force, unsandboxed, language,
        scheduler, trust_worksheet) -> None:
    """Grade every submission of a lesson: scores.json and one feedback page each."""
    from grader.run import grading

    course = _course(course_path)
    _lesson(course, lesson_key)
    submissions, out = class_folders(course, lesson_key, submissions, out)
    try:
        graded = grading.grade_lesson(course, lesson_key, submissions, out, jobs=jobs,
                                      events=RunConsole(), force=force,
                                      unsandboxed=unsandboxed, language=language,
                                      scheduler=scheduler, trust_worksheet=trust_worksheet,
                                      container=os.environ.get(CONTAINER) == "1")
    except grading.NoSubmissions as exc:
        left_out(exc.skipped)
        raise click.ClickException(str(exc)) from None
    except grading.GradingError as exc:
        raise click.ClickException(str(exc)) from None
    except grading.Stopped as stop:
        stopped(stop.graded, stop.total)
        raise click.exceptions.Exit(130) from None
    summary_table(graded.summary, graded.students, out)
    left_out(graded.skipped, graded.absent)
    if graded.by_number:
        RunConsole().warn(graded.by_number)  # again at the end: the first scrolled away
    if graded.summary.worker_failures:
        worker_failures(graded.summary.worker_failures)
        sys.exit(1)


@main.command()
@COURSE
@LESSON
@out_option("where audit.json goes (default: the lesson's `out`/audit)")
@JOBS
@click.option("--sample", "sample_size", type=click.IntRange(min=1),
              help="grade a deterministic sample of N mutants (for CI)")
@click.option("--operators", help="comma-separated operators (default: all)")
@click.option("--min-kill", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="fail when fewer of the non-equivalent mutants are killed")
@click.option("--unsandboxed", is_flag=True,
              help="allow grading without the sandbox when it cannot be set up")
def audit(course_path, lesson_key, out, jobs, sample_size, operators, min_kill,
          unsandboxed) -> None:
    """Instructors: mutation-test the hidden tests with mutants of the solution."""
    from grader.run import grading
    from grader.author.audit import report, run as auditing
    from grader.judge.context import LessonContext
    from grader.judge.plan import Summary
    from grader.sandbox import bwrap

    started = time.monotonic()
    course = _course(course_path)
    lesson = _lesson(course, lesson_key)
    out = out or graded_folder(course, lesson_key, None) / "audit"

    ctx = LessonContext(course, lesson_key)
    support = bwrap.probe()  # whether bwrap works here: once for every batch

    def grade(todo, graded: Path) -> None:
        summary = Summary()
        grading.grade(ctx, todo, graded, summary, jobs=jobs, language=course.language,
                      sandbox=grading.boot(course, lesson, unsandboxed, support, (graded,),
                                           fork=False),
                      unsandboxed=unsandboxed, support=support, scheduler=None,
                      events=RunConsole())
        if summary.worker_failures:
            raise click.ClickException("\n".join(summary.worker_failures))

    try:
        found = auditing.audit(course, lesson_key, grade, auditing.operator_names(operators),
                               sample_size, started)
    except (ValueError, RuntimeError, grading.GradingError) as exc:
        raise click.ClickException(str(exc)) from None
    except grading.Stopped as stop:
        stopped(stop.graded, stop.total)
        raise click.exceptions.Exit(130) from None
    path = report.write(found, out)
    report.show(found, Console(highlight=False), min_kill)
    console.print(f"report: {path}", markup=False)
    sys.exit(0 if found.kill_rate >= min_kill else 1)


main.add_command(check)


@main.command()
@COURSE
@LESSON
@click.option("--variants", "folder", type=click.Path(file_okay=False, exists=True,
                                                      path_type=Path),
              help="a folder of correct variants (*.py) (default: the lesson's "
                   "`correct` in course.yml, if set); two more are generated from the "
                   "solution")
@click.option("--tests", "select", default="", help="only the graded tests pytest's -k "
                                                     "expression picks, e.g. test_tables")
def tolerance(course_path, lesson_key, folder, select) -> None:
    """Instructors: measure each check's correct and mistaken differences, suggest
    atol/rtol with their margins, and name drift and unsafe tolerances."""
    from grader.author.selftest import default_correct
    from grader.author.tolerance import advise
    from grader.author.tolerance.report import render

    course = _course(course_path)
    _lesson(course, lesson_key)
    try:
        advice = advise(course, lesson_key, folder or default_correct(course, lesson_key),
                        select)
    except (ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(render(advice))
    sys.exit(1 if any(r.too_tight or r.unsafe for r in advice.rows) else 0)


@main.command()
@COURSE
@LESSON
@click.option("--correct", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="a folder of correct variants (*.py) that must score full marks with no "
                   "diagnosis (default: the lesson's `correct` in course.yml, if set)")
@out_option("keep the graded class here (default: a temporary folder)")
@JOBS
def selftest(course_path, lesson_key, correct, out, jobs) -> None:
    """Instructors: check a lesson's contract (solution full, stub zero, mistakes named
    in their own part, correct variants full, unique names, no leaks, safe hints)."""
    from grader.author.selftest import default_correct, selftest as run_selftest

    course = _course(course_path)
    _lesson(course, lesson_key)
    try:
        found = run_selftest(course, lesson_key, correct or default_correct(course, lesson_key),
                             jobs, out)
    except (ValueError, OSError) as exc:  # a malformed mistakes.yml, a missing file
        raise click.ClickException(str(exc)) from None
    print_findings(found, lesson_key)
    sys.exit(1 if any(f.failed for f in found) else 0)


@main.command("new-lesson")
@COURSE
@click.argument("key")
@click.option("--name", required=True, help="a short name: the files are <KEY>_<NAME>.py")
@click.option("--parts", required=True, help="comma-separated part names, in grading order")
@click.option("--composite", default=None,
              help="the part built from the others (after them in --parts): its tests "
                   "compare with `explained` too")
def new_lesson(course_path, key, name, parts, composite) -> None:
    """Instructors: write a lesson's skeleton (course.yml entry, solution, stub, probes,
    a graded and a practice test per part, mistakes.yml, an example class) to fill in."""
    from grader.author.newlesson import LessonError, create

    names = [p.strip() for p in parts.split(",") if p.strip()]
    try:
        written = create(Path(course_path), key, name, names, composite)
    except (LessonError, config.ConfigError) as exc:
        raise click.ClickException(str(exc)) from None
    root = written[0].parent
    for path in written:
        console.print(f"wrote {path.relative_to(root)}", markup=False)
    console.print(f"next: fill in every TODO(new-lesson), add known mistakes to "
                  f"mistakes.yml, then `grader release --lesson {key}` and "
                  f"`grader selftest --lesson {key}` (the project's contract test runs it "
                  "too)", markup=False)


@main.command()
@COURSE
@LESSON
@click.option("--check", "check_only", is_flag=True,
              help="fail if the committed stub differs from what the solution generates")
def release(course_path, lesson_key, check_only) -> None:
    """Generate the student stub from the solution's BEGIN/END SOLUTION markers."""
    from grader.lesson.release import MarkerError, make_stub

    course = _course(course_path)
    lesson = _lesson(course, lesson_key)
    if lesson.solution is None:
        raise click.ClickException("a stub is made from the solution, which this course "
                                   "(a student bundle) does not have")
    solution, stub = course.path(lesson.solution), course.path(lesson.stub)
    try:
        text = make_stub(solution.read_text(encoding="utf-8"), str(lesson.solution),
                         lesson.written)
    except MarkerError as exc:
        raise click.ClickException(str(exc)) from None
    if check_only:
        if not stub.exists() or stub.read_text(encoding="utf-8") != text:
            raise click.ClickException(f"{lesson.stub} is out of date: run "
                                       f"`grader release --lesson {lesson_key}`")
        console.print(f"{lesson.stub} is up to date", markup=False)
        return
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text(text, encoding="utf-8")
    console.print(f"wrote {lesson.stub}", markup=False)


@main.command()
@COURSE
@LESSON
@click.option("--export", "export_to", type=click.Path(dir_okay=False, path_type=Path),
              help="write the answers awaiting or given a mark as a CSV, prefilled")
@click.option("--import", "import_from", type=click.Path(dir_okay=False, path_type=Path),
              help="apply a CSV made by --export (blank: unchanged, `-`: cleared)")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default="any free one",
              help="the marking page's port on 127.0.0.1")
@click.option("--no-browser", is_flag=True, help="print the marking page's address only")
@language("the marking page's language", recorded=False)
def mark(course_path, lesson_key, export_to, import_from, port, no_browser,
         language) -> None:
    """TAs: mark the check questions' text answers, from grades/<lesson>/ beside
    course.yml (no OUT needed): on a page in your browser, served from this machine
    until Ctrl-C, or with --export/--import as a CSV. Every mark is saved as it is made;
    `grader run` then puts the marks in scores and pages."""
    from grader.deliver import written_csv

    course = _course(course_path)
    lesson = _lesson(course, lesson_key)
    if not any(q.kind == "text" for q in lesson.written.values()):
        raise click.ClickException(f"lesson {lesson_key} has no text question to mark "
                                   "(course.yml's `written`)")
    if export_to is not None and import_from is not None:
        raise click.UsageError("give one of --export FILE.csv and --import FILE.csv")
    if export_to is None and import_from is None:
        _marking_page(course, lesson_key, port, not no_browser, language or course.language)
        return
    if export_to is not None:
        rows = written_csv.export_rows(course.root, lesson_key, lesson)
        if len(rows) == 1:
            raise click.ClickException("no answer is recorded yet: run `grader run "
                                       f"--lesson {lesson_key}` first")
        written_csv.write_export(export_to, rows)
        console.print(f"wrote {export_to}: {len(rows) - 1} answer(s)", markup=False)
        return
    try:
        done = written_csv.import_file(course.root, lesson_key, lesson, import_from)
    except written_csv.CsvError as exc:
        raise click.ClickException(str(exc)) from None
    console.print(f"applied {done.applied}, unchanged {done.unchanged}, refused "
                  f"{len(done.refused)}", markup=False)
    for why in done.refused:
        console.print(f"  refused: {why}", markup=False, soft_wrap=True)
    console.print(f"run `grader run --lesson {lesson_key}` to put the marks in the "
                  "scores and pages", markup=False)
    if done.refused:
        sys.exit(1)


def _marking_page(course: config.Course, lesson_key: str, port: int, browser: bool,
                  language: str) -> None:
    """Serve the marking page until Ctrl-C (deliver/marking.py)."""
    import webbrowser

    from grader.deliver import marking

    try:
        server, url = marking.serve(course, lesson_key, language, port)
    except OSError as exc:
        raise click.ClickException(f"cannot serve the marking page on 127.0.0.1:{port}: "
                                   f"{exc.strerror or exc}") from None
    console.print(f"marking page: {url}", markup=False, soft_wrap=True)
    console.print("every mark is saved as it is made; Ctrl-C stops the page, then run "
                  f"`grader run --lesson {lesson_key}` to put the marks in the scores and "
                  "pages", markup=False)
    sys.stdout.flush()
    if browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("marking page stopped", markup=False)
    finally:
        server.server_close()


def _record_folder(course: config.Course, lesson_key: str):
    """grades/<lesson>/ beside course.yml, the lesson's students (the roster's, or None
    without one: then any id is taken), who is acting and now."""
    import getpass
    from datetime import datetime, timezone

    from grader.intake import roster as rosters
    from grader.judge import final

    roster = rosters.load(course, lesson_key)
    known = set(roster.students) if course.roster is not None else None
    return (final.grades_folder(course.root, lesson_key), known, getpass.getuser(),
            datetime.now(timezone.utc).isoformat(timespec="microseconds"))


def _student(known: set[str] | None, student: str) -> None:
    if known is not None and student not in known:
        raise click.BadParameter(f"{student!r} is not on the course's roster",
                                 param_hint="'--student'")


@main.command()
@COURSE
@LESSON
@click.option("--student", required=True, help="the student id")
@click.option("--until", help="the student's due date, e.g. 2026-10-04 23:59 (without an "
              "offset: course.yml's timezone, else due's offset)")
@click.option("--excuse", is_flag=True, help="no late credit at all for this student")
@click.option("--reason", required=True, help="why (kept in the history)")
def extend(course_path, lesson_key, student, until, excuse, reason) -> None:
    """TAs: give a student an extension (or --excuse them from the late rule), in
    grades/<lesson>/extensions.csv beside course.yml; it replaces the student's earlier
    one, which the history keeps. The next `grader run` applies it."""
    from grader.judge import final

    course = _course(course_path)
    _lesson(course, lesson_key)
    if (until is None) == (not excuse):
        raise click.UsageError("give one of --until DATE and --excuse")
    folder, known, by, now = _record_folder(course, lesson_key)
    _student(known, student)
    zone = course.lms_zone(lesson_key)
    try:
        due = None if excuse else final.read_time(until, zone)
    except ValueError:
        raise click.BadParameter(f"{until!r} is not a date and time like 2026-10-04 23:59",
                                 param_hint="'--until'") from None
    try:
        old = final.write_extension(folder, final.Extension(student, due, reason, by, now),
                                    zone, known)
    except final.RecordError as exc:
        raise click.ClickException(str(exc)) from None
    what = ("excused from the late rule" if excuse or due is None
            else f"due {due.isoformat()}")
    console.print(f"{student}: {what}" + (f" (replaces {old.row()[1]})" if old else "")
                  + f"; run `grader run --lesson {lesson_key}` to apply it", markup=False)


@main.command()
@COURSE
@LESSON
@click.option("--student", required=True, help="the student id")
@click.option("--part", help="the part whose score to set or adjust")
@click.option("--question", help="a text check question (q1, …) to mark with --set")
@click.option("--set", "set_to", type=float, help="the part's points")
@click.option("--adjust", type=float, help="points added to the part's score (e.g. -0.5)")
@click.option("--revoke", "revoke_id", help="an override's id (o1, …) to revoke")
@click.option("--reason", required=True, help="why: shown to the student")
@click.option("--note", default="", help="a private note for the TAs, never shown")
def override(course_path, lesson_key, student, part, question, set_to, adjust, revoke_id,
             reason, note) -> None:
    """TAs: set or adjust a part's score for one student, or revoke such an override:
    appended to grades/<lesson>/overrides.jsonl beside course.yml, never deleted.
    `grader run` never changes it; the next run applies it. --question marks a text
    check question instead, as `grader mark` does, the reason as its comment."""
    from grader.judge import final

    course = _course(course_path)
    lesson = _lesson(course, lesson_key)
    if sum(x is not None for x in (set_to, adjust, revoke_id)) != 1:
        raise click.UsageError("give one of --set X, --adjust ±X and --revoke ID")
    if revoke_id is None and (part is None) == (question is None):
        raise click.UsageError("give one of --part and --question with --set or --adjust")
    if question is not None and set_to is None:
        raise click.UsageError("a question's mark is set: give --set with --question")
    folder, known, by, now = _record_folder(course, lesson_key)
    _student(known, student)
    try:
        if question is not None:
            final.mark_question(folder, lesson, student, question, set_to, reason, by, now)
            console.print(f"{student} {question}: marked {set_to:g} (written.jsonl)",
                          markup=False)
        elif revoke_id is not None:
            row = final.revoke(folder, revoke_id, student, reason, by, now)
            console.print(f"{row['id']}: {student}'s override {revoke_id} revoked",
                          markup=False)
        else:
            kind, value = (final.SET, set_to) if set_to is not None else (final.ADJUST,
                                                                           adjust)
            row = final.new_override(folder, lesson, student, part, kind, value, reason,
                                     note, by, now)
            console.print(f"{row['id']}: {student} part {part} {kind} {value:g}",
                          markup=False)
    except final.RecordError as exc:
        raise click.ClickException(str(exc)) from None
    console.print(f"run `grader run --lesson {lesson_key}` to apply it", markup=False)


@main.command()
@COURSE
@LESSON
@click.option("--student", help="the student asking")
@click.option("--part", help="the part the request is about")
@click.option("--request", "text", help="open a request with this text")
@click.option("--resolve", "resolve_id", help="close the open request with this id (r1, …)")
@click.option("--reason", default="", help="with --resolve: the answer")
def regrade(course_path, lesson_key, student, part, text, resolve_id, reason) -> None:
    """Regrade requests, in grades/<lesson>/regrades.jsonl beside course.yml: open one
    (--student, --part, --request, inside course.yml's `regrades` window), close one
    (--resolve ID --reason, with or without a `grader override`), or, with neither,
    list the open ones."""
    from datetime import datetime, timezone

    from grader.judge import final

    course = _course(course_path)
    lesson = _lesson(course, lesson_key)
    folder, known, by, now = _record_folder(course, lesson_key)
    try:
        if text is not None:
            if student is None or part is None:
                raise click.UsageError("give --student and --part with --request")
            _student(known, student)
            zone, due, w = course.lms_zone(lesson_key), course.due(lesson_key), lesson.regrades
            window = (None, None) if w is None else (
                config.when_of(w.opens, due, zone) if w.opens else None,
                config.when_of(w.closes, due, zone) if w.closes else None)
            row = final.request_regrade(folder, lesson, student, part, text, by,
                                        datetime.now(timezone.utc), window)
            console.print(f"{row['id']}: opened for {student}, part {part}", markup=False)
            return
        if resolve_id is not None:
            if not reason.strip():
                raise click.UsageError("give --reason with --resolve")
            final.resolve_regrade(folder, resolve_id, reason, by, now)
            console.print(f"{resolve_id}: resolved", markup=False)
            return
    except (final.RecordError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    waiting = final.open_requests(folder)
    console.print(f"{len(waiting)} open regrade request(s)", markup=False)
    for r in waiting:
        console.print(f"{r['id']}  {r['at'][:19].replace('T', ' ')}  {r['student_id']}  "
                      f"part {r['part']}: {r['text']}", markup=False, highlight=False,
                      soft_wrap=True)


@main.command()
@COURSE
@LESSON
@click.option("--student", help="only this student's trail")
def history(course_path, lesson_key, student) -> None:
    """Staff: the trail of lesson's grade of record, in time order: extensions,
    overrides, revokes, the automatic score under each override, written marks."""
    from grader.judge import final

    course = _course(course_path)
    _lesson(course, lesson_key)
    events = final.history(final.grades_folder(course.root, lesson_key), student)
    if not events:
        console.print("nothing recorded yet", markup=False)
    for when, sid, what in events:
        shown = when[:19].replace("T", " ") if when else "(time not recorded)"
        console.print(f"{shown}  {sid}  {what}", markup=False,
                      highlight=False, soft_wrap=True)


@main.command("student-bundle")
@COURSE
@LESSON
@out_option("the folder to write the bundle into", old="dest", required=True)
def student_bundle(course_path, lesson_key, out) -> None:
    """Write what students need to `grader check` at home: no solution inside."""
    from grader.deliver.bundle import build, zipped

    course = _course(course_path)
    lesson = _lesson(course, lesson_key)
    if not lesson.solution:
        raise click.ClickException("a student bundle is made from a course with its solution")
    folder = build(course, lesson_key, out)
    console.print(f"wrote {folder}", markup=False)
    console.print(f"wrote {zipped(folder)} (the same, to upload to the LMS)", markup=False)


@main.command()
@COURSE
@LESSON
@GRADED_OUT
@language("the report's language")
def report(course_path, lesson_key, out, language) -> None:
    """Write the class report (HTML) from a graded folder, into that folder."""
    from grader.pages.feedback import language_of, templates
    from grader.run.grading import rewrite_report

    course = _course(course_path)
    _lesson(course, lesson_key)
    out = graded_folder(course, lesson_key, out)
    if not rewrite_report(course, lesson_key, out, language_of(course, language, out),
                          templates()):
        raise click.ClickException(f"nothing graded in {out}: run `grader run` first")
    console.print(f"report: {Store(out).report_path}", markup=False)


@main.command()
@COURSE
@LESSON
@click.option("--submissions", type=click.Path(path_type=Path),
              help="the class, as `grader run` takes it (default: the lesson's "
                   "`submissions` in course.yml)")
@out_option("the graded folder: similarity.html goes there and its report.html links "
            "it (default: the lesson's `out` in course.yml)")
@click.option("--threshold", type=click.FloatRange(0, 1), default=THRESHOLD,
              show_default=True,
              help="list pairs in which more than this share of one file matches the other")
@language("the similarity page's language")
@TRUST_WORKSHEET
def similarity(course_path, lesson_key, submissions, out, threshold, language,
               trust_worksheet) -> None:
    """TAs: compare every pair of submissions; write the similar pairs side by side."""
    from grader.pages.feedback import language_of
    from grader.run.compare_class import compare_class
    from grader.text.shown import clean

    course = _course(course_path)
    _lesson(course, lesson_key)
    submissions, out = class_folders(course, lesson_key, submissions, out)
    try:
        result = compare_class(course, lesson_key, submissions, out, threshold,
                               language_of(course, language, out), trust_worksheet)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    for sid, why in result.unread:
        console.print(f"  {clean(sid, 200)}: not compared ({why})", markup=False)
    budget, found, above = course.similarity.budget(), result.found, f"{100 * threshold:g}%"
    for label, kb in result.cut:
        console.print(f"  {clean(label, 200)}: only its first {budget.file_kb} KB compared "
                      f"({kb} KB; course.yml similarity.file_kb)", markup=False)
    pairs = f"{found.total}"
    if found.out_of_time:
        console.print(f"time budget reached ({budget.seconds:g} s, course.yml "
                      f"similarity.seconds): {found.examined} of {found.total} pairs "
                      "compared, the rest not", markup=False)
        pairs = f"{found.examined} of {found.total}"
    console.print(f"compared {result.compared} submissions ({pairs} pairs); "
                  f"{len(found.pairs)} above {above}:", markup=False)
    for pair in found.pairs[:PAIRS_SHOWN]:
        console.print(f"  {100 * pair.similarity:3.0f}%  {clean(pair.a.student_id, 80)} · "
                      f"{clean(pair.b.student_id, 80)}", markup=False, highlight=False)
    store = Store(out)
    if len(found.pairs) > PAIRS_SHOWN:
        console.print(f"  ... and {len(found.pairs) - PAIRS_SHOWN} more", markup=False)
    if found.shape_only:
        console.print(f"  {found.shape_only} pairs above {above} not listed: they share under "
                      f"{KEPT} characters of code with names kept, so they are alike only in "
                      "the shape of their statements", markup=False)
    if result.shown < len(found.pairs):
        console.print(f"{store.similarity_path.name} shows {result.shown} of "
                      f"{len(found.pairs)} pairs: more would pass its budget of "
                      f"{budget.page_kb} KB (course.yml similarity.page_kb)", markup=False)
    console.print(f"similarity: {store.similarity_path}", markup=False, soft_wrap=True)
    if result.report:
        console.print(f"report:     {store.report_path} (links it)", markup=False,
                      soft_wrap=True)


def _scores(out: Path) -> ClassScores:
    """A graded folder's scores.json, as the records every export and upload reads;
    missing or broken, a message saying what to do."""
    path = Store(out).scores_path
    try:
        return ClassScores.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise click.ClickException(f"no {path.name} in {out}: run `grader run` first") \
            from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.ClickException(f"{path} is not the JSON `grader run` "
                                   f"writes ({exc}): run `grader run` again") from None


def _formats(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    """--to's comma-separated formats; an unknown one is a usage error."""
    formats = [f.strip() for f in value.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise click.BadParameter(f"unknown format(s) {', '.join(unknown) or repr(value)}; "
                                 f"known: {', '.join(FORMATS)}")
    return formats


@main.command()
@COURSE
@LESSON
@click.option("--to", "formats", required=True, callback=_formats,
              help="comma-separated: " + ", ".join(FORMATS))
@GRADED_OUT
@language("the LMS comments' language")
def export(course_path, lesson_key, formats, out, language) -> None:
    """Write the graded scores in the formats LMSs import, into OUT/export."""
    from grader.deliver.export import ROSTER_REPORT, export_all, late_notes
    from grader.pages.feedback import language_of

    course = _course(course_path)
    _lesson(course, lesson_key)
    out = graded_folder(course, lesson_key, out)
    scores = _scores(out)
    try:
        paths, unwritten = export_all(course, lesson_key, scores, Store(out).export_path,
                                      formats, language_of(course, language, out))
    except (ValueError, config.ConfigError) as exc:
        raise click.ClickException(str(exc)) from None
    for p in paths:
        console.print(f"wrote {p}", markup=False)
    for note in late_notes(course, lesson_key, formats):
        console.print(note, markup=False)
    report = Store(out).export_path / ROSTER_REPORT
    if report in paths:
        console.print(report.read_text(encoding="utf-8"), markup=False, highlight=False)
    if unwritten:  # an import would leave these students without a score: not a success
        raise click.ClickException(f"{len(unwritten)} graded student(s) have no row in "
                                   f"the files above; {report} says why")


@main.command()
@COURSE
@LESSON
@click.option("--to", "service", required=True, type=click.Choice(["lti"]),
              help="lti: LTI 1.3 Assignment and Grade Services (course.yml's `lti:`)")
@GRADED_OUT
@click.option("--dry-run", is_flag=True, help="print what would be sent; send nothing")
@click.option("--force", is_flag=True, help="resend scores the platform already has")
@click.option("--public-jwk", is_flag=True,
              help="print the tool's public key as a JWK (to register it) and exit")
def upload(course_path, lesson_key, service, out, dry_run, force, public_jwk) -> None:
    """Send the graded scores to the LMS; only scores that changed are sent."""
    from grader.deliver.upload import UploadError
    from grader.deliver.upload import keys, lti

    course = _course(course_path)
    _lesson(course, lesson_key)
    try:
        if public_jwk:
            key = keys.read_key(course)
            click.echo(json.dumps(keys.public_jwk(key, keys.lti_config(course).key_id), indent=1))
            return
        out = graded_folder(course, lesson_key, out)
        done = lti.upload(course, lesson_key, _scores(out), out, dry_run=dry_run,
                          force=force)
    except UploadError as exc:
        raise click.ClickException(str(exc)) from None
    print_upload(done, course, lesson_key, dry_run)
    from grader.deliver.export import late_notes

    for note in late_notes(course, lesson_key, ["lti"]):
        console.print(note, markup=False)
    sys.exit(1 if done.refused else 0)


@main.command("autograder-zip")
@COURSE
@LESSON
@out_option("where the zip goes: a folder (for autograder_<lesson>.zip) or a .zip path",
            old="dest", default=Path("."), show_default=True)
def autograder_zip(course_path, lesson_key, out) -> None:
    """Build a Gradescope autograder zip (setup.sh, run_autograder) for one lesson."""
    from grader.deliver.autograder_zip import build, memory_warning

    course = _course(course_path)
    _lesson(course, lesson_key)
    if warning := memory_warning(course, lesson_key):
        console.print("[yellow]warning:[/] ", end="")
        console.print(warning, markup=False)
    console.print(f"building the autograder of lesson {lesson_key}: grading the solution and "
                  "each known mistake once, so that Gradescope's runs need neither (a minute "
                  "or more)...", markup=False)
    console.print(f"wrote {build(course.root, lesson_key, out)}", markup=False)


if __name__ == "__main__":
    main()
