"""`grader mark --export/--import`: the CSV round trip for TAs who mark in a spreadsheet."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import config
from grader.cli import staff as cli
from grader.intake.answers import read_answers
from grader.judge.written import grades_folder, marks, record_answers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def course(tmp_path) -> Path:
    """A copy of course.yml whose grades/13 holds three students' recorded answers."""
    (tmp_path / "course.yml").write_text((ROOT / "course.yml").read_text(encoding="utf-8"),
                                         encoding="utf-8")
    for d in ("solutions", "exercises", "hidden_tests", "examples", "tests"):
        (tmp_path / d).symlink_to(ROOT / d)
    answer("alice", 'ANSWER_Q1 = "Attention mixes tokens; the FFN works per token."\n'
           'ANSWER_Q2 = "=HYPERLINK(\\"http://evil\\")"\n', tmp_path)
    answer("bob", 'ANSWER_Q1 = "  ＝1+1 attention"\n', tmp_path)
    answer("carol", 'ANSWER_Q1 = "YOUR ANSWER HERE"\n', tmp_path)  # no answer: no row
    return tmp_path / "course.yml"


def answer(sid: str, text: str, root: Path) -> None:
    written = config.load(root / "course.yml").lesson("13").written
    f = root / "class" / sid / "13_moe.py"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text, encoding="utf-8")
    record_answers(grades_folder(root, "13"), {sid: read_answers(f, written)})


def mark(course: Path, *args: str):
    return CliRunner().invoke(cli.main, ["mark", "--course", str(course), "--lesson", "13",
                                         *args])


def exported(course: Path, tmp_path: Path) -> list[dict]:
    res = mark(course, "--export", str(tmp_path / "m.csv"))
    assert res.exit_code == 0, res.output
    return list(csv.DictReader(io.StringIO((tmp_path / "m.csv").read_text(
        encoding="utf-8-sig"))))


def imported(course: Path, tmp_path: Path, rows: list[dict]):
    f = tmp_path / "in.csv"
    with open(f, "w", newline="", encoding="utf-8") as out:
        w = csv.DictWriter(out, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return mark(course, "--import", str(f))


def current(course: Path):
    return marks(grades_folder(course.parent, "13"))


def test_export_has_one_row_per_answer_and_no_cell_runs_as_a_formula(course, tmp_path):
    rows = exported(course, tmp_path)
    assert [(r["student_id"], r["question"]) for r in rows] == [
        ("alice", "q1"), ("bob", "q1"), ("alice", "q2")]  # by question, then student
    assert rows[2]["answer"].startswith("'=HYPERLINK")
    assert rows[1]["answer"].startswith("'  ＝1+1")
    assert {r["status"] for r in rows} == {"awaiting"} and all(r["answer_hash"] for r in rows)


def test_points_rubric_blank_and_clear(course, tmp_path):
    rows = exported(course, tmp_path)
    rows[0].update(points="", rubric="attn_mixes;ffn_per_token", comment="=good")
    rows[1].update(points="0.5", comment="see §1.1")
    res = imported(course, tmp_path, rows)
    assert res.exit_code == 0, res.output
    assert "applied 2, unchanged 1, refused 0" in res.output
    got = current(course)
    assert got[("alice", "q1")].rubric == ("attn_mixes", "ffn_per_token")
    assert got[("alice", "q1")].comment == "=good" and got[("bob", "q1")].points == 0.5
    rows = exported(course, tmp_path)  # prefilled with the marks, formula inert
    assert rows[0]["rubric"] == "attn_mixes;ffn_per_token" and rows[0]["comment"] == "'=good"
    assert rows[1]["points"] == "0.5"
    blank = [dict(r, points="", rubric="", comment="") for r in rows]
    blank[1]["comment"] = "-"  # clears bob's comment, keeps his points
    res = imported(course, tmp_path, blank)
    assert "applied 1, unchanged 2" in res.output
    got = current(course)
    assert got[("bob", "q1")].comment == "" and got[("bob", "q1")].points == 0.5
    assert got[("alice", "q1")].comment == "=good"  # blank left it unchanged
    cleared = [dict(r, points="-", rubric="-", comment="-") for r in rows[:2]]
    res = imported(course, tmp_path, cleared)
    assert "applied 2" in res.output and not current(course)


def test_a_row_whose_answer_changed_is_refused_by_its_row(course, tmp_path):
    rows = exported(course, tmp_path)
    answer("bob", 'ANSWER_Q1 = "a new answer"\n', course.parent)
    rows[0]["points"], rows[1]["points"] = "2", "1"
    res = imported(course, tmp_path, rows)
    assert res.exit_code == 1
    assert "applied 1, unchanged 1, refused 1" in res.output
    assert "row 3 (bob, q1): the answer changed since the export" in res.output
    assert ("bob", "q1") not in current(course)


def test_a_file_with_nothing_to_update_is_an_error(course, tmp_path):
    rows = exported(course, tmp_path)
    res = imported(course, tmp_path, rows)
    assert res.exit_code == 1 and "nothing to update" in res.output
    assert "3 row(s) unchanged, 0 refused" in res.output


def test_bad_cells_are_refused_naming_the_row(course, tmp_path):
    rows = exported(course, tmp_path)
    rows[0]["points"] = "3"      # above q1's 2 points
    rows[1]["rubric"] = "nope"
    rows[2]["points"] = "0.3"    # not a multiple of 1/1024
    res = imported(course, tmp_path, rows)
    assert res.exit_code == 1 and "nothing to update" in res.output
    assert "row 2 (alice, q1): points 3 is not a multiple of 1/1024 from 0 to 2" in res.output
    assert "row 3 (bob, q1): rubric item(s) nope are not in the question's rubric" in res.output
    assert "row 4 (alice, q2): points 0.3" in res.output


def test_a_file_without_the_columns_says_how_to_make_one(course, tmp_path):
    (tmp_path / "x.csv").write_text("id,score\nalice,1\n", encoding="utf-8")
    res = mark(course, "--import", str(tmp_path / "x.csv"))
    assert res.exit_code == 1 and "lacks the column(s) student_id, question" in res.output
