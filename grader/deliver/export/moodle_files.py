"""Moodle's feedback files zip: each student's page, for the assignment to hand out; and
the TA's grading worksheet filled in (`moodle_worksheet.csv`), for the assignment's
"Upload grading worksheet" (assignfeedback_offline), which finds its columns by their
headers in the TA's language (importgradeslib.php: `Identifier`, `Grade`, `Last
modified (grade)`, each feedback plugin's own): every header, row and cell of the
worksheet is kept, and only each graded student's Grade and Feedback comments are
filled in, so Moodle maps the file without the TA choosing columns.

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

import csv
import io
import re
import zipfile
from pathlib import Path

from grader.config import ConfigError, Student
from grader.deliver.export import one_line
from grader.deliver.export.cells import cell, score_cell
from grader.deliver.export.exporter import Exported, ExportOptions
from grader.intake.moodle_words import IDENTIFIERS, canonical
from grader.intake.roster import identifier_kind, participant_rows, worksheet_header
from grader.record import MISSING, ClassScores
from grader.store import Store, safe_name

ZIP_NAME = "moodle_feedback_files.zip"
FILLED = "moodle_worksheet.csv"
# the worksheet column that holds each `moodle_identifier`
COLUMN = IDENTIFIERS
_PARTICIPANT = re.compile(r"(\d+)\s*$")  # a worksheet's "Participant 1234567"
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


def worksheet_column(name: str, worksheet: Path | None) -> str:
    """The worksheet's own header for column `name` (Moodle's English name), or ""."""
    if worksheet is None or not worksheet.exists():
        return ""
    return next((h for h in worksheet_header(worksheet) if canonical(h) == name), "")


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


def filled(scores: ClassScores, options: ExportOptions, worksheet: Path) -> Exported:
    """The worksheet with each graded student's Grade (the final score, as moodle.csv's)
    and Feedback comments (the one-line comment) filled in; everything else as the TA's
    Moodle wrote it. A student the worksheet lacks is named by `write` (the same
    check); a worksheet without a Grade column is refused."""
    course, lesson_key, found = options.course, options.lesson_key, options.roster
    raw = worksheet.read_bytes()
    bom = raw.startswith(b"\xef\xbb\xbf")
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"))))
    header = [h.strip() for h in rows[0]] if rows else []
    at = {canonical(h): i for i, h in enumerate(header)}
    if "Grade" not in at or "Identifier" not in at:
        raise ConfigError(f"{worksheet}: the Moodle grading worksheet has no "
                          f"{'Identifier' if 'Grade' in at else 'Grade'!r} column (it has: "
                          f"{', '.join(header) or 'none'}): download it again from the "
                          "assignment with the offline grading worksheet feedback on")
    kind = identifier_kind(course, worksheet)
    people = participants(worksheet, kind)
    by_number: dict[str, tuple[object, str]] = {}
    for s in scores.students:
        sid = s.student_id
        ident = identifier(kind, sid, found.entries[sid]) if found.known(sid) else ""
        if ident in people:
            by_number[people[ident][0]] = (score_cell(s, course.missing),
                                           one_line.text(course, lesson_key, s,
                                                         options.language))
    for row in rows[1:]:
        cell_ = row[at["Identifier"]] if len(row) > at["Identifier"] else ""
        number = m[1] if (m := _PARTICIPANT.search(cell_)) else ""
        if number in by_number:
            row.extend([""] * (len(header) - len(row)))
            row[at["Grade"]] = str(cell(by_number[number][0]))
            if "Feedback comments" in at:
                row[at["Feedback comments"]] = str(cell(by_number[number][1]))
    path = options.out_dir / FILLED
    with path.open("w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        csv.writer(f).writerows(rows)  # Moodle's own cells as it wrote them; ours neutralised
    return Exported([path])
