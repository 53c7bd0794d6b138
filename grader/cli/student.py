"""`grader check`, the students' command, and `student`, the command group a student
bundle installs as `grader` (its pyproject.toml names it).

They live apart from the staff's commands (`grader.cli`) so that a check starts with
little to import. From a bundle's own `grader`, where bwrap works, a check with its
file named enters the bundle's bubblewrap sandbox once it has seen that the file and
the course file are there: no course file validated (it is read as plain YAML only
for an assembly lesson's earlier files, which the sandbox binds), no pydantic or rich
imported (about 0.2 s, which the check inside pays again); the check inside reads and
validates everything, and says what is wrong.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.cli.options import CHECK_COURSE, CHECK_LESSON, language
from grader.run import interrupts

if TYPE_CHECKING:
    from grader.config import Course
    from grader.sandbox.bwrap import Support


class WrongInput(click.ClickException):
    """The file or the command is wrong: `grader check` exits 2 (docs/students.md)."""

    exit_code = 2


@click.command()
@CHECK_COURSE
@CHECK_LESSON
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="print the results as JSON (per part: practice tests, messages, "
                   "the likely mistake)")
@language("the check's language", recorded=False)
@click.option("--watch", is_flag=True,
              help="keep checking: again each time the file is saved (Ctrl-C ends)")
@click.option("--in-bwrap", is_flag=True, hidden=True,
              help="already inside the bundle's bubblewrap sandbox (bwrap.practice_command)")
def check(course_path, lesson_key, file, as_json, language, watch, in_bwrap) -> None:
    """Students: run the practice tests on your file (.py or .ipynb) and see each
    part's result.

    Exit status: 0 every practice test passed, 1 some failed, 2 the file or the
    command is wrong, 3 the grader itself failed (tell the course staff); with
    --watch, 130 when Ctrl-C ends it (143 a kill, 129 a closed terminal)."""
    with interrupts.as_ctrl_c():  # killed or hung up, it cleans up as on Ctrl-C
        _check(course_path, lesson_key, file, as_json, language, watch, in_bwrap)


def _check(course_path, lesson_key, file, as_json, language, watch, in_bwrap) -> None:
    """`check`'s work, which ends the process (`practice_run.finish`) but where a file
    or the command is wrong (exit 2)."""
    from grader.run import practice_run
    from grader.sandbox import bwrap

    course_file = practice_run.course_file(course_path)
    try:
        practice_run.given(course_file, file)
        # A student bundle hides nothing from the student's code (no solution, no
        # graded test): where bwrap works, the whole check runs inside it, one torch
        # import for the grader and the code. A course with its solution keeps the two
        # apart. (Inside the bundle's sandbox, whether bwrap works is not asked: no
        # sandbox is made there.)
        support = None if in_bwrap else bwrap.probe()
        whole = support is not None and support.mode in ("root", "userns")
        if whole and file is not None and _bundles():
            _enter_sandbox(course_file, lesson_key, file, as_json, language, watch)
        course, lesson_key = practice_run.lesson_for(course_file, lesson_key, file)
    except practice_run.WrongInput as exc:
        raise WrongInput(str(exc)) from None
    lesson = course.lesson(lesson_key)
    if in_bwrap and lesson.solution is not None:
        raise WrongInput(f"{course_file} holds the lesson's solution: check with the "
                         "course's own grader, not a student bundle's")
    file = file or course.path(lesson.stub)
    if not file.is_file():
        raise WrongInput(f"no such file: {file}")
    if whole and lesson.solution is None:
        _enter_sandbox(course_file, lesson_key, file, as_json, language, watch)
    _check_here(course, lesson_key, file, as_json, language, watch, in_bwrap, support)


def _bundles() -> bool:
    """Whether this check was started by a student bundle's own `grader` (`student`),
    whose course has no solution: it need not read the course to know that."""
    return click.get_current_context().find_root().command is student


def _enter_sandbox(course_file: Path, lesson_key: str | None, file: Path, as_json: bool,
                   language: str | None, watch: bool) -> None:
    """Run the whole check again inside the bundle's sandbox (`bwrap.practice_command`),
    as this process (`execv`), or beside it for `--watch`; never returns."""
    from grader.run import practice_run
    from grader.sandbox import bwrap

    course_file, file = course_file.resolve(), file.resolve()
    argv = ["check", "--course", str(course_file),
            *(["--lesson", lesson_key] if lesson_key else []),
            *(["--json"] if as_json else []), *(["--language", language] if language else []),
            *(["--watch"] if watch else []), "--in-bwrap", str(file)]
    # an assembly lesson's earlier files beside the student's, and nothing else there
    also = practice_run.earlier_files(course_file, lesson_key, file)
    command = bwrap.practice_command(course_file.parent, file, argv, also)
    sys.stdout.flush()
    if not watch:
        os.execv(command[0], command)
    practice_run.finish(_watch_in_bwrap(command, file))


def _check_here(course: Course, lesson_key: str, file: Path, as_json: bool,
                language: str | None, watch: bool, in_bwrap: bool,
                support: Support | None) -> None:
    """The check in this process: the trusted side here, the student's code in a slot
    of a sandbox of its own (or, inside the bundle's sandbox, in a fork of this one)."""
    from rich.console import Console
    from rich.markup import escape

    from grader.judge import kept
    from grader.run import practice_output, practice_run
    from grader.cli.console import console
    from grader.sandbox import slot as slots

    lesson = course.lesson(lesson_key)
    # (nothing was probed inside the bundle's sandbox, in_bwrap: it is the sandbox)
    sandboxed = in_bwrap or support is None or slots.available(True, support)
    if not sandboxed and support is not None:
        console.print(f"note: your code runs without the sandbox "
                      f"({support.reason})", markup=False)
    # The sandbox boots (torch, once) while this process imports torch for the checks;
    # unsandboxed (no bwrap) the zygote is a fork of this process: one import for both.
    with interrupts.held():  # torch is imported here: a Ctrl-C in it must not be lost
        sandbox = slots.Sandbox.for_lesson(course, lesson, sandboxed and not in_bwrap,
                                           fork=True, support=support)
        import torch  # noqa: F401 - held: see above
        # an assembly lesson on the student's own earlier files: a sandbox of each of
        # their lessons, booted with this one (a fork is made before any thread starts)
        others = practice_run.earlier_slots(course, lesson_key, lambda k: slots.Sandbox.for_lesson(
            course, course.lesson(k), sandboxed and not in_bwrap, fork=True,
            support=support).sole_slot())
    from grader.judge.plugin import GraderFault
    from grader.sandbox.limits import SandboxError

    stdout = sys.stdout  # the tests' runs send sys.stdout elsewhere while they run
    # piped, a line is not wrapped at 80 columns mid-phrase
    out = Console(highlight=False, file=stdout, soft_wrap=not stdout.isatty())
    shown: list[practice_run.Practiced] = []
    ctx = practice_run.context(course, lesson_key)
    practice_run.prepare(ctx)  # while the sandbox boots

    def show(checked: practice_run.Practiced) -> None:
        if watch and shown and not as_json:
            out.print(f"[dim]── {file.name} saved: checked again ──[/]")
        shown.append(checked)
        if as_json:
            click.echo(json.dumps(checked.outcome, ensure_ascii=False,
                                  indent=None if watch else 1), file=stdout)
        else:
            practice_output.print_outcome(checked.record, checked.outcome, course, lesson_key,
                                     out)
            practice_output.print_written(checked.outcome, course, lesson_key, out)
        stdout.flush()
        if watch:  # what this check had to compute, kept now: a watch ends by Ctrl-C
            kept.remember(ctx)

    slot = sandbox.sole_slot()
    status = practice_output.GRADER_FAILED
    try:
        _torch_note(ctx.refs.torch)
        pieces = practice_run.own_pieces(course, lesson_key, file, others, language)
        if not watch:
            checked = practice_run.run_file(ctx, file, slot, language, pieces)
            show(checked)
            status = checked.status
        else:
            if not as_json:
                out.print(f"[dim]watching {escape(str(file))}: checked again each time "
                          "it is saved (Ctrl-C ends)[/]")
            with tempfile.TemporaryDirectory(prefix="grader-watch-") as tmp:
                versions = (practice_run.received(sys.stdin.buffer, Path(tmp) / file.name)
                            if in_bwrap else practice_run.saves(file))
                practice_run.watch(ctx, versions, file.name, slot, show, language, pieces)
            status = 0  # the file's versions ended: the process outside bwrap stopped
    except (GraderFault, SandboxError) as exc:  # ours, never the student's
        console.print(f"Error: the grader failed (not your code; tell the course staff): "
                      f"{exc}", markup=False)
    except KeyboardInterrupt:
        status = interrupts.status()
    finally:
        practice_run.close(slot)
    kept.remember(ctx)
    practice_run.finish(status)


def _watch_in_bwrap(command: list[str], file: Path) -> int:
    """`check --watch` inside a bundle's sandbox: this process, outside, watches the
    file and sends each saved version in; Ctrl-C here ends both cleanly (the sandbox
    is in a session of its own, which the terminal's Ctrl-C does not reach)."""
    import subprocess

    from grader.run import practice_run

    proc = subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True)
    stdin = proc.stdin
    assert stdin is not None  # stdin=PIPE gives a pipe, always
    stopped = False
    try:
        practice_run.send(file, stdin)
    except KeyboardInterrupt:
        stopped = True
    except BrokenPipeError:  # the check inside ended (it failed): its status says why
        pass
    finally:
        try:
            stdin.close()
        except BrokenPipeError:
            pass
    try:
        code = proc.wait(timeout=60)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.kill()
        code = proc.wait()
    return interrupts.status() if stopped else code


@click.group()
def student() -> None:
    """Check your work for the MiniMind course (a student bundle's commands)."""


student.add_command(check)


def _torch_note(graded: str) -> None:
    """Say so when the student's torch is not the one the reference results (and the
    graded run) were computed with: a check reuses the torch the student has."""
    import torch

    from grader.cli.console import console

    mine = torch.__version__.split("+")[0]
    if graded and graded.split("+")[0] != mine:
        console.print(f"note: you have torch {mine}; the graded run uses torch "
                      f"{graded.split('+')[0]}", markup=False)
