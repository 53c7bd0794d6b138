"""A TA's week of late work, end to end (issue 56): a Moodle download whose worksheet
gives the hand-in times, one file 3 h 11 min late under a late rule applied by the
grader; an extension granted after the first run, an override and its revoke, a
`--force` rerun that changes nothing a TA set, the history; and a Canvas download,
which says LATE but gives no time: late or on time is known, how late is not, so no
late credit is applied and the run says so."""
from __future__ import annotations

import json
import subprocess
from datetime import datetime

import pytest

from grader import points
from grader.deliver.export.lti import CANVAS_SUBMISSION
from grader.judge import final
from tests.e2e.test_lms_downloads import (GRADER, SOLUTION, course, export, grade, page,
                                          rows, students)
from tests.vendors import CanvasFile, MoodleFile, canvas_zip, moodle_worksheet, moodle_zip

pytestmark = pytest.mark.slow

LATE = """due: 2026-10-01T23:59:00+00:00
late: {applied_by: grader, grace_minutes: 10, windows: [{until: "+24h", credit: 80}, {until: "+72h", credit: 50}], after_last: 0}
"""
ALICE, BOB = "alice@example.edu", "bob@example.edu"


def staff(course_yml, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GRADER, *args, "--course", str(course_yml), "--lesson", "13"],
                          capture_output=True, text=True, timeout=120)


def test_moodle_week_of_late_work(tmp_path):
    course_yml = course(tmp_path, head="moodle_identifier: email\n",
                        lesson="moodle_worksheet: worksheet.csv\n" + LATE)
    moodle_worksheet(course_yml.parent / "worksheet.csv", [
        (2750101, "Alice Anders", ALICE), (2750102, "Bob Brandt", BOB)],
        submitted={2750101: datetime(2026, 10, 1, 20, 0),
                   2750102: datetime(2026, 10, 2, 3, 10)})  # 3 h 11 min late
    subs = tmp_path / "subs"
    subs.mkdir()
    moodle_zip(subs / "download.zip", [MoodleFile("Alice Anders", 2750101, "13_moe.py",
                                                  SOLUTION),
                                       MoodleFile("Bob Brandt", 2750102, "13_moe.py",
                                                  SOLUTION)])
    out = tmp_path / "out"
    done = grade(course_yml, subs, out)
    got = students(out)
    alice, bob = got[ALICE], got[BOB]
    assert alice["late_status"] == "on_time" and alice["late"] is None, done.stdout[-2000:]
    assert alice["score"] == alice["raw_score"]
    assert bob["late_status"] == "late"
    assert bob["late"] == {"minutes": 191, "credit": 80, "applied_by": "grader"}
    raw = points.units(bob["raw_score"], "raw")
    assert bob["score"] == points.as_points(points.credited(raw, 80)) < bob["raw_score"]
    said = " ".join(page(out, BOB).split())
    assert "Handed in 2026-10-02 03:10, 3 h 11 min after your due date" in said
    assert "late credit 80 %" in said and "The grader applied the late credit" in said
    assert "after your due date" not in page(out, ALICE)
    report = " ".join((out / "report.html").read_text(encoding="utf-8").split())
    assert "Late work, extensions and overrides" in report and "3 h 11 min late" in report
    # every export carries the final score, once
    assert export(course_yml, out, "moodle,gradescope,lti").returncode == 0
    sent = {r[0]: float(r[1]) for r in rows(out / "export" / "moodle.csv", skip=1)}
    lti = [json.loads(line) for line in
           (out / "export" / "lti_scores.jsonl").read_text(encoding="utf-8").splitlines()]
    scope = {p.stem: json.loads(p.read_text(encoding="utf-8"))["score"]
             for p in (out / "export" / "gradescope").iterdir()}
    assert sent == scope == {s: got[s]["score"] for s in got}
    assert sorted(x["scoreGiven"] for x in lti) == sorted(s["score"] for s in got.values())
    assert not any("submission" in x for x in lti)  # no hand-in time: Canvas dates none
    assert all(x[CANVAS_SUBMISSION] == {"new_submission": False} for x in lti)

    # an override on Bob's ffn part, then its revoke; a private note never reaches scores
    assert staff(course_yml, "override", "--student", BOB, "--part", "ffn", "--adjust",
                 "-1", "--reason", "hard-coded shapes", "--note",
                 "secret-ta-note").returncode == 0
    # an extension granted after the first run makes Bob's file on time
    done = staff(course_yml, "extend", "--student", BOB, "--until", "2026-10-03 23:59",
                 "--reason", "ill")
    assert done.returncode == 0, done.stderr
    grade(course_yml, subs, out)
    bob2 = students(out)[BOB]
    assert bob2["late_status"] == "on_time" and bob2["late"] is None
    said = " ".join(page(out, BOB).split())
    assert "This submission was late" not in said and "on time (due 2026-10-03 23:59" in said
    assert bob2["parts"]["ffn"]["score"] == bob["parts"]["ffn"]["score"] - 1
    assert bob2["score"] == bob["raw_score"] - 1
    assert bob2["overrides"][0]["reason"] == "hard-coded shapes"
    assert "secret-ta-note" not in (out / "scores.json").read_text(encoding="utf-8")

    # a rerun with --force changes nothing a TA set
    folder = course_yml.parent / "grades" / "13"
    kept = {p.name: p.read_bytes() for p in folder.iterdir()
            if p.name in (final.EXTENSIONS, final.EXTENSION_LOG, final.OVERRIDES)}
    assert set(kept) == {final.EXTENSIONS, final.EXTENSION_LOG, final.OVERRIDES}
    forced = subprocess.run([*GRADER, "run", "--course", str(course_yml), "--lesson", "13",
                             "--submissions", str(subs), "--out", str(out), "--force",
                             "--unsandboxed"], capture_output=True, text=True, timeout=1500)
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert {n: (folder / n).read_bytes() for n in kept} == kept
    assert students(out)[BOB]["score"] == bob2["score"]

    assert staff(course_yml, "override", "--student", BOB, "--revoke", "o1", "--reason",
                 "rechecked").returncode == 0
    grade(course_yml, subs, out)
    assert students(out)[BOB]["score"] == bob["raw_score"]

    done = staff(course_yml, "history", "--student", BOB)
    trail = " ".join((done.stdout + done.stderr).split())
    order = [trail.index(s) for s in ("override o1", "extension to 2026-10-03T23:59:00",
                                      "automatic score under override o1",
                                      "override o1 revoked")]
    assert order == sorted(order), trail

    assert export(course_yml, out, "moodle").returncode == 0
    data = {r[0]: r for r in rows(out / "export" / "moodle.csv", skip=1)}
    assert set(data) == {ALICE, BOB}


def test_canvas_late_mark_without_a_time(tmp_path):
    course_yml = course(tmp_path, lesson=LATE)
    subs = tmp_path / "subs"
    subs.mkdir()
    canvas_zip(subs / "submissions.zip", [
        CanvasFile("Anders, Alice", 12345, 6789001, "13_moe.py", text=SOLUTION),
        CanvasFile("Brandt, Bob", 12346, 6789013, "13_moe.py", late=True, text=SOLUTION)])
    out = tmp_path / "out"
    done = grade(course_yml, subs, out)
    said = " ".join((done.stdout + done.stderr).split())
    got = students(out)
    assert got["12345"]["late_status"] == "on_time" and got["12345"]["late"] is None
    assert got["12346"]["late_status"] == "late"
    assert got["12346"]["late"] == {"minutes": None, "credit": None, "applied_by": "grader"}
    assert all(s["late_marked"] and s["score"] == s["raw_score"] for s in got.values())
    assert "marked late by the LMS" in said and "12346" in said, said[-2000:]
    assert "hand-in time unknown" not in said
    assert "marked by the LMS; how late unknown" in (out / "report.html").read_text(
        encoding="utf-8")
    bob = " ".join(page(out, "12346").split())
    assert "The LMS marked this submission late" in bob and "Handed in" not in bob
    assert "did not mark this submission late" in page(out, "12345")
    done = export(course_yml, out, "canvas")
    assert "Canvas late policy must be off" in " ".join(done.stderr.split())
    data = {r[1]: float(r[5]) for r in rows(out / "export" / "canvas.csv", skip=2)}
    assert data == {"12345": got["12345"]["score"], "12346": got["12346"]["score"]}
    bad = course_yml.parent / "grades" / "13" / "extensions.csv"
    bad.parent.mkdir(parents=True, exist_ok=True)  # the run recorded the answers there
    bad.write_text("student_id,due,reason,granted_by,granted_at\n"
                   "12346,2026-10-03 23:59,ill,ta,\n12346,excused,x,ta,\n", encoding="utf-8")
    before = (out / "scores.json").read_bytes()
    done = subprocess.run([*GRADER, "run", "--course", str(course_yml), "--lesson", "13",
                           "--submissions", str(subs), "--out", str(out), "--unsandboxed"],
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode != 0 and "extensions.csv:2 and 3: two rows for '12346'" \
        in " ".join(done.stderr.split()), done.stderr[-2000:]
    assert (out / "scores.json").read_bytes() == before  # nothing half-applied
    assert json.loads(before)["students"]
