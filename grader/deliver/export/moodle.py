"""Moodle grade import CSV: one identifier column, the grade, and its feedback; and,
with the lesson's `moodle_worksheet`, that worksheet filled in (moodle_files.py).

Moodle maps the identifier column to one user field on import and aborts the whole
import at the first value it cannot match, so the identifier is chosen in course.yml
(`moodle_identifier`: username, email or idnumber) and used for every row: a student
without it, or one the roster lacks, is left out and named instead of written. The
feedback column is always written beside its grade column: Moodle wipes the grades
when feedback is imported alone. With a worksheet, the three headers are the
worksheet's own (in the language the TA's Moodle wrote it): Moodle's gradebook import
(grade/import/csv) always asks the TA to map each column, and offers the headers as
they are. The filled-in worksheet is the file Moodle maps by itself.
"""
from __future__ import annotations

from grader.config import Course
from grader.deliver.export import one_line
from grader.deliver.export.cells import score_cell, write_rows
from grader.deliver.export.exporter import Exported, Exporter, ExportOptions
from grader.deliver.export.moodle_files import identifier
from grader.record import ClassScores

WHY = {"username": "no username", "email": "no email in the roster",
       "idnumber": "no sis_user_id (Moodle's idnumber) in the roster"}


def item(course: Course, lesson_key: str) -> str:
    return course.lesson(lesson_key).moodle_item or \
        f"Lesson {lesson_key} {course.lesson(lesson_key).title}"


class Moodle(Exporter):
    to = "moodle"

    def export(self, scores: ClassScores, options: ExportOptions) -> Exported:
        """moodle.csv, and with the lesson's `moodle_worksheet` the feedback files zip
        (grader/deliver/export/moodle_files.py); `moodle: student: why` for each left out."""
        from grader.deliver.export import moodle_files

        done = _csv(scores, options)
        worksheet = options.course.lesson(options.lesson_key).moodle_worksheet
        if worksheet is not None:
            for more in (moodle_files.write(scores, options, options.course.path(worksheet)),
                         moodle_files.filled(scores, options, options.course.path(worksheet))):
                done = Exported(done.written + more.written, done.left_out + more.left_out)
        return done


def _csv(scores: ClassScores, options: ExportOptions) -> Exported:
    from grader.deliver.export import moodle_files

    course, lesson_key, found = options.course, options.lesson_key, options.roster
    worksheet = course.lesson(lesson_key).moodle_worksheet
    worksheet = course.path(worksheet) if worksheet is not None else None
    kind, name = moodle_files.identifier_kind(course, worksheet), item(course, lesson_key)
    rows: list[list[object]] = [[moodle_files.identifier_header(kind, worksheet),
                                 moodle_files.worksheet_column("Grade", worksheet) or name,
                                 moodle_files.worksheet_column("Feedback comments", worksheet)
                                 or f"Feedback: {name}"]]
    left_out: list[str] = []
    for s in scores.students:
        sid = s.student_id
        if sid in scores.participant_numbers:
            left_out.append(f"moodle: {sid}: a participant number of the Moodle download, "
                            "not a user (no grading worksheet named them when graded)")
            continue
        ident = identifier(kind, sid, found.entries[sid]) if found.known(sid) else ""
        if not ident:
            left_out.append(f"moodle: {sid}: "
                            f"{WHY[kind] if found.known(sid) else 'not in the roster'}")
            continue
        rows.append([ident, score_cell(s, course.missing), one_line.text(course, lesson_key, s,
                                                                       options.language)])
    path = options.out_dir / "moodle.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        write_rows(f, rows)
    return Exported([path], left_out)
