"""A Moodle grading worksheet's own words, in English and Chinese: its column headers and
its dates, so that a worksheet downloaded from a Moodle in either language is read alike.

Each is copied from Moodle's language strings, not guessed:
- English: moodle/moodle lang/en/langconfig.php, lang/en/moodle.php and
  mod/assign/lang/en/assign.php.
- Chinese (zh_cn is a language pack, not in moodle/moodle): the pack's moodle.php and
  langconfig.php (version 3.11) as zzg1975/moodle_wnmp_64 holds them in
  nginx/moodledata/lang/zh_cn/; its assign.php of the 3.4 branch as
  WSYUTeam/adaptable holds it in lang/zh_cn/assign.php, and the 3.11 pack's assign.php,
  which renamed two of them (both are listed); assignfeedback_comments.php (2.5 branch)
  as clickap/taiwanlife_ap holds it in lang/zh_cn/.
mod/assign/gradingtable.php names the columns (`recordid`, `fullname`, the identity
fields, `lastmodifiedsubmission`, the feedback plugin's `pluginname`).
"""
from __future__ import annotations

import re
from datetime import datetime, tzinfo

# a column as this code names it (Moodle's English) -> every header Moodle writes for it
HEADERS = {
    "Identifier": ("Identifier", "标识符", "识别码"),             # assign recordid
    "Full name": ("Full name", "全名", "用户全名"),                # moodle fullname(user)
    "Email address": ("Email address", "电子邮件地址"),           # moodle email
    "Username": ("Username", "用户名"),                          # moodle username
    "ID number": ("ID number", "学号"),                          # moodle idnumber
    "Last modified (submission)": ("Last modified (submission)",  # assign
                                   "上次修改（作业）", "最后修改（学生）"),  # 3.11, 3.4
    "Feedback comments": ("Feedback comments", "评语反馈"),  # assignfeedback_comments
    "Grade": ("Grade", "成绩"),                                  # moodle grade, gradenoun
}
_CANONICAL = {alias: name for name, aliases in HEADERS.items() for alias in aliases}

# the identifier columns, by `moodle_identifier`
IDENTIFIERS = {"username": "Username", "email": "Email address", "idnumber": "ID number"}


def canonical(header: str) -> str:
    """The column a worksheet's header names (Moodle's English), or the header itself."""
    return _CANONICAL.get(header.strip(), header.strip())


# userdate()'s default format is langconfig's strftimedaydatetime, with the leading zero
# of %d and %I dropped (userdate's fixday and fixhour):
#   en    '%A, %d %B %Y, %I:%M %p'   "Tuesday, 1 September 2026, 10:00 AM"
#   zh_cn '%Y年%m月%d日 %A %H:%M'     "2026年09月1日 星期二 10:00"
# The weekday is not read (its name is the locale's); the time has no offset.
_EN = re.compile(r"^(?:[^\W\d_]+,\s*)?(\d{1,2})\s+([A-Za-z]+)\s+(\d{4}),\s*(\d{1,2}):(\d{2})"
                 r"\s*([AaPp][Mm])?$")
_ZH = re.compile(r"^(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日\s*(?:\S+\s+)?"
                 r"(\d{1,2}):(\d{2})$")
_MONTHS = {m: i for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august",
     "september", "october", "november", "december"), start=1)}


def worksheet_time(text: str, zone: tzinfo) -> datetime | None:
    """A worksheet's date (`Last modified (submission)`) read in `zone`, or None where
    Moodle wrote none ("-": nothing submitted). Raises ValueError for any other text."""
    text = " ".join(text.split())
    if text in ("", "-"):
        return None
    if m := _ZH.match(text):
        year, month, day, hour, minute = map(int, m.groups())
    elif (m := _EN.match(text)) and m[2].lower() in _MONTHS:
        day, year, hour, minute = int(m[1]), int(m[3]), int(m[4]), int(m[5])
        month = _MONTHS[m[2].lower()]
        if m[6]:  # %I with AM/PM: 12 AM is 0 o'clock, 12 PM noon
            if not 1 <= hour <= 12:
                raise ValueError(f"not a Moodle date: {text!r}")
            hour = hour % 12 + (12 if m[6].lower() == "pm" else 0)
    else:
        raise ValueError(f"not a Moodle date: {text!r}")
    return datetime(year, month, day, hour, minute, tzinfo=zone)
