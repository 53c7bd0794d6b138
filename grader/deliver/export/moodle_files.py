"""Moodle's feedback files zip: each student's page, for the assignment to hand out.

Moodle's assignment (View all submissions → Upload multiple feedback files in a zip)
files each entry under the participant whose number it finds in the entry's name,
`<full name>_<participant number>_assignfeedback_file_<file name>`: the number is the
assignment's own (its grading worksheet's `Identifier`, "Participant 1234567"), not a
user id, so the worksheet course.yml names (`moodle_worksheet`) is where it comes from.
Its name must hold no `_` (Moodle splits the entry name on them), so underscores in it
become spaces, as Moodle's own download does. Students are found in the worksheet by
the same identifier as moodle.csv (`moodle_identifier`); one the worksheet lacks gets
no file and is named; one who handed nothing in gets none (Moodle's grade says so).
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

from grader.config import Student
from grader.deliver.export.exporter import Exported, ExportOptions
from grader.intake.moodle_words import IDENTIFIERS, canonical
from grader.intake.roster import identifier_kind, participant_rows, worksheet_header
from grader.record import MISSING, ClassScores
from grader.store import Store, safe_name

ZIP_NAME = "moodle_feedback_files.zip"
# the worksheet column that holds each `moodle_identifier`
COLUMN = IDENTIFIERS
_NAME_UNSAFE = re.compile(r"[_/\\:*?\"<>|\x00-\x1f\x7f]")


def identifier(kind: str, student_id: str, who: Student) -> str:
    """The user field Moodle matches on; a username is the roster's SIS login, else the
    grader's student id (a login name by convention)."""
    if kind == "email":
        return who.email
    if kind == "idnumber":
        return who.sis_user_id
    return who.sis_login_id or student_id


def identifier_header(kind: str, worksheet: Path | None) -> str:
    """moodle.csv's identifier header: the worksheet's own header for that column when
    it has one (Moodle's import is then offered the words of its own language), else
    `kind`."""
    if worksheet is not None and worksheet.exists():
        for h in worksheet_header(worksheet):
            if canonical(h) == IDENTIFIERS[kind]:
                return h
    return kind


def participants(path: Path, kind: str) -> dict[str, tuple[str, str]]:
    """identifier -> (participant number, full name), from a grading worksheet."""
    return {row[COLUMN[kind]]: (row["number"], row.get("Full name", ""))
            for row in participant_rows(path, COLUMN[kind]) if row.get(COLUMN[kind])}


def entry_name(full_name: str, number: str, file_name: str) -> str:
    """The zip entry Moodle files under participant `number`."""
    name = " ".join(_NAME_UNSAFE.sub(" ", full_name).split()) or "Participant"
    return f"{name}_{number}_assignfeedback_file_{file_name}"


def write(scores: ClassScores, options: ExportOptions, worksheet: Path) -> Exported:
    """The zip beside moodle.csv (the Moodle export's second file), and `moodle files:
    student: why` for each left out. The pages are the graded folder's (out_dir is
    OUT/export)."""
    course, lesson_key, found, out_dir = (options.course, options.lesson_key,
                                          options.roster, options.out_dir)
    kind = identifier_kind(course, worksheet)
    people = participants(worksheet, kind)
    file_name = f"feedback-lesson-{safe_name(lesson_key)}.html"
    left_out: list[str] = []
    store = Store(out_dir.parent)
    path = out_dir / ZIP_NAME
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for s in scores.students:
            sid = s.student_id
            ident = identifier(kind, sid, found.entries[sid]) if found.known(sid) else ""
            page = store.feedback_path(sid)  # scores.json's "page", from the id itself
            if s.status == MISSING:
                continue
            if ident not in people:
                left_out.append(f"moodle files: {sid}: not in the grading worksheet "
                                f"({COLUMN[kind]} {ident or 'unknown'})")
            elif not page.is_file():
                left_out.append(f"moodle files: {sid}: no page (grade again: "
                                "`grader run`)")
            else:
                number, full_name = people[ident]
                z.write(page, entry_name(full_name, number, file_name))
    return Exported([path], left_out)
