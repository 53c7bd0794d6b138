"""Moodle grade import CSV: one identifier column, the grade, and its feedback.

Moodle maps the identifier on import to a user field; email is the most reliable, so
it is used when the roster has everyone's, else the student id as username. The
feedback column is always written beside its grade column: Moodle wipes the grades
when feedback is imported alone.
"""
from __future__ import annotations

from pathlib import Path

from grader.config import Course, Student
from grader.export.cells import write_rows
from grader.export.lti import comment


def item(course: Course, lesson_key: str) -> str:
    return course.lesson(lesson_key).moodle_item or \
        f"Lesson {lesson_key} {course.lesson(lesson_key).title}"


def write(course: Course, lesson_key: str, scores: dict, people: dict[str, Student],
          out_dir: Path) -> list[Path]:
    students = scores["students"]
    by_email = all(people[s["student_id"]].email for s in students)
    name = item(course, lesson_key)
    path = out_dir / "moodle.csv"
    rows: list[list[object]] = [["email" if by_email else "username", name,
                                 f"Feedback: {name}"]]
    for s in students:
        ident = people[s["student_id"]].email if by_email else s["student_id"]
        rows.append([ident, s["score"], comment(s)])
    with path.open("w", newline="", encoding="utf-8") as f:
        write_rows(f, rows)
    return [path]
