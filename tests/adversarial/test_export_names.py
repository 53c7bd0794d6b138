"""Hostile student ids through `grader export`, as a TA runs it: every file lands under
OUT/export, one per student, and no spreadsheet cell from the class is a formula."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader import points
from grader.config import load
from grader.record import GradeRecord, TestRecord
from grader.store import safe_name

REPO = Path(__file__).resolve().parents[2]
# the formulas behind a prefix are those a spreadsheet that trims or folds the cell
# on import still runs: spaces (ASCII, non-breaking, ideographic, zero-width), fullwidth
# signs, and `|` (a DDE command)
BEHIND = [' =HYPERLINK("http://x")', "\u00a0=1+1", "\u3000=2+2", "\u200b=3+3",
          "\ufeff@SUM(2)", "＝cmd", "＠SUM(3)", "＋cmd", "|cmd", " \u00a0 -4+4"]
EVIL = ["../../x", "../" * 20 + "tmp/grader-export-escape", "/etc/passwd",
        '=HYPERLINK("http://x")', "@SUM(1)", "+cmd", "-2+3", "\tsneaky", "..", "alice",
        *BEHIND]
# what a spreadsheet reads as a formula, written here apart from grader.deliver.export.cells
FORMULA = re.compile(r"^[\s\u200b\ufeff]*[=+\-@|＝＋－＠｜]|^[\t\r]")
FORMATS = "gradescope,canvas,lti,moodle,nbgrader"


def student(sid: str, passed: int) -> dict:
    """A lesson-13 scores.json entry whose first `passed` tests of each part pass."""
    lesson = load(REPO / "course.yml").lesson("13")
    tests = [TestRecord(name=f"test_{i}", part=name, practice=False,
                        outcome="passed" if i < passed else "failed")
             for name in lesson.parts for i in range(7)]
    parts = points.award(lesson.parts, tests)
    return GradeRecord(student_id=sid, lesson="13", status="import_error",
                       problem="=cmd|' /C calc'!A0 raised", score=points.total(parts),
                       max_score=points.total(parts, "max_score"), parts=parts,
                       tests=tests).score_json()


def passwd_untouched_by_export() -> bool:
    """/etc/passwd is still a passwd file holding nothing an export writes. (Not its
    hash: the suite's own Gradescope set-up adds a user to it, at any moment, from
    another xdist worker.)"""
    text = Path("/etc/passwd").read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(line.count(":") == 6 for line in lines) and not any(
        mark in text for mark in ("minimind-llm", "test_0", "calc", "HYPERLINK"))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export")


@pytest.fixture(scope="module")
def exported(root) -> tuple[Path, dict]:
    """One `grader export` to every format (nbgrader makes it slow), shared by the tests."""
    out = root / "a" / "b" / "out"
    out.mkdir(parents=True)
    scores = {"lesson": "13", "course": "minimind-llm", "version": "v", "max_score": 10.0,
              "students": [student(sid, i % 8) for i, sid in enumerate(EVIL)]}
    (out / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    # the course as it is: no roster and no Moodle worksheet (either would make a roster
    # that none of these ids is on, and moodle.csv, which this test reads, would hold no
    # row of them)
    escape = Path("/tmp/grader-export-escape.json")
    assert passwd_untouched_by_export()
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "export", "--lesson", "13",
                           "--to", FORMATS, "--out", str(out), "--course",
                           str(REPO / "course.yml")], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert passwd_untouched_by_export() and not escape.exists()
    return out, scores


def test_every_file_is_under_the_export_folder(exported, root):
    out, scores = exported
    outside = [p for p in root.rglob("*") if p.is_file()
               and out / "export" not in p.parents and p != out / "scores.json"]
    assert outside == []
    folder = out / "export" / "gradescope"
    assert sorted(p.name for p in folder.iterdir()) == \
        sorted(f"{safe_name(s['student_id'])}.json" for s in scores["students"])
    for s in scores["students"]:
        res = json.loads((folder / f"{safe_name(s['student_id'])}.json").read_text())
        assert res["score"] == s["score"] == sum(t["score"] for t in res["tests"])


def test_no_csv_cell_is_a_formula_and_scores_stay_numbers(exported):
    out, scores = exported
    want = sorted(s["score"] for s in scores["students"])
    for name, column in (("canvas.csv", 5), ("moodle.csv", 1)):
        with (out / "export" / name).open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        data = rows[2:] if name == "canvas.csv" else rows[1:]
        assert [c for r in rows for c in r if FORMULA.match(c)] == [], name
        assert sorted(float(r[column]) for r in data) == want, name
        ids = {r[0] for r in data}
        assert "'" + '=HYPERLINK("http://x")' in ids and "'@SUM(1)" in ids and "alice" in ids
        assert {"'" + sid for sid in BEHIND} <= ids, name


def test_nbgrader_ids_are_safe_names(exported):
    api = pytest.importorskip("nbgrader.api")
    out, scores = exported
    with api.Gradebook(f"sqlite:///{out / 'export' / 'gradebook.db'}",
                       course_id="minimind-llm") as gb:
        got = {s.id: s.score for s in gb.students}
    assert got == {safe_name(s["student_id"]): s["score"] for s in scores["students"]}
