"""A student's result as one line of text, for the LMSs that carry a comment beside the
score (LTI AGS's `comment`, Moodle's feedback column): status, then points per part in
the course's order, as the page lists them (scores.json keeps its keys sorted)."""
from __future__ import annotations

from grader.config import Course
from grader.pages.feedback import STRINGS, points
from grader.record import GradeRecord
from grader.text.strings import in_language


def part_order(course: Course, lesson_key: str, student: GradeRecord) -> list[str]:
    """The lesson's parts as course.yml lists them, then any the record adds."""
    known = list(course.lesson(lesson_key).parts)
    return known + [p for p in student.parts if p not in known]


def text(course: Course, lesson_key: str, student: GradeRecord, language: str = "en") -> str:
    """`Graded. ffn 2/2; router 1.09/2; ...` (`已评分。ffn 2/2；router 1.09/2；…`): what a
    student reads in the gradebook, in `language`, points rounded as on the page (the
    score itself stays exact)."""
    zh = language == "zh"
    parts = ("；" if zh else "; ").join(f"{name} {points(student.parts[name].score)}/"
                                       f"{points(student.parts[name].max_score)}"
                                       for name in part_order(course, lesson_key, student)
                                       if name in student.parts)
    said = STRINGS[language].get(f"status_{student.status}")
    lead = (in_language(student.problem, language) or said
            or student.status.replace("_", " ")).rstrip(".。")
    lead = lead[:1].upper() + lead[1:]
    stop = "。" if zh else ". "
    return f"{lead}{stop}{parts}" if parts else f"{lead}{stop.strip()}"
