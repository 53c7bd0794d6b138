"""Scores into an nbgrader gradebook, for courses whose TAs already work in nbgrader.

Lesson -> assignment (named `lesson_<key>`, not a release folder name, since nbgrader's
own generate_assignment deletes notebooks without an .ipynb source), exercise file ->
notebook, test -> grade cell. A missing submission gets no submission when course.yml's
`missing` is blank (nbgrader's own export then shows it as it shows any student who
handed nothing in), or 0 in every cell when it is zero. The tests' scores are written as
auto_score, so a TA's manual_score survives a re-export and overrides it in `nbgrader
export`. A part changed by `grader override` is a human's score, so it is written as
nbgrader's manual_score on that part's cells (filled in test order, each up to its
points), and the cells' auto_score keeps the automatic one; what the grader wrote is
kept beside the gradebook (`<db>.overrides.json`), so that after a revoke it clears the
manual scores it wrote, and keeps one a TA has since changed in formgrader. The cells
carry the scores before late credit; each notebook's late_submission_penalty is the
difference, so nbgrader's total is the final score (grader/judge/final.py). nbgrader is
an optional extra and slow to import, so it is imported here, inside the function.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from grader.deliver.export.exporter import Exported, Exporter, ExportOptions
from grader.record import MISSING, ClassScores, GradeRecord, TestRecord
from grader.store import safe_name, write_atomic


def assignment_name(lesson_key: str) -> str:
    return f"lesson_{lesson_key}"


def cell_name(test: TestRecord) -> str:
    return f"{test.part}:{test.name}"


def student_id(raw: str) -> str:
    """nbgrader names folders after student ids (submitted/, autograded/, feedback/):
    an id that isn't a safe file name is stored as the grader's safe name for it."""
    return safe_name(str(raw))


def graded(student: GradeRecord) -> list[TestRecord]:
    """The tests that carry points; practice tests (0 of 0) get no grade cell."""
    return [t for t in student.tests if not t.practice]


def _split_name(name: str) -> tuple[str, str]:
    """(first, last) from `Last, First` or `First Last`."""
    if "," in name:
        last, first = (s.strip() for s in name.split(",", 1))
        return first, last
    first, _, last = name.strip().rpartition(" ")
    return (first, last) if first else (last, "")


class Nbgrader(Exporter):
    to = "nbgrader"

    def export(self, scores: ClassScores, options: ExportOptions) -> Exported:
        """Into course.yml's `nbgrader_db`, or a gradebook.db in the export folder."""
        db = options.course.nbgrader_db
        path = options.course.path(db) if db else options.out_dir / "gradebook.db"
        return _write(scores, options, path)


def _write(scores: ClassScores, options: ExportOptions, db: Path) -> Exported:
    course, lesson_key, people = options.course, options.lesson_key, options.roster.entries
    left_out: list[str] = []
    if shutil.which("alembic") is None:  # a new database shells out to it; it sits beside us
        here = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])
    from nbgrader.api import Gradebook, Grade, MissingEntry

    lesson = course.lesson(lesson_key)
    assignment, notebook = assignment_name(lesson_key), Path(lesson.exercise).stem
    db.parent.mkdir(parents=True, exist_ok=True)
    ours_path = db.with_name(db.name + ".overrides.json")
    ours = _read_ours(ours_path)
    with Gradebook(f"sqlite:///{db.resolve()}", course_id=course.course) as gb:
        gb.update_or_create_assignment(assignment, duedate=lesson.due)
        gb.update_or_create_notebook(notebook, assignment)
        for t in graded(scores.students[0]) if scores.students else []:
            gb.update_or_create_grade_cell(cell_name(t), notebook, assignment,
                                           max_score=t.max_score, cell_type="code")
        for qid, q in lesson.written.items():  # the check questions: their own cells
            gb.update_or_create_grade_cell(f"written_{qid}", notebook, assignment,
                                           max_score=q.points, cell_type="markdown")
        for s in scores.students:
            who, sid = people[s.student_id], student_id(s.student_id)
            first, last = _split_name(who.name)
            gb.update_or_create_student(sid, first_name=first, last_name=last,
                                        email=who.email or None,
                                        lms_user_id=who.lms_id or None)
            if s.status == MISSING and course.missing == "blank":
                continue
            # nbgrader builds the submission's objects before adding them: an autoflush
            # in between warns (SQLAlchemy's SAWarning, "not in session") and adds nothing
            with gb.db.no_autoflush:
                gb.update_or_create_submission(assignment, sid)
            manual = part_manual_scores(s)
            mine = ours.setdefault(sid, {})
            for t in graded(s):
                try:
                    grade = gb.find_grade(cell_name(t), notebook, assignment, sid)
                except MissingEntry:  # a submission made before this test existed
                    nb = gb.find_submission_notebook(notebook, assignment, sid)
                    grade = Grade(cell=gb.find_grade_cell(cell_name(t), notebook, assignment),
                                  notebook=nb)
                    gb.db.add(grade)
                grade.auto_score = t.score
                grade.needs_manual_grade = False
                name = cell_name(t)
                if name in manual:
                    grade.manual_score = mine[name] = manual[name]
                elif name in mine:  # the grader's, from an override since revoked
                    if grade.manual_score == mine.pop(name):
                        grade.manual_score = None
                    else:
                        left_out.append(f"nbgrader: {s.student_id}: cell {name} keeps the "
                                        "manual score a TA gave it in formgrader after the "
                                        "grader's override was revoked")
            for qid, mark in s.written.items():
                if qid in lesson.written:
                    _written_grade(gb, Grade, MissingEntry, f"written_{qid}", notebook,
                                   assignment, sid, mark)
            gb.find_submission_notebook(notebook, assignment, sid) \
                .late_submission_penalty = _late_penalty(s)
            gb.db.commit()
    write_atomic(ours_path, json.dumps({k: v for k, v in ours.items() if v}, indent=1,
                                       sort_keys=True))
    return Exported([db], left_out)


def _read_ours(path: Path) -> dict[str, dict[str, float]]:
    """The manual scores the grader wrote at the last export, by student and cell."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): {str(c): float(x) for c, x in v.items()}
            for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def part_manual_scores(s: GradeRecord) -> dict[str, float]:
    """For each part whose score is not its tests' (a `grader override`), the manual score
    of each of its cells: the part's score filled into its tests in order, each up to
    its points (the last takes any rest), so the cells add up to the part's score."""
    from grader import points

    out: dict[str, float] = {}
    for name, part in s.parts.items():
        tests = [t for t in graded(s) if t.part == name]
        left = points.units(part.score, "a part")
        if not tests or left == sum(points.units(t.score, "a test") for t in tests):
            continue
        for i, t in enumerate(tests):
            most = points.units(t.max_score, "a test's points")
            got = left if i == len(tests) - 1 else min(left, most)
            out[cell_name(t)], left = points.as_points(got), left - got
    return out


def _late_penalty(s: GradeRecord) -> float:
    """The notebook's late_submission_penalty, so that nbgrader's own total (its cells
    minus the penalty) is the final score, not a second penalty: the score earned
    (parts after overrides, written marks) less the final score."""
    from grader import points

    earned = points.units(points.total(s.parts), "parts") + sum(
        points.units(float(q.get("score", 0.0)), "a written mark") for q in s.written.values())
    return points.as_points(max(earned - points.units(s.score, "the score"), 0))


def _written_grade(gb, grade_type, missing_entry, cell: str, notebook: str,
                   assignment: str, sid: str, q: dict) -> None:
    """A check question's grade: the grader's mark as auto_score (shapes, no answer), a
    TA's as manual_score; awaiting or stale, needs_manual_grade (nbgrader's own flag)."""
    try:
        grade = gb.find_grade(cell, notebook, assignment, sid)
    except missing_entry:
        grade = grade_type(cell=gb.find_grade_cell(cell, notebook, assignment),
                           notebook=gb.find_submission_notebook(notebook, assignment, sid))
        gb.db.add(grade)
    status = q.get("status")
    grade.auto_score = q.get("score", 0.0) if status in ("auto", "no_answer") else None
    grade.manual_score = q.get("score", 0.0) if status == "marked" else None
    grade.needs_manual_grade = status in ("awaiting", "stale")
