"""Canvas gradebook import CSV: one assignment column and a Points Possible row.

The column is `Title (assignment_id)`, with the id from course.yml when it has one;
without it Canvas creates a new assignment on import, which the caller is told about.
Canvas matches rows by ID, then SIS User ID, SIS Login ID, then name, so every id the
roster knows is written; an unrostered all-digit id (a Canvas bulk download's user id)
goes into ID. A missing submission is blank or 0, as course.yml's `missing` says.
"""
from __future__ import annotations

from grader.config import Course
from grader.deliver.export.cells import score_cell, write_rows
from grader.deliver.export.exporter import Exported, Exporter, ExportOptions
from grader.record import ClassScores

HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def column(course: Course, lesson_key: str) -> str:
    lesson = course.lesson(lesson_key)
    title = f"Lesson {lesson_key} {lesson.title}"
    assignment_id = lesson.canvas_assignment_id
    return f"{title} ({assignment_id})" if assignment_id else title


class Canvas(Exporter):
    to = "canvas"

    def export(self, scores: ClassScores, options: ExportOptions) -> Exported:
        course, people = options.course, options.roster.entries
        path = options.out_dir / "canvas.csv"
        rows: list[list[object]] = [[*HEADER, column(course, options.lesson_key)],
                ["    Points Possible", "", "", "", "", scores.max_score]]
        for s in scores.students:
            who = people[s.student_id]
            rows.append([who.name or s.student_id, who.lms_id, who.sis_user_id,
                         who.sis_login_id, who.section, score_cell(s, course.missing)])
        with path.open("w", newline="", encoding="utf-8") as f:
            write_rows(f, rows)
        return Exported([path])
