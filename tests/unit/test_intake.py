"""Intake finds each student's file in every layout the LMSs produce."""
from __future__ import annotations

import json
import os
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from grader.intake import submissions as intake
from grader.config import Student

EX = "13_moe.py"
UTC = timezone.utc


def write(path: Path, text: str, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def notebook(cells: list[tuple[str, str]]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True),
         **({"outputs": [], "execution_count": None} if kind == "code" else {})}
        for kind, src in cells]})


def collect(*args, **kwargs) -> list:
    """The students intake found (what it left out is tested in tests/adversarial)."""
    return intake.collect(*args, **kwargs).found


def as_dict(found) -> dict:
    return {sid: (path, notes) for sid, path, notes in found}


def test_plain_folders(tmp_path):
    write(tmp_path / "subs/alice" / EX, "x = 1\n")
    (tmp_path / "subs/bob").mkdir()
    write(tmp_path / "subs/carol/moe.py", "y = 2\n")
    got = as_dict(collect(tmp_path / "subs", EX, cache=tmp_path / "cache"))
    assert got["alice"][0].read_text() == "x = 1\n" and got["alice"][1] == []
    assert got["bob"] == (None, [])
    assert got["carol"][0].read_text() == "y = 2\n"
    assert "Graded moe.py as 13_moe.py." in got["carol"][1]


def test_several_files_newest_graded_and_noted(tmp_path):
    write(tmp_path / "subs/alice" / EX, "old\n", mtime=1_000_000)
    write(tmp_path / "subs/alice/13_moe (2).py", "new\n", mtime=2_000_000)
    write(tmp_path / "subs/alice/notes.txt", "ignored\n")
    ((sid, path, notes),) = collect(tmp_path / "subs", EX, cache=tmp_path / "c")
    assert (sid, path.read_text()) == ("alice", "new\n")
    assert "graded 13_moe (2).py, the newest" in notes[0] and "13_moe.py" in notes[0]


def test_due_date_prefers_newest_on_time(tmp_path):
    flat = tmp_path / "flat"
    write(flat / "alvarezava_4001_77001_13_moe.py", "on time\n", mtime=1_000_000)
    write(flat / "alvarezava_late_4001_77009_13_moe-1.py", "late\n", mtime=2_000_000)
    due = datetime(2026, 9, 1, 12, tzinfo=UTC)
    ((_, path, notes),) = collect(flat, EX, cache=tmp_path / "c", due=due)
    assert path.read_text() == "on time\n" and "newest on-time" in notes[0]
    ((_, path, notes),) = collect(flat, EX, cache=tmp_path / "c")  # no due date: newest
    assert path.read_text() == "late\n" and notes[1] == "This submission was late."


def test_file_times_never_make_a_plain_submission_late(tmp_path):
    write(tmp_path / "subs/alice" / EX, "a\n", mtime=2_000_000_000)
    due = datetime(2026, 9, 1, 12, tzinfo=UTC)
    assert collect(tmp_path / "subs", EX, cache=tmp_path / "c", due=due)[0][2] == []


def canvas_zip(path: Path, entries: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for i, (name, text) in enumerate(entries.items()):
            z.writestr(zipfile.ZipInfo(name, (2026, 8, 30, 10, i, 0)), text)
    return path


def test_canvas_bulk_download_zip(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    canvas_zip(subs / "submissions.zip", {
        "alvarezava_4001_77001_13_moe.py": "first\n",
        "alvarezava_4001_77009_13_moe-1.py": "second\n",
        "brownbob_late_4002_77002_13_moe.py": "late\n",
        "chencarl_4003_77003_13_moe.ipynb": notebook([("code", "import torch\n")]),
        "chencarl_4003_77003_readme.txt": "not code\n",
        "../escape_4004_77004_13_moe.py": "zip slip\n",
    })
    roster = {"ava": Student(name="Alvarez, Ava", lms_id="4001")}
    got = as_dict(collect(subs, EX, cache=tmp_path / "cache", roster=roster))
    # roster maps Canvas ids; the rest keep them; 4004's only entry escaped, so it is noted
    assert set(got) == {"ava", "4002", "4003", "4004"}
    assert got["4004"] == (None, ["Left out ../escape_4004_77004_13_moe.py "
                                  "(a path that leaves the archive)."])
    path, notes = got["ava"]
    assert path.read_text() == "second\n" and "graded 13_moe-1.py" in notes[0]
    assert got["4002"][0].read_text() == "late\n"
    assert got["4002"][1] == ["This submission was late."]
    assert got["4003"][0].read_text().startswith("import torch")
    assert "code cells of 13_moe.ipynb" in got["4003"][1][0]  # the name the student gave it
    assert not (tmp_path / "cache" / "escape_4004_77004_13_moe.py").exists()
    assert all(tmp_path / "cache" in p.parents for p, _ in got.values() if p)


def test_canvas_zip_given_directly_and_unzipped_folder(tmp_path):
    z = canvas_zip(tmp_path / "s.zip", {"kingcarol_4003_77003_13_moe.py": "z\n"})
    ((sid, path, _),) = collect(z, EX, cache=tmp_path / "cache")
    assert sid == "4003" and path.read_text() == "z\n"
    write(tmp_path / "flat/kingcarol_4003_77003_13_moe.py", "flat\n")
    ((sid, path, notes),) = collect(tmp_path / "flat", EX, cache=tmp_path / "c2")
    assert (sid, path.read_text(), notes) == ("4003", "flat\n", [])


def test_gradescope_export_layout(tmp_path):
    subs = tmp_path / "export"
    write(subs / "submission_metadata.yml", """\
submission_101:
  :submitters:
  - :name: Ava Alvarez
    :sid: av123
    :email: ava@u.edu
  :created_at: 2026-08-30 10:00:00.123456789 -07:00
  :score: !ruby/object:BigDecimal 18:0.75e1
submission_102:
  :submitters:
  - :name: Bob Brown
    :email: bob@u.edu
  - :name: Dan Doe
    :sid: dd7
  :created_at: 2026-08-31 10:00:00.000000000 -07:00
submission_103:
  :submitters:
  - :name: Eve
    :sid: eve1
""")
    write(subs / "submission_101" / EX, "ava\n")
    write(subs / "submission_102/src" / EX, "pair\n")
    due = datetime(2026, 8, 31, 12, tzinfo=UTC)
    got = as_dict(collect(subs, EX, cache=tmp_path / "cache", due=due))
    assert got["av123"][0].read_text() == "ava\n" and got["av123"][1] == []
    assert any("late" in n for n in got["dd7"][1])  # 10:00 -07:00 is after 12:00 UTC
    assert got["bob@u.edu"][0].read_text() == got["dd7"][0].read_text() == "pair\n"
    assert got["eve1"] == (None, [])


def test_notebook_converted_with_magics_left_out(tmp_path):
    nb = notebook([
        ("markdown", "# MoE\n"),
        ("code", "%matplotlib inline\n!pip install torch\nimport torch\n"),
        ("code", "%%bash\necho hi\n"),
        ("code", "%%time\ndef f(x):\n    %time y = 1\n    return x\n"),
        ("code", "files = !ls\nclass A:\n    pass\n"),
    ])
    write(tmp_path / "subs/alice/13_moe.ipynb", nb)
    ((sid, path, notes),) = collect(tmp_path / "subs", EX, cache=tmp_path / "cache")
    assert path == tmp_path / "cache/notebooks/alice" / EX
    code = path.read_text()
    compile(code, str(path), "exec")
    assert "import torch" in code and "def f(x):" in code and "class A:" in code
    assert "echo hi" not in code and "!pip" not in code and "%matplotlib" not in code
    assert "4 code cells of 13_moe.ipynb" in notes[0]
    assert "Left out 6 IPython" in notes[1] and "`%%bash (whole cell)`" in notes[1]
    namespace: dict = {}
    exec(code.replace("import torch", ""), namespace)
    assert namespace["f"](3) == 3


def test_unreadable_notebook_is_noted(tmp_path):
    write(tmp_path / "subs/alice/13_moe.ipynb", "{not json")
    ((_, path, notes),) = collect(tmp_path / "subs", EX, cache=tmp_path / "cache")
    assert path is None and "not a readable Jupyter notebook" in notes[0]


def test_roster_mapping_onto_a_taken_id_keeps_both_students(tmp_path):
    """The roster maps Canvas user 4001 to the id "4002", which user 4002 also has:
    neither result may overwrite the other."""
    write(tmp_path / "flat/ava_4001_1_13_moe.py", "ava\n")
    write(tmp_path / "flat/bo_4002_2_13_moe.py", "bo\n")
    roster = {"4002": Student(name="Ava", lms_id="4001")}
    got = as_dict(collect(tmp_path / "flat", EX, cache=tmp_path / "c", roster=roster))
    assert sorted(got) == ["4002", "4002~2"]
    assert {p.read_text() for p, _ in got.values()} == {"ava\n", "bo\n"}


def test_fingerprint_changes_with_the_notes_and_reads_no_link(tmp_path):
    """With no file, the notes say why: a new reason must regrade, not keep the old page."""
    from grader.judge.plan import Submission, fingerprint_of
    a = fingerprint_of(Submission("s", None, notes=["Left out x (links are never followed)."]), "v")
    b = fingerprint_of(Submission("s", None, notes=["Left out x (not a regular file)."]), "v")
    link = tmp_path / "link.py"
    link.symlink_to(write(tmp_path / "real.py", "x = 1\n"))
    assert a != b
    assert fingerprint_of(Submission("s", link), "v") == fingerprint_of(Submission("s", None), "v")


# Canvas downloads as canvas-lms names them (tests/vendors.py cites the source) ---------

def test_canvas_names_parse_as_canvas_builds_them():
    from tests.vendors import CanvasFile, canvas_name

    cases = [  # (file as Canvas holds it, name, late, uid, file id, original)
        (CanvasFile("Brandt, Bob", 12346, 6789013, "13_moe.py", late=True),
         "brandtbob", True, "12346", 6789013, "13_moe.py"),
        (CanvasFile("Student, Test", 12399, 6789020, "13_moe.py"),
         "studenttest", False, "12399", 6789020, "13_moe.py"),
        (CanvasFile("Team Red", 12350, 6789030, "13_moe-1.py"),       # a group's file
         "teamred", False, "12350", 6789030, "13_moe-1.py"),
        (CanvasFile("O_Brien_2_, Pat", 12351, 6789031, "my_13_moe.py"),  # _2_ -> 2
         "o_brien2pat", False, "12351", 6789031, "my_13_moe.py"),
        (CanvasFile("张, 伟", 12352, 6789032, "13_moe.ipynb", late=True),
         "张伟", True, "12352", 6789032, "13_moe.ipynb"),
        (CanvasFile("", 0, 6789033, "13_moe.py", late=True, anonymous_id="bG7xq"),
         "", True, "anon_bG7xq", 6789033, "13_moe.py"),
        (CanvasFile("", 0, 6789034, "13_moe.py", anonymous_id="40312"),  # digits only
         "", False, "anon_40312", 6789034, "13_moe.py"),
        (CanvasFile("Lee, Ann", 12353, 6789035, 'a:b*"c".py'),
         "leeann", False, "12353", 6789035, "a_b_c_.py"),
    ]
    for f, name, late, uid, file_id, original in cases:
        got = intake.canvas_name(canvas_name(f))
        assert got == intake.CanvasName(name, late, uid, file_id, original), canvas_name(f)
    assert intake.canvas_name("brownbob_late_4002_77002_13_moe.py").late  # older downloads
    assert intake.canvas_name("leeann_12353_text.html").file_id == 0
    assert intake.canvas_name("13_moe.py") is None
    assert intake.canvas_name("notes_2026.txt") is None


def test_canvas_late_students_are_graded_and_noted(tmp_path):
    """Issue 25: Canvas writes LATE in capitals; intake matched `_late_` only, so a late
    student had no page, no score and no line, and a zip of late files only gave
    "no submissions found"."""
    from tests.vendors import CanvasFile, canvas_zip

    z = canvas_zip(tmp_path / "late.zip", [
        CanvasFile("Brandt, Bob", 12346, 6789013, "13_moe.py", late=True, text="bob\n"),
        CanvasFile("Cruz, Cy", 12347, 6789014, "13_moe.py", late=True, text="cy\n"),
    ])
    taken = intake.collect(z, EX, cache=tmp_path / "cache")
    got = as_dict(taken.found)
    assert set(got) == {"12346", "12347"}
    assert got["12346"][0].read_text() == "bob\n"
    assert got["12346"][1] == ["This submission was late."]
    assert taken.skipped == []


def test_canvas_download_places_or_names_every_file(tmp_path):
    """Every file of a Canvas download is a student's candidate, named in that student's
    notes, or named in the run's summary: none is dropped without a word. A resubmitted
    file (`-1`, from Attachment.make_unique_filename) is the newest."""
    from tests.vendors import CanvasFile, canvas_zip

    subs = tmp_path / "subs"
    subs.mkdir()
    canvas_zip(subs / "submissions.zip", [
        CanvasFile("Anders, Alice", 12345, 6789001, "13_moe.py", text="first\n"),
        # re-uploaded: Canvas's make_unique_filename names it in the student's folder
        CanvasFile("Anders, Alice", 12345, 6789002, "13_moe-1.py", text="second\n"),
        CanvasFile("Brandt, Bob", 12346, 6789013, "13_moe.py", late=True, text="late\n"),
        CanvasFile("Brandt, Bob", 12346, 6789014, "report.pdf", late=True, text="pdf"),
        CanvasFile("Student, Test", 12399, 6789020, "13_moe.py", text="test\n"),
        CanvasFile("Team Red", 12350, 6789030, "13_moe.py", text="team\n"),
        CanvasFile("", 0, 6789040, "13_moe.py", anonymous_id="bG7xq", text="anon\n"),
    ])
    with zipfile.ZipFile(subs / "submissions.zip", "a") as z:
        z.writestr("README.txt", "not a submission\n")
    (subs / "notes.md").write_text("beside the zip\n")
    taken = intake.collect(subs, EX, cache=tmp_path / "cache")
    got = as_dict(taken.found)
    assert set(got) == {"12345", "12346", "12399", "12350", "anon_bG7xq"}
    path, notes = got["12345"]
    assert path.read_text() == "second\n" and "graded 13_moe-1.py, the newest" in notes[0]
    path, notes = got["12346"]
    assert path.read_text() == "late\n"
    assert notes == ["This submission was late.",
                     "Left out report.pdf (only .py and .ipynb files are graded)."]
    assert got["anon_bG7xq"][0].read_text() == "anon\n"
    assert sorted(taken.skipped) == sorted([
        "12346: Left out report.pdf (only .py and .ipynb files are graded).",
        "Left out submissions.zip: README.txt (not named as Canvas or Moodle names a "
        "submission's file).",
        "Left out notes.md (beside a zip, only zips are read)."])


# ------------------------------------------- a Moodle download against its worksheet

def test_a_download_and_a_worksheet_that_disagree_on_a_name_are_caught(tmp_path):
    """Participant numbers map a Moodle download to the worksheet's students; where the
    download's folder name and the worksheet's Full name cannot be one person, that is
    a clash, and the same person written otherwise (case, spaces, word order, a `_`
    Moodle wrote as a space) is not."""
    from grader.intake import roster
    from tests.vendors import MoodleFile, moodle_worksheet, moodle_zip

    sheet = moodle_worksheet(tmp_path / "worksheet.csv", [
        (2750101, "Alice Anders", "alice@example.edu"),
        (2750102, "Bob Brandt", "bob@example.edu"),
        (2750103, "Carol Chen", "carol@example.edu"),
        (2750104, "Dave_Dunn", "dave@example.edu")])
    (tmp_path / "subs").mkdir()
    moodle_zip(tmp_path / "subs" / "download.zip", [
        MoodleFile("张伟", 2750101, EX, "x"), MoodleFile("Brandt Bob", 2750102, EX, "x"),
        MoodleFile("carol  CHEN", 2750103, EX, "x"), MoodleFile("Dave_Dunn", 2750104, EX, "x"),
        MoodleFile("李娜", 2750199, EX, "x")])
    found = roster.Roster()
    roster.add_worksheet(found, sheet, "email")
    taken = intake.collect(tmp_path / "subs", EX, cache=tmp_path / "cache",
                           aliases=found.aliases)
    assert taken.numbers == {"alice@example.edu": "2750101", "bob@example.edu": "2750102",
                             "carol@example.edu": "2750103", "dave@example.edu": "2750104"}
    assert taken.by_number == ["2750199"]  # not in the worksheet: warned of, not a clash
    assert roster.clashes(found, taken.numbers, taken.names) == [
        roster.Clash("2750101", "alice@example.edu", "张伟", "Alice Anders")]


def test_blind_marking_names_no_one_and_is_no_clash():
    from grader.intake.roster import same_person

    assert same_person("Participant", "Participant 2750101", "2750101")
    assert not same_person("Participant", "Participant 2750101", "2750102")
    assert not same_person("Alice", "Alice Anders", "1")
    assert same_person("ＡＬＩＣＥ　Anders", "alice anders", "1")  # fullwidth, NFKC


# ------------------------------------------- Moodle lateness, from Moodle's own times

DUE = datetime.fromisoformat("2026-09-05T23:59:00+08:00")


@pytest.mark.parametrize("lang", ["en", "zh_cn"])
def test_moodle_lateness_is_read_from_the_worksheet_not_the_zips_times(tmp_path, lang):
    """Issue 51 item 2: a file submitted two days late got no note. The worksheet's
    "Last modified (submission)" (Moodle's date, in either language, without an offset:
    read in `due`'s) says when; the zip's entry times are the download's, after `due`
    for everyone, and make no one late."""
    from grader.intake import roster
    from tests.vendors import MoodleFile, moodle_worksheet, moodle_zip

    sheet = moodle_worksheet(tmp_path / "worksheet.csv", [
        (1, "Ann Lee", "ann@u.edu"), (2, "Bo Chen", "bo@u.edu")], lang=lang,
        submitted={1: datetime(2026, 9, 5, 23, 30), 2: datetime(2026, 9, 7, 9, 15)})
    (tmp_path / "subs").mkdir()
    moodle_zip(tmp_path / "subs" / "download.zip", [
        MoodleFile("Ann Lee", 1, EX, "a"), MoodleFile("Bo Chen", 2, EX, "b")])
    found = roster.Roster()
    roster.add_worksheet(found, sheet, "email", DUE.tzinfo)
    assert found.submitted["2"] == datetime.fromisoformat("2026-09-07T09:15+08:00")
    got = as_dict(collect(tmp_path / "subs", EX, cache=tmp_path / "c", due=DUE,
                          aliases=found.aliases, submitted=found.submitted))
    assert got["ann@u.edu"][1] == []
    assert got["bo@u.edu"][1] == ["This submission was late (due 2026-09-05 23:59 UTC+08:00)."]


def test_a_worksheet_time_is_read_in_the_courses_timezone():
    """23:30 in Shanghai is 15:30 UTC, on time for a `due` of 15:45 UTC; read in
    `due`'s offset it would be 23:30 UTC, late."""
    from zoneinfo import ZoneInfo

    from grader.intake.moodle_words import worksheet_time

    shanghai = worksheet_time("2026年09月5日 星期六 23:30", ZoneInfo("Asia/Shanghai"))
    assert shanghai < datetime(2026, 9, 5, 15, 45, tzinfo=UTC)
    assert worksheet_time("2026年09月5日 星期六 23:30", UTC) > datetime(2026, 9, 5, 15, 45,
                                                                       tzinfo=UTC)
    assert worksheet_time("Saturday, 5 September 2026, 12:05 AM", UTC).hour == 0
    assert worksheet_time("-", UTC) is None
    with pytest.raises(ValueError):
        worksheet_time("next Tuesday", UTC)


def test_an_unreadable_worksheet_date_is_named_and_claims_nothing(tmp_path):
    from grader.intake import roster
    from tests.vendors import moodle_worksheet

    sheet = moodle_worksheet(tmp_path / "w.csv", [(1, "Ann Lee", "ann@u.edu")])
    sheet.write_text(sheet.read_text(encoding="utf-8-sig").replace(
        "Tuesday, 1 September 2026, 10:00 AM", "soon"), encoding="utf-8")
    found = roster.Roster()
    roster.add_worksheet(found, sheet, "email")
    assert found.submitted == {} and "'soon'" in found.note()


def test_untimed_moodle_files_are_neither_on_time_nor_newest(tmp_path):
    """Without the worksheet's time a Moodle download says nothing of lateness, and its
    entries share the download's time: no note says "on-time" or "newest"."""
    from tests.vendors import MoodleFile, moodle_zip

    (tmp_path / "subs").mkdir()
    moodle_zip(tmp_path / "subs" / "download.zip", [
        MoodleFile("Ann Lee", 1, EX, "a"), MoodleFile("Ann Lee", 1, "13_moe (2).py", "b")])
    ((_, _, notes),) = collect(tmp_path / "subs", EX, cache=tmp_path / "c", due=DUE)
    assert notes == ["Several files were submitted; graded 13_moe.py "
                     "(also found: 13_moe (2).py)."]


@pytest.mark.parametrize("lang", ["en", "zh_cn"])
def test_a_worksheet_in_either_language_is_read(tmp_path, lang):
    """Issue 51 item 5: a worksheet from a Moodle in Chinese was refused."""
    from grader.deliver.export.moodle_files import participant_rows
    from tests.vendors import moodle_worksheet

    sheet = moodle_worksheet(tmp_path / "w.csv", [(2750101, "张伟", "zw@u.edu")], lang=lang)
    ((row),) = participant_rows(sheet, "Email address")
    assert (row["number"], row["Full name"], row["Email address"]) == (
        "2750101", "张伟", "zw@u.edu")


def test_the_worksheets_one_identifier_column_is_used_else_the_fix_is_named(tmp_path):
    from grader.config import ConfigError
    from grader.deliver.export.moodle_files import identifier_kind
    from tests.vendors import moodle_worksheet

    class Course:  # what identifier_kind reads of a course
        moodle_identifier = "username"
        model_fields_set: set = set()

    sheet = moodle_worksheet(tmp_path / "w.csv", [(1, "张伟", "zw@u.edu")], lang="zh_cn")
    assert identifier_kind(Course(), sheet) == "email"  # Moodle's default: no Username
    chosen = Course()
    chosen.model_fields_set = {"moodle_identifier"}
    assert identifier_kind(chosen, sheet) == "username"  # the TA's choice stands
    both = tmp_path / "both.csv"
    both.write_text("标识符,全名,电子邮件地址,用户名\n参与人1,张伟,zw@u.edu,zw\n", encoding="utf-8")
    assert identifier_kind(Course(), both) == "username"  # the default, where it is there
    both.write_text("标识符,全名,电子邮件地址,学号\n参与人1,张伟,zw@u.edu,7\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="`moodle_identifier: email` or "
                                          "`moodle_identifier: idnumber`"):
        identifier_kind(Course(), both)
