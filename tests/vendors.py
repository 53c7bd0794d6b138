"""LMS downloads built the way the vendors' own code names them, for intake's tests.

Each builder follows the vendor's source, read for these tests (cited per function),
not our idea of it: a rule not in that source is not here.
"""
from __future__ import annotations

import csv
import re
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# canvas-lms lib/content_zipper.rb at 05e9653c12ef7afc65815ca84e5da7aa2e4c3bd3
CANVAS_SOURCE = "instructure/canvas-lms lib/content_zipper.rb"


@dataclass
class CanvasFile:
    """One uploaded file of one Canvas submission."""
    sortable_name: str      # User#sortable_name ("Brandt, Bob"); a group's name for a group
    user_id: int            # the submission's user (a group's representative)
    file_id: int            # the Attachment's id
    display_name: str       # the file's name as uploaded ("13_moe.py", "13_moe-1.py")
    late: bool = False
    anonymous_id: str = ""  # set when the assignment grades anonymously
    text: str = ""


def canvas_user_name(sortable_name: str) -> str:
    """`sanitize_user_name`: every `_<digits>_` loses its underscores (so the ids can be
    told apart), then lower case."""
    return re.sub(r"_(\d+)_", r"\1", sortable_name).lower()


def canvas_name(f: CanvasFile) -> str:
    """`get_filename` then `add_upload_submission`:
    `[users_name, ("LATE" if late), id].compact.join("_")` with every non-word
    character removed (`sanitize_file_name`, [[:word:]]), where id is the user id or
    `anon_<anonymous_id>` and users_name is left out when grading is anonymous; then
    `_<file id>_<display name>` with `\\0 / \\ : * ? " < > |` runs made `_`
    (`sanitize_attachment_filename`)."""
    ident = f"anon_{f.anonymous_id}" if f.anonymous_id else str(f.user_id)
    head = [None if f.anonymous_id else canvas_user_name(f.sortable_name),
            "LATE" if f.late else None, ident]
    filename = re.sub(r"[^\w]", "", "_".join(p for p in head if p is not None))
    display = re.sub(r'[\x00/\\:*?"<>|]+', "_", f.display_name)
    return f"{filename}_{f.file_id}_{display}"


def canvas_unique(name: str, taken: set[str]) -> str:
    """`add_attachment_to_zip` through `Attachment.make_unique_filename`: a name already
    in the zip gets `-1`, `-2`... before its extension."""
    if name not in taken:
        return name
    stem, dot, ext = name.partition(".")
    n = 1
    while f"{stem}-{n}{dot}{ext}" in taken:
        n += 1
    return f"{stem}-{n}{dot}{ext}"


def canvas_zip(path: Path, files: list[CanvasFile]) -> Path:
    """The "Download Submissions" zip: one entry per uploaded file, flat."""
    taken: set[str] = set()
    with zipfile.ZipFile(path, "w") as z:
        for i, f in enumerate(files):
            name = canvas_unique(canvas_name(f), taken)
            taken.add(name)
            z.writestr(zipfile.ZipInfo(name, (2026, 9, 1, 10, i, 0)), f.text)
    return path


# moodle mod/assign/classes/downloader.php (`get_student_prefix`,
# `load_submissionplugin_filelist`) and, before Moodle 4.1, mod/assign/locallib.php
# `download_submissions`, which ended the folder name with an extra `_`.
MOODLE_SOURCE = "moodle/moodle mod/assign/classes/downloader.php"


@dataclass
class MoodleFile:
    full_name: str          # fullname($student), or "Participant" when marking blind
    participant: int        # get_uniqueid_for_user: the worksheet's "Participant N"
    file_name: str
    text: str = ""


def moodle_prefix(full_name: str, participant: int) -> str:
    """`get_student_prefix`: underscores in the name become spaces, then
    `_<participant number>` (clean_filename keeps spaces and letters)."""
    return f"{full_name.replace('_', ' ')}_{participant}"


def moodle_entry(f: MoodleFile, *, folders: bool = True, old: bool = False) -> str:
    """`load_submissionplugin_filelist` for the file plugin: with "download as folders"
    (the default) `<prefix>_assignsubmission_file` + the file's path ("/") + its name,
    else `<prefix>_assignsubmission_file_<name>`; Moodle before 4.1 put a `_` after
    `file` in the folder's name too."""
    prefix = f"{moodle_prefix(f.full_name, f.participant)}_assignsubmission_file"
    if not folders:
        return f"{prefix}_{f.file_name}"
    return f"{prefix}{'_' if old else ''}/{f.file_name}"


# When the TA downloads (a Moodle zip's entries all carry it, below).
DOWNLOADED = datetime(2026, 9, 20, 9, 30)


def moodle_zip(path: Path, files: list[MoodleFile], *, folders: bool = True,
               old: bool = False, downloaded: datetime = DOWNLOADED) -> Path:
    """`downloader::download_zip` streams each file through core_files' zip_writer
    (`add_file_from_stored_file`, no options) into ZipStream, whose File options default
    the time to `new DateTime()` (ZipStream\\Option\\File::defaultTo): every entry
    carries the time of the download, in the server's zone, not the submission's."""
    with zipfile.ZipFile(path, "w") as z:
        for f in files:
            z.writestr(zipfile.ZipInfo(moodle_entry(f, folders=folders, old=old),
                                       downloaded.timetuple()[:6]), f.text)
    return path


# mod/assign/gradingtable.php's headers for an offline-grading download, as Moodle's
# language strings give them (grader/intake/moodle_words.py cites each): English, and
# the zh_cn pack of 3.11 (recordid 标识符, fullname 全名, email 电子邮件地址,
# lastmodifiedsubmission 上次修改（作业）, lastmodifiedgrade 上次修改（评分）, status 状态,
# maxgrade 最高分, gradecanbechanged 允许更改成绩; the comments plugin 评语反馈).
MOODLE_HEADERS = {
    "en": ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
           "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
           "Feedback comments"],
    "zh_cn": ["标识符", "全名", "电子邮件地址", "状态", "成绩", "最高分", "允许更改成绩",
              "上次修改（作业）", "上次修改（评分）", "评语反馈"],
}
# assign's `hiddenuser` before the number in `col_recordid`
MOODLE_PARTICIPANT = {"en": "Participant ", "zh_cn": "参与人"}
_EN_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ZH_DAYS = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")
_EN_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December")


def moodle_userdate(when: datetime, lang: str) -> str:
    """`userdate($time)`: langconfig's strftimedaydatetime (en '%A, %d %B %Y, %I:%M %p',
    zh_cn '%Y年%m月%d日 %A %H:%M'), %d and %I without their leading zero (fixday,
    fixhour), in the user's zone (`when` is already there) and without an offset."""
    if lang == "zh_cn":
        return (f"{when.year}年{when.month:02d}月{when.day}日 {_ZH_DAYS[when.weekday()]} "
                f"{when.hour:02d}:{when.minute:02d}")
    hour = when.hour % 12 or 12
    return (f"{_EN_DAYS[when.weekday()]}, {when.day} {_EN_MONTHS[when.month - 1]} "
            f"{when.year}, {hour}:{when.minute:02d} {'AM' if when.hour < 12 else 'PM'}")


def moodle_worksheet(path: Path, rows: list[tuple[int, str, str]], *, lang: str = "en",
                     submitted: dict[int, datetime | None] | None = None) -> Path:
    """The grading worksheet (Download grading worksheet): its columns as
    mod/assign/gradingtable.php writes them for an offline-grading download, in `lang`.
    `col_timesubmitted` writes `userdate(timemodified)`, or "-" with no submission;
    `submitted` gives each participant's time (else 1 September 2026, 10:00)."""
    with path.open("w", newline="", encoding="utf-8-sig") as f:
        out = csv.writer(f)
        out.writerow(MOODLE_HEADERS[lang])
        for number, name, email in rows:
            when = (submitted or {}).get(number, datetime(2026, 9, 1, 10, 0))
            out.writerow([f"{MOODLE_PARTICIPANT[lang]}{number}", name, email, "", "",
                          "10.00", "", moodle_userdate(when, lang) if when else "-", "-", ""])
    return path
