"""The grader as a library: a script or a notebook grades a class, checks one file, or
exports a graded class's scores without the CLI. Each function takes course.yml's path
and a lesson key, as the commands do, and prints nothing: a run's notes and warnings
are kept on its events (`Quiet` unless others are given). This module sits above every
stage it calls (the import-linter contract `stages` lists it first)."""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from grader import config
from grader.record import ClassScores
from grader.run.grading import Events, Graded, Progress
from grader.run.practice_run import Practiced
from grader.store import Store


@dataclass
class Quiet:
    """Events that print nothing: what a run would tell a TA, kept to be read after."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def unsandboxed(self) -> None:
        self.notes.append("student code runs without the sandbox (unsandboxed=True)")

    @contextmanager
    def grading(self, total: int) -> Iterator[Progress]:
        yield lambda event, data: None


def _folder(course: config.Course, lesson_key: str, given: Path | str | None,
            what: Literal["out", "submissions"]) -> Path:
    """`given`, else course.yml's default for the lesson (`Course.folder`); with
    neither, a clear error."""
    folder = course.folder(lesson_key, given, what)
    if folder is None:
        raise ValueError(f"give {what} (course.yml sets no `{what}` for lesson {lesson_key})")
    return folder


def grade_class(course_file: Path | str, lesson_key: str,
                submissions: Path | str | None = None, out: Path | str | None = None, *,
                jobs: int = 1, events: Events | None = None, force: bool = False,
                unsandboxed: bool = False, language: str | None = None) -> Graded:
    """`grader run`: grade the class in `submissions` (default: course.yml's) into `out`
    (scores.json, a page per student, the class report)."""
    from grader.run import grading

    course = config.load(course_file)
    folder = _folder(course, lesson_key, submissions, "submissions")
    if not folder.exists():
        raise FileNotFoundError(f"no submissions at {folder}: no such folder or zip")
    return grading.grade_lesson(course, lesson_key, folder,
                                _folder(course, lesson_key, out, "out"),
                                jobs=jobs, events=events or Quiet(), force=force,
                                unsandboxed=unsandboxed, language=language)


def check_file(course_file: Path | str, lesson_key: str, file: Path | str, *,
               unsandboxed: bool = False, language: str | None = None) -> Practiced:
    """`grader check`: one file's practice tests, in a sandbox of its own (closed before
    this returns). `Practiced.outcome` is what `grader check --json` prints."""
    from grader.run import practice_run
    from grader.sandbox import bwrap
    from grader.sandbox import slot as slots

    course = config.load(course_file)
    lesson = course.lesson(lesson_key)
    support = bwrap.probe()
    sandboxed = slots.available(unsandboxed, support)  # refused, unless unsandboxed
    ctx = practice_run.context(course, lesson_key)
    practice_run.prepare(ctx)
    slot = slots.Sandbox.for_lesson(course, lesson, sandboxed, fork=True,
                                    support=support).sole_slot()
    try:
        others = practice_run.earlier_slots(course, lesson_key, lambda k: slots.Sandbox.for_lesson(
            course, course.lesson(k), sandboxed, fork=True, support=support).sole_slot())
        pieces = practice_run.own_pieces(course, lesson_key, Path(file), others, language)
        return practice_run.run_file(ctx, Path(file), slot, language, pieces)
    finally:
        practice_run.close(slot)


def export(course_file: Path | str, lesson_key: str, formats: Sequence[str],
           out: Path | str | None = None, language: str | None = None
           ) -> tuple[list[Path], list[str]]:
    """`grader export`: a graded class's scores.json (in `out`, default course.yml's)
    written in `formats` into OUT/export. Returns the files written and the graded
    students a format could not write a row for (`format: student: why`)."""
    from grader.deliver.export import export_all
    from grader.pages.feedback import language_of

    course = config.load(course_file)
    folder = _folder(course, lesson_key, out, "out")
    store = Store(folder)
    scores = ClassScores.from_json(json.loads(store.scores_path.read_text(encoding="utf-8")))
    return export_all(course, lesson_key, scores, store.export_path, list(formats),
                      language_of(course, language, folder))
