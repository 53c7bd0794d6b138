"""`grader similarity`'s work: the class read as a run reads it (intake, the roster),
every pair compared as text (grader/run/similarity.py), OUT/similarity.html written, and
the class report written again to link it. Nothing here prints; `Compared` says what
was done, for the CLI to show.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.intake import submissions as intake
from grader.run import similarity
from grader.intake import roster as rosters
from grader.config import Course
from grader.pages.feedback import templates
from grader.run.grading import rewrite_report
from grader.pages.report import render_similarity
from grader.store import Store, write_atomic


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
    roster = rosters.load(course, lesson_key)
    store = Store(out)
    taken = intake.collect(submissions, lesson.exercise, cache=store.intake_path,
                           roster=roster.students, aliases=roster.aliases, due=lesson.due)
    names = {**taken.names, **{sid: s.name for sid, s in roster.students.items() if s.name}}
    # a group's one submission is one side, never a pair of its own members
    label = {sid: f"{sid} ({names[sid]})" if names.get(sid) else sid for sid, _, _ in taken.found}
    for members in taken.together:
        joined = " + ".join(label[m] for m in members)
        label.update(dict.fromkeys(members, joined))
    texts: dict[str, str] = {}
    unread: list[tuple[str, str]] = []
    for sid, path, _ in taken.found:
        try:
            if path is not None and label[sid] not in texts:
                texts[label[sid]] = similarity.read_text(path)
        except OSError as exc:
            unread.append((sid, str(exc.strerror)))
    stub = similarity.read_text(course.path(lesson.stub))
    pairs = similarity.compare(texts, stub, threshold)
    pages = templates()
    write_atomic(store.similarity_path, render_similarity(pairs, len(texts), threshold,
                                                          course, lesson_key, language, pages))
    return Compared(pairs, len(texts), unread,
                    rewrite_report(course, lesson_key, out, language, pages))
