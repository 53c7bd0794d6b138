"""The options the commands share, each declared once, and the precedence of their
defaults written once: the option, else what the OUT at hand recorded (for a report or
an export of an earlier run: its language, `pages.feedback.language_of`), else
course.yml. The commands that keep the grade of record (mark, extend, override,
regrade, history) work beside course.yml (grades/<lesson>/) and take no OUT.

Imports click and the languages' names only: a student's `grader check` uses it too.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.text import LANGUAGES

if TYPE_CHECKING:
    from grader import config

COURSE = click.option("--course", "course_path", default="course.yml", show_default=True,
                      type=click.Path(dir_okay=False), help="the course file")
LESSON = click.option("--lesson", "lesson_key", required=True, help="lesson key, e.g. 13")
# A student's check: the same options, with the defaults a student bundle gives.
CHECK_COURSE = click.option("--course", "course_path", type=click.Path(dir_okay=False),
                            help="the course file (default: course.yml here, else the one "
                                 "of the student bundle this command was installed from)")
CHECK_LESSON = click.option("--lesson", "lesson_key", help="the lesson (default: the one "
                                                           "whose exercise file has this name)")
TRUST_WORKSHEET = click.option(
    "--trust-worksheet", is_flag=True,
    help="read a Moodle download even where its names and the grading worksheet's "
         "disagree (the worksheet's participant numbers decide)")


def language(what: str, recorded: bool = True):
    """--language: the language of what the command writes (`what`); its default the
    precedence above (`recorded`: whether the command has an OUT to ask)."""
    default = ("the graded run's in OUT, else course.yml's" if recorded
               else "course.yml's `language`")
    return click.option("--language", type=click.Choice(LANGUAGES),
                        help=f"{what} (default: {default})")


def out(help: str, old: str | None = None, required: bool = False, **kwargs):
    """--out DIR, where the command writes or, for a report or an export, the graded
    folder it reads; `old`, a former spelling of it, is still accepted with a warning
    but not shown. The command receives one value, as `out`."""
    def decorate(command):
        if old is None:
            return click.option("--out", "out", type=click.Path(path_type=Path),
                                metavar="DIR", required=required, help=help, **kwargs)(command)

        @functools.wraps(command)
        def merged(*args, **params):
            former = params.pop(f"{old}_former")
            if former is not None:
                click.echo(f"warning: --{old} is deprecated and will be removed; "
                           "use --out", err=True)
            params["out"] = params["out"] if params["out"] is not None else former
            if required and params["out"] is None:
                raise click.UsageError("Missing option '--out'.")
            return command(*args, **params)

        merged = click.option(f"--{old}", f"{old}_former", type=click.Path(path_type=Path),
                              hidden=True)(merged)
        return click.option("--out", "out", type=click.Path(path_type=Path), metavar="DIR",
                            help=help + ("  [required]" if required else ""),
                            **kwargs)(merged)
    return decorate


# The graded folder a report, an export or an upload reads (`--results`, their former
# name for it, still accepted with a warning)
GRADED_OUT = out("the graded folder, where `grader run --out` wrote (default: the "
                 "lesson's `out` in course.yml)", old="results")


def graded_folder(course: config.Course, lesson_key: str, out_: Path | None) -> Path:
    """OUT: `--out`, else the lesson's `out` in course.yml; with neither, a usage error."""
    folder = course.folder(lesson_key, out_, "out")
    if folder is None:
        raise click.UsageError("give --out (course.yml sets no `out` for this lesson)")
    return folder


def class_folders(course: config.Course, lesson_key: str, submissions: Path | None,
                  out_: Path | None) -> tuple[Path, Path]:
    """The class and OUT a command reads, from its options or course.yml's defaults."""
    class_ = course.folder(lesson_key, submissions, "submissions")
    folder = course.folder(lesson_key, out_, "out")
    if class_ is None or folder is None:
        raise click.UsageError("give --submissions and --out (course.yml sets no default "
                               f"for lesson {lesson_key})")
    if not class_.exists():
        raise click.BadParameter(f"no submissions at {class_}: no such folder or zip",
                                 param_hint="'--submissions'")
    return class_, folder
