"""`grader similarity`'s work: the class read as a run reads it (intake, the roster),
every pair compared as text (grader/similarity.py), OUT/similarity.html written, and
the class report written again to link it. Nothing here prints; `Compared` says what
was done, for the CLI to show.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader import intake, similarity
from grader import roster as rosters
from grader.config import Course
from grader.feedback import templates
from grader.grading import SIMILARITY, rewrite_report
from grader.report import render_similarity
from grader.store import write_atomic


@dataclass
class Compared:
    """The similar pairs, how many files were compared, those that could not be read
    (student id, why), and whether the class report now links the page."""

    pairs: list[similarity.Pair]
    compared: int
    unread: list[tuple[str, str]] = field(default_factory=list)
    report: bool = False


def compare_class(course: Course, lesson_key: str, submissions: Path, out: Path,
                  threshold: float, language: str) -> Compared:
    """Compare every pair of the class in `submissions`; write OUT/similarity.html."""
    lesson = course.lesson(lesson_key)
    taken = intake.collect(submissions, lesson.exercise, cache=out / "intake",
                           roster=rosters.load(course).students, due=lesson.due)
    texts: dict[str, str] = {}
    unread: list[tuple[str, str]] = []
    for sid, path, _ in taken.found:
        try:
            if path is not None:
                texts[sid] = similarity.read_text(path)
        except OSError as exc:
            unread.append((sid, str(exc.strerror)))
    stub = similarity.read_text(course.path(lesson.stub))
    pairs = similarity.compare(texts, stub, threshold)
    pages = templates()
    write_atomic(out / SIMILARITY, render_similarity(pairs, len(texts), threshold, course,
                                                     lesson_key, language, pages))
    return Compared(pairs, len(texts), unread,
                    rewrite_report(course, lesson_key, out, language, pages))
