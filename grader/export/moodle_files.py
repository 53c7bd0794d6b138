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

import csv
import re
import zipfile
from pathlib import Path

from grader.config import ConfigError, Course
from grader.export.exporter import Exported, ExportOptions
from grader.export.moodle import identifier
from grader.export.moodle_words import IDENTIFIERS, canonical
from grader.record import MISSING, ClassScores
from grader.store import Store, safe_name

ZIP_NAME = "moodle_feedback_files.zip"
# the worksheet column that holds each `moodle_identifier`
COLUMN = IDENTIFIERS
_NUMBER = re.compile(r"(\d+)\s*$")
_NAME_UNSAFE = re.compile(r"[_/\\:*?\"<>|\x00-\x1f\x7f]")


def worksheet_header(path: Path) -> list[str]:
    """A grading worksheet's headers as Moodle wrote them (in its language)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read the Moodle grading worksheet {path}: "
                          f"{exc.strerror}") from None
    return [h.strip() for h in next(csv.reader(text.splitlines()[:1]), [])]


def identifier_kind(course: Course, worksheet: Path | None) -> str:
    """The `moodle_identifier` students are matched on: course.yml's when it names one,
    else `username` when the worksheet has that column, else the worksheet's one
    identifier column (Moodle's default worksheet has only Email address); a worksheet
    with none, or several but no Username, is refused with the line to add."""
    if "moodle_identifier" in course.model_fields_set or worksheet is None:
        return course.moodle_identifier
    header = worksheet_header(worksheet)
    have = [kind for kind, column in IDENTIFIERS.items()
            if column in {canonical(h) for h in header}]
    if course.moodle_identifier in have:
        return course.moodle_identifier
    if len(have) == 1:
        return have[0]
    choices = " or ".join(f"`moodle_identifier: {k}`" for k in have or IDENTIFIERS)
    raise ConfigError(f"{worksheet}: the Moodle grading worksheet has "
                      f"{'no' if not have else 'several'} identifier column(s) "
                      f"({', '.join(header) or 'no columns'}): add {choices} to course.yml "
                      "to say which one names the students")


def identifier_header(kind: str, worksheet: Path | None) -> str:
    """moodle.csv's identifier header: the worksheet's own header for that column when
    it has one (Moodle's import is then offered the words of its own language), else
    `kind`."""
    if worksheet is not None and worksheet.exists():
        for h in worksheet_header(worksheet):
            if canonical(h) == IDENTIFIERS[kind]:
                return h
    return kind


def participant_rows(path: Path, column: str) -> list[dict[str, str]]:
    """A grading worksheet's rows, stripped, each with its participant `number` (from
    `Identifier`, "Participant 1234567"); rows without one are not participants.
    Headers are read in English or Chinese (moodle_words) and keyed by Moodle's English.
    `column` is the one the caller matches students on: the worksheet must have it."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read the Moodle grading worksheet {path}: "
                          f"{exc.strerror}") from None
    rows = csv.DictReader(text.splitlines())
    header = [h.strip() for h in rows.fieldnames or []]
    names = {canonical(h) for h in header}
    for needed in ("Identifier", column):
        if needed not in names:
            fix = "" if needed == "Identifier" else (
                "; set `moodle_identifier` in course.yml to a column it has ("
                + ", ".join(f"{k}: {c!r}" for k, c in IDENTIFIERS.items()) + ")")
            raise ConfigError(f"{path}: the Moodle grading worksheet has no {needed!r} "
                              f"column (it has: {', '.join(header) or 'none'}); "
                              f"moodle_identifier matches students on {column!r}{fix}")
    found = []
    for row in rows:
        # a row longer than the header puts the rest under None, as a list: not a column
        row = {canonical(k): (v or "").strip() for k, v in row.items() if isinstance(k, str)
               and isinstance(v, str | None)}
        number = _NUMBER.search(row.get("Identifier", ""))
        if number:
            found.append({**row, "number": number.group(1)})
    return found


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
