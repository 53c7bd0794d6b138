"""The roster: who each graded student id is in the LMS (names, LMS and SIS ids, section).

It comes from course.yml (`roster:` as a mapping) or from a CSV that course.yml names.
The CSV may be our own (`student_id,name,email,lms_id,sis_user_id,sis_login_id,section`)
or a Canvas gradebook export, whose `SIS Login ID` then serves as the student id (its
Canvas `ID` for a row without one, as Canvas's Test Student). A lesson's Moodle grading
worksheet (`moodle_worksheet`) adds its participants, so that a Moodle download, which
names students by participant number, needs no roster written by hand.
Exports never drop a student the roster lacks: they write what they know and the
mismatch is reported, so a TA sees it before the import does.
"""
from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from pathlib import Path

from grader.config import ConfigError, Course, Student
from grader.intake.moodle_words import IDENTIFIERS, canonical, worksheet_time

# header (lower case) -> Student field; "student_id" is the roster key
_COLUMNS = {
    "student_id": "student_id", "student id": "student_id", "id_grader": "student_id",
    "name": "name", "student": "name",
    "email": "email", "email address": "email",
    "lms_id": "lms_id", "id": "lms_id", "canvas id": "lms_id",
    "sis_user_id": "sis_user_id", "sis user id": "sis_user_id",
    "sis_login_id": "sis_login_id", "sis login id": "sis_login_id",
    "section": "section",
}


@dataclass
class Roster:
    """The students by id, and the CSV rows left out for having no id, which a TA is
    told of once, not refused for."""
    students: dict[str, Student] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # 'people.csv:4 "Nobody"'
    aliases: dict[str, str] = field(default_factory=dict)  # participant number -> id
    listed: dict[str, str] = field(default_factory=dict)  # participant number -> the
    #                                                       worksheet's Full name
    worksheet: str = ""  # the grading worksheet joined, as course.yml names it
    missing: str = ""  # a Moodle grading worksheet course.yml names, not found
    submitted: dict[str, datetime] = field(default_factory=dict)  # participant number ->
    #                              the worksheet's "Last modified (submission)", in `zone`
    unread_times: list[str] = field(default_factory=list)  # 'Participant 7: "soon"'

    def note(self) -> str:
        """What the TA should know of the roster (rows left out, a missing worksheet),
        or ""."""
        said = []
        if self.skipped:
            said.append(f"{len(self.skipped)} roster row(s) without a student id left out "
                        f"of the roster: {'; '.join(self.skipped)}")
        if self.missing:
            said.append(f"no Moodle grading worksheet at {self.missing}: students of a Moodle "
                        "download are known by their participant number")
        if self.unread_times:
            said.append(f"{len(self.unread_times)} date(s) of the grading worksheet's "
                        "\"Last modified (submission)\" are not Moodle's date format, so "
                        "nothing is said of those students' lateness: "
                        + "; ".join(self.unread_times))
        return "; ".join(said)


def load(course: Course, lesson_key: str | None = None) -> Roster:
    """The course's roster keyed by student id (empty when course.yml has none), with
    the participants of the lesson's Moodle grading worksheet, if it names one."""
    if course.roster is None:
        found = Roster()
    elif isinstance(course.roster, dict):
        found = Roster(dict(course.roster))
    else:
        found = read_csv(course.path(course.roster))
    worksheet = course.lesson(lesson_key).moodle_worksheet if lesson_key else None
    if worksheet is not None and lesson_key:
        path = course.path(worksheet)
        if path.exists():  # one that is there but unreadable is still an error
            add_worksheet(found, path, identifier_kind(course, path),
                          course.lms_zone(lesson_key))
            found.worksheet = str(worksheet)
        else:  # an LMS file: the run grades without it, and says so
            found.missing = str(worksheet)
    return found


# a Moodle grading worksheet's column -> Student field, for `moodle_identifier`
_WORKSHEET = {"email": ("Email address", "email"), "username": ("Username", "sis_login_id"),
              "idnumber": ("ID number", "sis_user_id")}


def add_worksheet(roster: Roster, path: Path, kind: str, zone: tzinfo = timezone.utc) -> None:
    """Join a Moodle grading worksheet to the roster: each row's `Identifier`
    ("Participant 2750101") becomes an alias of the student its `moodle_identifier`
    column names, a roster student if one has that value, else a student of that id
    (a row without it is known by its participant number). Names and emails the
    roster lacks are taken from the worksheet, and each submission's time (Moodle's
    date, without an offset, read in `zone`)."""
    column, attr = _WORKSHEET[kind]
    known = {getattr(s, attr): sid for sid, s in roster.students.items() if getattr(s, attr)}
    for row in participant_rows(path, column):
        value = row.get(column, "")
        sid = known.get(value) or value or row["number"]
        have = roster.students.get(sid, Student())
        extra = {"name": row.get("Full name", ""), "email": row.get("Email address", ""),
                 "sis_login_id": row.get("Username", ""), "sis_user_id": row.get("ID number", "")}
        roster.students[sid] = have.model_copy(update={
            k: v for k, v in extra.items() if v and not getattr(have, k)})
        roster.aliases[row["number"]] = sid
        roster.listed[row["number"]] = row.get("Full name", "")
        try:
            when = worksheet_time(row.get("Last modified (submission)", ""), zone)
        except ValueError:
            roster.unread_times.append(f"{row.get('Identifier')}: "
                                       f"{row['Last modified (submission)']!r}")
            continue
        if when is not None:
            roster.submitted[row["number"]] = when


def read_csv(path: Path) -> Roster:
    """Our CSV or a Canvas gradebook export as it is: its `Points Possible` row (and
    any row naming nobody) is not a student; a student without an id is left out."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read the roster {path}: {exc.strerror}") from None
    rows = csv.DictReader(text.splitlines())
    fields = {h: _COLUMNS[h.strip().lower()] for h in rows.fieldnames or []
              if h.strip().lower() in _COLUMNS}
    if "student_id" not in fields.values() and "sis_login_id" not in fields.values():
        raise ConfigError(f"{path}: the roster needs a student_id (or SIS Login ID) column")
    found = Roster()
    lines: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        first = (next(iter(row.values()), "") or "").strip()
        values = {f: (row.get(h) or "").strip() for h, f in fields.items()}
        sid = (values.pop("student_id", "") or values.get("sis_login_id", "")
               or values.get("lms_id", ""))
        if first.lower() == "points possible":
            continue  # a Canvas export's maxima row
        if not sid:
            who = values.get("name") or first
            if who:
                found.skipped.append(f'{path.name}:{line} "{who}"')
            continue
        if sid in lines:
            raise ConfigError(f"{path}:{line}: student id {sid!r} appears twice (first on "
                              f"line {lines[sid]}); each student may have one row")
        lines[sid] = line
        found.students[sid] = Student(**values)
    return found


@dataclass(frozen=True)
class Clash:
    """A participant whom the download and the grading worksheet name differently: the
    number alone would credit one person's work to another."""
    number: str
    student_id: str
    download: str   # the name Moodle wrote into the download's folder
    worksheet: str  # the worksheet's Full name for that number


def _letters(name: str) -> str:
    """A name as Moodle's file names and its worksheet both keep it: NFKC, case folded,
    letters and digits only (Moodle writes `_` as a space and drops what a file name
    cannot hold)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", name).casefold()
                   if ch.isalnum())


def same_person(download: str, worksheet: str, number: str) -> bool:
    """Whether a download's folder name and the worksheet's Full name for participant
    `number` can be one person: equal but for spaces, case, punctuation and word order,
    or, under blind marking, the worksheet's "Participant <number>" beside the
    download's "Participant"."""
    if _letters(download) == _letters(worksheet):
        return True
    if sorted(map(_letters, download.split())) == sorted(map(_letters, worksheet.split())):
        return True
    unnumbered = re.sub(rf"\b{re.escape(number)}\b", "", worksheet)
    return unnumbered != worksheet and _letters(download) == _letters(unnumbered)


def clashes(roster: Roster, numbers: dict[str, str], names: dict[str, str]) -> list[Clash]:
    """The students of a Moodle download (`numbers`: student id -> participant number;
    `names`: student id -> the download's name for them) whom the grading worksheet
    names otherwise. A row or a folder without a name is not compared."""
    found = []
    for sid, number in sorted(numbers.items(), key=lambda item: item[1]):
        listed, download = roster.listed.get(number, ""), names.get(sid, "")
        if listed and download and not same_person(download, listed, number):
            found.append(Clash(number, sid, download, listed))
    return found


def clash_message(found: list[Clash], worksheet: str) -> str:
    """Why a run stops before grading when the download and the worksheet disagree, each
    disagreement listed, and the two ways on."""
    lines = [f"The grading worksheet {worksheet} names {len(found)} participant(s) "
             "otherwise than this Moodle download does, so their work would be credited "
             "to the wrong students. Nothing was graded."]
    lines += [f"  participant {c.number}: the download names {c.download!r}, the "
              f"worksheet {c.worksheet!r} (student {c.student_id})" for c in found]
    lines.append("A worksheet of another assignment, or an old one, does this: download "
                 "this assignment's grading worksheet again (View all submissions → Grading "
                 f"action → Download grading worksheet) over {worksheet}. If they are the "
                 "same people written differently, run again with --trust-worksheet.")
    return "\n".join(lines)


def clash_note(found: list[Clash], worksheet: str) -> str:
    """What a run graded with --trust-worksheet says of each disagreement."""
    return (f"graded as the grading worksheet {worksheet} says (--trust-worksheet), where "
            "the download names the participant otherwise: " + "; ".join(
                f"participant {c.number}, {c.download!r} in the download, graded as "
                f"{c.student_id} ({c.worksheet!r})" for c in found))


@dataclass
class Match:
    """Each graded student with their roster entry, and what did not match."""
    entries: dict[str, Student]
    unrostered: list[str] = field(default_factory=list)  # graded, not in the roster
    absent: list[str] = field(default_factory=list)      # in the roster, not graded
    rostered: bool = False                               # the course has a roster
    skipped: list[str] = field(default_factory=list)     # roster rows without an id

    def known(self, student_id: str) -> bool:
        """Whether the LMS ids we hold for a student are the roster's, not guesses: with
        a roster, one it lacks has no LMS user id to send or match on."""
        return not self.rostered or student_id not in self.unrostered

    def report(self, unwritten: Sequence[str] = ()) -> str:
        """What a TA must see before importing; `unwritten` names the rows an export
        left out (`format: student: why`)."""
        lines = []
        if self.unrostered:
            lines.append("Graded but not in the roster (exported under their student id "
                         "where the format allows; the LMS may not match them):")
            lines += [f"  {s}" for s in self.unrostered]
        if self.absent:
            lines.append("In the roster but not in this run (not exported):")
            lines += [f"  {s}" for s in self.absent]
        if unwritten:
            lines.append("Not written, since the LMS could not match them (it would "
                         "refuse the file or the score):")
            lines += [f"  {s}" for s in unwritten]
        if self.skipped:
            lines.append("Roster rows without a student id (left out of the roster):")
            lines += [f"  {s}" for s in self.skipped]
        return "\n".join(lines)


def stand_in(student_id: str) -> Student:
    """What an unrostered id most likely is: all digits is a Canvas user id (a Canvas
    bulk download names files with it), so it goes where Canvas matches it first (ID);
    anything else is a login name."""
    if student_id.isdigit():
        return Student(name=student_id, lms_id=student_id)
    return Student(name=student_id, sis_login_id=student_id)


def match(roster: Roster, student_ids: list[str]) -> Match:
    """Each graded id with its roster entry, or a stand-in for it. Without a roster no
    one is "not in the roster": there is none to be in."""
    known = roster.students
    entries = {sid: known.get(sid) or stand_in(sid) for sid in student_ids}
    return Match(entries,
                 unrostered=[s for s in student_ids if s not in known] if known else [],
                 absent=sorted(set(known) - set(student_ids)),
                 rostered=bool(known), skipped=list(roster.skipped))


_NUMBER = re.compile(r"(\d+)\s*$")  # a worksheet's "Participant 1234567"


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
