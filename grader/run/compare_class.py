"""`grader similarity`'s work: the class read as a run reads it (intake, the roster),
every pair compared as text (grader/run/similarity.py), OUT/similarity.html written, and
the class report written again to link it. Nothing here prints; `Compared` says what
was done, for the CLI to show.

Not judge/compare.py, which compares one student's tensors with the reference's
(the checks): this one compares the class's files with each other."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.intake import submissions as intake
from grader.run import similarity
from grader.intake import roster as rosters
from grader.config import Course
from grader.pages.feedback import templates
from grader.run.grading import rewrite_report
from grader.store import Store, write_atomic


@dataclass
class Compared:
    """What compare() found, how many files were compared, those that could not be read
    (student id, why), those compared only up to the budget's file_kb (side, its size
    in KB), how many pairs the page shows, and whether the class report now links it."""

    found: similarity.Found
    compared: int
    unread: list[tuple[str, str]] = field(default_factory=list)
    cut: list[tuple[str, int]] = field(default_factory=list)
    shown: int = 0
    report: bool = False


def compare_class(course: Course, lesson_key: str, submissions: Path, out: Path,
                  threshold: float, language: str, trust_worksheet: bool = False) -> Compared:
    """Compare every pair of the class in `submissions`; write OUT/similarity.html. A
    Moodle download whose names the grading worksheet contradicts is refused (ValueError),
    as `grader run` refuses it: a pair would name the wrong students."""
    lesson = course.lesson(lesson_key)
    roster = rosters.load(course, lesson_key)
    store = Store(out)
    taken = intake.collect(submissions, lesson.exercise, cache=store.intake_path,
                           roster=roster.students, aliases=roster.aliases,
                               due=course.due(lesson_key), submitted=roster.submitted)
    clashes = rosters.clashes(roster, taken.numbers, taken.names)
    if clashes and not trust_worksheet:
        raise ValueError(rosters.clash_message(clashes, roster.worksheet))
    names = {**taken.names, **{sid: s.name for sid, s in roster.students.items() if s.name}}
    # a group's one submission is one side, never a pair of its own members
    label = {sid: f"{sid} ({names[sid]})" if names.get(sid) else sid for sid, _, _ in taken.found}
    for members in taken.together:
        joined = " + ".join(label[m] for m in members)
        label.update(dict.fromkeys(members, joined))
    budget = course.similarity.budget()
    cap = budget.file_kb * 1024
    texts: dict[str, str] = {}
    unread: list[tuple[str, str]] = []
    cut: list[tuple[str, int]] = []
    for sid, path, _ in taken.found:
        try:
            if path is not None and label[sid] not in texts:
                texts[label[sid]], size = similarity.read_text(path, cap)
                if size > cap:
                    cut.append((label[sid], -(-size // 1024)))  # KB, rounded up
        except OSError as exc:
            unread.append((sid, str(exc.strerror)))
    stub, _ = similarity.read_text(course.path(lesson.stub))
    found = similarity.compare(texts, stub, threshold, budget)
    pages = templates()
    page, shown = similarity.render_similarity(found, len(texts), threshold, course, lesson_key,
                                    language, pages, budget, cut)
    write_atomic(store.similarity_path, page)
    return Compared(found, len(texts), unread, cut, shown,
                    rewrite_report(course, lesson_key, out, language, pages))
