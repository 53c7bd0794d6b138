"""A TA's week on real LMS downloads, built as each vendor's code names them
(tests/vendors.py cites the source): `grader run` on the download finds every student
with the right id and name, the notes reach the pages, the roster's missing students
are named at run time, and `grader export` writes a row for every graded student."""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.sandbox import bwrap
from grader.store import Store
from tests.e2e.test_gradescope_layout import as_notebook
from tests.vendors import (CanvasFile, MoodleFile, canvas_zip, moodle_worksheet, moodle_zip)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = (ROOT / "solutions" / "13_moe.py").read_text()
STUB = (ROOT / "exercises" / "13_moe.py").read_text()
GRADER = [sys.executable, "-m", "grader.cli"]
SANDBOX = ["--unsandboxed"] if bwrap.probe().reason else []


def course(tmp_path: Path, head: str = "", lesson: str = "") -> Path:
    """The repository's course with `head` lines on top and `lesson` lines in lesson 13;
    the lesson's folders linked."""
    folder = tmp_path / "course"
    folder.mkdir()
    for name in ("solutions", "exercises", "hidden_tests", "examples"):
        (folder / name).symlink_to(ROOT / name)
    lines = (ROOT / "course.yml").read_text().splitlines()
    at = lines.index("    exercise: 13_moe.py")
    lines[at:at] = [f"    {line}" for line in lesson.splitlines() if line]
    (folder / "course.yml").write_text(head + "\n".join(lines) + "\n")
    return folder / "course.yml"


def grade(course_yml: Path, submissions: Path, out: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([*GRADER, "run", "--course", str(course_yml), "--lesson", "13",
                           "--submissions", str(submissions), "--out", str(out), *SANDBOX],
                          capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "COLUMNS": "200"})
    assert (out / "scores.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return done


def export(course_yml: Path, out: Path, formats: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GRADER, "export", "--course", str(course_yml), "--lesson", "13",
                           "--to", formats, "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=600)


def students(out: Path) -> dict[str, dict]:
    doc = json.loads((out / "scores.json").read_text(encoding="utf-8"))
    return {s["student_id"]: s for s in doc["students"]}


def page(out: Path, sid: str) -> str:
    return (out / Store.page_of(sid)).read_text(encoding="utf-8")


def rows(path: Path, skip: int = 0) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))[skip:]


def test_canvas_download(tmp_path):
    """A Canvas zip with a LATE notebook, the Test Student and a README, and a gradebook
    export as the roster, whose fourth student handed nothing in."""
    course_yml = course(tmp_path, head="roster: gradebook.csv\n")
    (course_yml.parent / "gradebook.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Lesson 13 (5)\n"
        "    Points Possible,,,,,10.00\n"
        '"Anders, Alice",12345,30000001,aanders,SEC-001,\n'
        '"Brandt, Bob",12346,30000002,bbrandt,SEC-001,\n'
        '"Cruz, Cy",12347,30000003,ccruz,SEC-001,\n'
        '"Student, Test",12399,,,SEC-001,\n', encoding="utf-8")
    subs = tmp_path / "subs"
    subs.mkdir()
    canvas_zip(subs / "submissions.zip", [
        CanvasFile("Anders, Alice", 12345, 6789001, "13_moe.py", text=SOLUTION),
        CanvasFile("Brandt, Bob", 12346, 6789013, "13_moe.ipynb", late=True,
                   text=as_notebook(SOLUTION)),
        CanvasFile("Student, Test", 12399, 6789020, "13_moe.py", text=STUB)])
    out = tmp_path / "out"
    done = grade(course_yml, subs, out)
    said = " ".join((done.stdout + done.stderr).split())
    got = students(out)
    assert set(got) == {"aanders", "bbrandt", "12399"}, said[-2000:]
    assert {s: got[s]["name"] for s in got} == {
        "aanders": "Anders, Alice", "bbrandt": "Brandt, Bob", "12399": "Student, Test"}
    assert got["bbrandt"]["score"] == got["aanders"]["score"] == pytest.approx(10.0)
    assert "missing: on the roster, nothing handed in (1): ccruz" in said
    bob = page(out, "bbrandt")
    assert "Brandt, Bob" in bob and "This submission was late." in bob
    assert "code cells of 13_moe.ipynb" in bob and "Left out 2 IPython" in bob
    assert "Student, Test" in page(out, "12399")
    assert export(course_yml, out, "canvas").returncode == 0
    data = {r[1]: r for r in rows(out / "export" / "canvas.csv", skip=2)}
    assert set(data) == {"12345", "12346", "12399"}
    assert data["12399"][0] == "Student, Test" and float(data["12346"][5]) == 10.0


def test_moodle_download(tmp_path):
    """Moodle's "Download all submissions" zip (folders, one of them as Moodle before
    4.1 named it, and an online text) and its grading worksheet, no roster."""
    course_yml = course(tmp_path, head="moodle_identifier: email\n",
                        lesson="moodle_worksheet: worksheet.csv\n")
    moodle_worksheet(course_yml.parent / "worksheet.csv", [
        (2750101, "Alice Anders", "alice@example.edu"),
        (2750102, "Bob Brandt", "bob@example.edu"),
        (2750103, "Carol Chen", "carol@example.edu"),
        (2750104, "Dave Dunn", "dave@example.edu")])
    subs = tmp_path / "subs"
    subs.mkdir()
    moodle_zip(subs / "download.zip", [
        MoodleFile("Alice Anders", 2750101, "13_moe.py", SOLUTION),
        MoodleFile("Bob Brandt", 2750102, "13_moe.py", STUB),
        MoodleFile("Carol Chen", 2750103, "13_moe.ipynb", as_notebook(SOLUTION))])
    with zipfile.ZipFile(subs / "download.zip", "a") as z:
        z.writestr("Alice Anders_2750101_assignsubmission_onlinetext/onlinetext.html", "hi")
    out = tmp_path / "out"
    done = grade(course_yml, subs, out)
    said = " ".join((done.stdout + done.stderr).split())
    got = students(out)
    assert set(got) == {"alice@example.edu", "bob@example.edu", "carol@example.edu"}, \
        said[-2000:]
    assert got["carol@example.edu"]["name"] == "Carol Chen"
    assert got["alice@example.edu"]["score"] == pytest.approx(10.0)
    assert "missing: on the roster, nothing handed in (1): dave@example.edu" in said
    report = (out / "report.html").read_text(encoding="utf-8")  # counted, listed (issue 51)
    assert "dave@example.edu" in report and "the 1 who handed nothing in" in report
    assert json.loads((out / "scores.json").read_text())["absent"] == ["dave@example.edu"]
    alice = page(out, "alice@example.edu")
    assert "Alice Anders" in alice
    assert "Left out onlinetext.html (an online text, not a file)." in alice
    assert "code cells of 13_moe.ipynb" in page(out, "carol@example.edu")
    done = export(course_yml, out, "moodle")
    assert done.returncode == 0, done.stdout + done.stderr
    data = {r[0]: r for r in rows(out / "export" / "moodle.csv", skip=1)}
    assert set(data) == set(got)
    assert (out / "export" / "moodle_feedback_files.zip").is_file()


def test_moodle_download_without_a_worksheet_is_warned(tmp_path):
    """No grading worksheet in course.yml: the students are participant numbers, which
    Moodle's import cannot use. The run says so when it starts and again at its end,
    with what to do; the export writes no row for them and exits 1, as the run said."""
    course_yml = course(tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    moodle_zip(subs / "download.zip", [MoodleFile("Alice Anders", 2750101, "13_moe.py", STUB),
                                       MoodleFile("Bob Brandt", 2750102, "13_moe.py", STUB)])
    out = tmp_path / "out"
    done = grade(course_yml, subs, out)
    said = " ".join((done.stdout + done.stderr).split())
    assert set(students(out)) == {"2750101", "2750102"}
    warning = ("warning: a Moodle download, and no Moodle grading worksheet names them: 2 student(s) "
               "are known by their participant number only (2750101, 2750102).")
    assert said.count(warning) == 2, said[-3000:]
    assert "(it writes no row for them and exits 1)" in said
    assert "name it in course.yml as lessons.13.moodle_worksheet, and run again." in said
    assert said.index(warning) < said.index("summary")  # before grading, and at the end
    assert said.rindex(warning) > said.index("report:")
    done = export(course_yml, out, "moodle")
    assert done.returncode == 1, done.stdout + done.stderr
    assert rows(out / "export" / "moodle.csv", skip=1) == []
    assert "2750101" in done.stdout + done.stderr


def test_a_worksheet_that_names_other_people_stops_the_run(tmp_path):
    """The sample class's worksheet (Alice Anders... as participants 2750101...) beside a
    real download that files 张伟 and 李娜 under the same numbers: the numbers alone
    would credit their work to Alice and Bob. The run stops before grading and lists
    each disagreement; --trust-worksheet grades as the worksheet says, and notes it."""
    course_yml = course(tmp_path, lesson="moodle_worksheet: worksheet.csv\n")
    (course_yml.parent / "worksheet.csv").write_bytes(
        (ROOT / "examples" / "13-moodle-worksheet.csv").read_bytes())
    subs = tmp_path / "subs"
    subs.mkdir()
    moodle_zip(subs / "download.zip", [
        MoodleFile("张伟", 2750101, "13_moe.py", STUB),
        MoodleFile("李娜", 2750102, "13_moe.py", STUB),
        MoodleFile("Carol  CHEN", 2750103, "13_moe.py", STUB)])  # the same person
    out = tmp_path / "out"
    done = subprocess.run([*GRADER, "run", "--course", str(course_yml), "--lesson", "13",
                           "--submissions", str(subs), "--out", str(out), *SANDBOX],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1 and not (out / "scores.json").exists(), said[-3000:]
    assert "names 2 participant(s) otherwise than this Moodle download does" in said
    assert "participant 2750101: the download names '张伟', the worksheet 'Alice Anders' " \
           "(student alice)" in said
    assert "participant 2750102: the download names '李娜', the worksheet 'Bob Brandt'" in said
    assert "2750103" not in said and "--trust-worksheet" in said
    done = subprocess.run([*GRADER, "run", "--course", str(course_yml), "--lesson", "13",
                           "--submissions", str(subs), "--out", str(out), *SANDBOX,
                           "--trust-worksheet"], capture_output=True, text=True,
                          timeout=1500, env={**os.environ, "COLUMNS": "200"})
    said = " ".join((done.stdout + done.stderr).split())
    assert set(students(out)) == {"alice", "bob", "carol"}, said[-3000:]
    assert "participant 2750101, '张伟' in the download, graded as alice ('Alice Anders')" \
        in said


def test_moodle_download_unzipped_as_moodle_before_4_1(tmp_path):
    """The same download unzipped, folders ending `_assignsubmission_file_`: the
    participant number, not the whole folder name, is the key."""
    from grader.intake import submissions as intake, roster
    from grader.config import load
    from tests.vendors import moodle_entry

    course_yml = course(tmp_path, head="moodle_identifier: email\n",
                        lesson="moodle_worksheet: worksheet.csv\n")
    moodle_worksheet(course_yml.parent / "worksheet.csv",
                     [(2750101, "Alice Anders", "alice@example.edu")])
    entry = moodle_entry(MoodleFile("Alice Anders", 2750101, "13_moe.py"), old=True)
    (tmp_path / "subs" / entry).parent.mkdir(parents=True)
    (tmp_path / "subs" / entry).write_text(STUB)
    c = load(course_yml)
    r = roster.load(c, "13")
    taken = intake.collect(tmp_path / "subs", "13_moe.py", cache=tmp_path / "cache",
                           roster=r.students, aliases=r.aliases)
    assert [sid for sid, _, _ in taken.found] == ["alice@example.edu"]
    assert taken.names == {"alice@example.edu": "Alice Anders"} and taken.skipped == []


def test_gradescope_export(tmp_path):
    """Gradescope's export: submission_metadata.yml names each submitter, and one
    submission is a group's. Both members are graded, named and told; the similarity
    report does not pair them."""
    course_yml = course(tmp_path)
    subs = tmp_path / "export"
    (subs / "submission_1").mkdir(parents=True)
    (subs / "submission_1" / "13_moe.py").write_text(SOLUTION)
    (subs / "submission_2").mkdir()
    (subs / "submission_2" / "13_moe.py").write_text(SOLUTION)
    (subs / "submission_metadata.yml").write_text("""\
submission_1:
  :submitters:
  - :name: Ava Alvarez
    :sid: '20260001'
    :email: ava@u.edu
  :created_at: 2026-09-01 10:00:00.000000000 -07:00
submission_2:
  :submitters:
  - :name: Gus Grant
    :sid: '20260006'
    :email: gus@u.edu
  - :name: Hana Ho
    :sid: '20260007'
    :email: hana@u.edu
  :created_at: 2026-09-01 11:00:00.000000000 -07:00
""")
    out = tmp_path / "out"
    grade(course_yml, subs, out)
    got = students(out)
    assert {s: got[s].get("name") for s in got} == {
        "20260001": "Ava Alvarez", "20260006": "Gus Grant", "20260007": "Hana Ho"}
    assert "Handed in as a group with 20260007 (Hana Ho)" in page(out, "20260006")
    assert "Handed in as a group with 20260006 (Gus Grant)" in page(out, "20260007")
    done = subprocess.run([*GRADER, "similarity", "--course", str(course_yml), "--lesson",
                           "13", "--submissions", str(subs), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = (out / "similarity.html").read_text(encoding="utf-8")
    assert "20260006 (Gus Grant) + 20260007 (Hana Ho)" in report
    assert "<code>20260006 (Gus Grant)</code>" not in report
    assert export(course_yml, out, "gradescope").returncode == 0
    assert sorted(p.name for p in (out / "export" / "gradescope").iterdir()) == \
        ["20260001.json", "20260006.json", "20260007.json"]


def test_the_language_a_run_chose_is_kept_for_reports_exports_and_reruns(tmp_path):
    """Issue 51: `--language zh` on `grader run` was forgotten: `grader report` wrote
    English, a rerun without the flag wrote the regraded pages in English, and the
    Moodle comments were English only. OUT now records the language; the option, else
    OUT's record, else course.yml."""
    course_yml = course(tmp_path, head="moodle_identifier: email\n",
                        lesson="moodle_worksheet: worksheet.csv\n")
    moodle_worksheet(course_yml.parent / "worksheet.csv", [
        (2750101, "张伟", "zw@example.edu"), (2750102, "李娜", "ln@example.edu")])
    subs = tmp_path / "subs"
    subs.mkdir()
    moodle_zip(subs / "download.zip", [MoodleFile("张伟", 2750101, "13_moe.py", SOLUTION),
                                       MoodleFile("李娜", 2750102, "13_moe.py", STUB)])
    out = tmp_path / "out"

    def run(*extra: str) -> str:
        done = subprocess.run([*GRADER, "run", "--course", str(course_yml), "--lesson", "13",
                               "--submissions", str(subs), "--out", str(out), *SANDBOX,
                               *extra], capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout + done.stderr

    run("--language", "zh")
    assert json.loads((out / "scores.json").read_text())["language"] == "zh"
    (out / "report.html").unlink()
    done = subprocess.run([*GRADER, "report", "--course", str(course_yml), "--lesson", "13",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "平均分" in (out / "report.html").read_text(encoding="utf-8")
    assert export(course_yml, out, "moodle").returncode == 0
    comments = {r[0]: r[2] for r in rows(out / "export" / "moodle.csv", skip=1)}
    assert comments["zw@example.edu"].startswith("已评分。ffn 2/2；"), comments
    # 李娜 hands in the solution too: the rerun, without the flag, regrades her in zh
    moodle_zip(subs / "download.zip", [MoodleFile("张伟", 2750101, "13_moe.py", SOLUTION),
                                       MoodleFile("李娜", 2750102, "13_moe.py", SOLUTION)])
    said = " ".join(run().split())
    assert re.search(r"unchanged \(skipped\)\W+1\b", said), said[-1500:]
    assert "总分" in page(out, "ln@example.edu")
    assert export(course_yml, out, "moodle", "--language", "en").returncode == 0
    comments = {r[0]: r[2] for r in rows(out / "export" / "moodle.csv", skip=1)}
    assert comments["ln@example.edu"].startswith("Graded. ffn 2/2; ")
