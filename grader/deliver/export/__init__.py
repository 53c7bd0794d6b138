"""Scores from one `grader run` into the formats LMSs and graders import.

`export` writes each requested format from scores.json (the one source of truth, so
every exported score equals it), read once as typed records (`record.ClassScores`), and
a roster report when graded students and the roster disagree. Each format is one
`Exporter` (grader/deliver/export/exporter.py) with one signature: `export(scores, options)`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from grader.deliver.export.exporter import Exported, Exporter, ExportOptions

if TYPE_CHECKING:
    from grader.config import Course
    from grader.record import ClassScores

FORMATS = ("gradescope", "canvas", "lti", "moodle", "nbgrader")
ROSTER_REPORT = "roster_report.txt"  # in the export folder: who got no row, and why

__all__ = ["FORMATS", "Exported", "ExportOptions", "Exporter", "export", "export_all",
           "exporters", "late_notes"]

# What each LMS does with the late rule, by who applies it (course.yml's late.applied_by),
# as the vendors' code does it: the TA reads these after `grader export` / `upload`.
LATE_NOTES = {
    ("grader", "canvas"): "canvas.csv's scores already carry the late credit (course.yml's "
    "late.applied_by: grader): the assignment's Canvas late policy must be off, or Canvas "
    "applies it a second time to each submission Canvas holds as late",
    ("grader", "lti"): "the LTI scores already carry the late credit and make no new "
    "submission (new_submission: false), so Canvas dates none and applies no second "
    "penalty",
    ("lms", "canvas"): "canvas.csv's scores carry no late credit (course.yml's "
    "late.applied_by: lms): import them into the assignment the students handed in to; "
    "Canvas applies its late policy from the hand-in times it recorded",
    ("lms", "lti"): "the LTI scores carry no late credit and each student's hand-in time "
    "(submission.submittedAt): Canvas applies the assignment's late policy from it, once "
    "(give the assignment the lesson's due date in Canvas). Moodle's score service reads "
    "no hand-in time and applies no penalty; a student whose hand-in time is unknown "
    "gets no new submission, so no LMS applies one to them",
    ("lms", "moodle"): "moodle.csv's grades carry no late credit (course.yml's "
    "late.applied_by: lms), and Moodle applies none to them: a gradebook import "
    "overrides the grade, and Moodle's grade penalties skip overridden grades. For "
    "Moodle, use late.applied_by: grader",
}


def late_notes(course: Course, lesson_key: str, formats: list[str]) -> list[str]:
    """What the LMS will do with the late rule for each format written (none without a
    rule, or with `applied_by: none`)."""
    late = course.lesson(lesson_key).late
    if late is None:
        return []
    return [LATE_NOTES[(late.applied_by, f)] for f in dict.fromkeys(formats)
            if (late.applied_by, f) in LATE_NOTES]


def export(course: Course, lesson_key: str, scores: ClassScores, out_dir: Path,
           formats: list[str]) -> list[Path]:
    """Write the formats into out_dir (OUT/export: the pages scores.json names are
    OUT's); returns the files written."""
    return export_all(course, lesson_key, scores, out_dir, formats)[0]


def exporters() -> dict[str, Exporter]:
    """Every format's exporter, by its name in `--to` (imported here: nbgrader is slow)."""
    from grader.deliver.export.canvas import Canvas
    from grader.deliver.export.gradescope import Gradescope
    from grader.deliver.export.lti import Lti
    from grader.deliver.export.moodle import Moodle
    from grader.deliver.export.nbgrader_db import Nbgrader

    return {e.to: e for e in (Gradescope(), Canvas(), Lti(), Moodle(), Nbgrader())}


def export_all(course: Course, lesson_key: str, scores: ClassScores, out_dir: Path,
               formats: list[str], language: str = "") -> tuple[list[Path], list[str]]:
    """`export`, and the graded students a format could not write a row for
    (`format: student: why`), which `grader export` reports and fails on."""
    from grader.intake import roster
    from grader.pages.feedback import templates

    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown export format(s) {unknown}; known: {', '.join(FORMATS)}")
    if scores.lesson != lesson_key:
        raise ValueError(f"these scores are for lesson {scores.lesson!r}, "
                         f"not {lesson_key!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    found = roster.match(roster.load(course, lesson_key),
                         [s.student_id for s in scores.students])
    options = ExportOptions(course, lesson_key, out_dir, found, templates(),
                            language or course.language)
    by_name = exporters()
    written: list[Path] = []
    unwritten: list[str] = []
    for fmt in dict.fromkeys(formats):
        done = by_name[fmt].export(scores, options)
        written += done.written
        unwritten += done.left_out
    report = out_dir / ROSTER_REPORT
    report.unlink(missing_ok=True)  # an old run's mismatches must not outlive their fix
    if found.unrostered or found.absent or found.skipped or unwritten:
        report.write_text(found.report(unwritten) + "\n", encoding="utf-8")
        written.insert(0, report)
    return written, unwritten
