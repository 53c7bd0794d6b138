"""Scores into an nbgrader gradebook, for courses whose TAs already work in nbgrader.

Lesson -> assignment (named `lesson_<key>`, not a release folder name, since nbgrader's
own generate_assignment deletes notebooks without an .ipynb source), exercise file ->
notebook, test -> grade cell. A missing submission gets no submission when course.yml's
`missing` is blank (nbgrader's own export then shows it as it shows any student who
handed nothing in), or 0 in every cell when it is zero. Only auto_score is written, so a TA's manual_score survives
a re-export and overrides it in `nbgrader export`. The cells carry the scores before late
credit; each notebook's late_submission_penalty is the difference, so nbgrader's total
is the final score (grader/judge/final.py). nbgrader is an optional extra and
slow to import, so it is imported here, inside the function.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from grader.deliver.export.exporter import Exported, Exporter, ExportOptions
from grader.record import MISSING, ClassScores, GradeRecord, TestRecord
from grader.store import safe_name


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
            for qid, mark in s.written.items():
                if qid in lesson.written:
                    _written_grade(gb, Grade, MissingEntry, f"written_{qid}", notebook,
                                   assignment, sid, mark)
            penalty, overridden = _late_penalty(s)
            gb.find_submission_notebook(notebook, assignment, sid) \
                .late_submission_penalty = penalty
            left_out += [f"nbgrader: {s.student_id}: part {p} has an override (`grader "
                         "override`), which its test cells cannot carry: enter it in "
                         "formgrader as a manual score" for p in overridden]
            gb.db.commit()
    return Exported([db], left_out)


def _late_penalty(s: GradeRecord) -> tuple[float, list[str]]:
    """The notebook's late_submission_penalty, so that nbgrader's own total (its cells
    minus the penalty) is the final score, not a second penalty: the score earned
    (parts after overrides, written marks) less the final score. Also the parts whose
    score is not their tests' (an override), which the cells do not carry."""
    from grader import points

    earned = points.units(points.total(s.parts), "parts") + sum(
        points.units(float(q.get("score", 0.0)), "a written mark") for q in s.written.values())
    overridden = [name for name, p in s.parts.items()
                  if points.units(p.score, "a part") != sum(
                      points.units(t.score, "a test") for t in graded(s) if t.part == name)]
    return points.as_points(max(earned - points.units(s.score, "the score"), 0)), overridden


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
