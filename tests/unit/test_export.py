"""Every export is checked against its format and against the scores.json it came from."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from grader.config import ConfigError, Course, Lesson, Part, Student
from grader.export import export, roster

GS_TOP = {"score": (int, float), "output": str, "output_format": str, "visibility": str,
          "stdout_visibility": str, "tests": list}
GS_TEST = {"score": (int, float), "max_score": (int, float), "status": str, "name": str,
           "number": str, "output": str, "output_format": str, "tags": list, "visibility": str}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
LTI_KEYS = {"userId", "scoreGiven", "scoreMaximum", "comment", "timestamp",
            "activityProgress", "gradingProgress"}


def make_course(roster_value=None, canvas_assignment_id=None) -> Course:
    parts = {"ffn": Part(points=2, title="Dense FFN"),
             "router": Part(points=3, title="Router", visibility="after_due_date")}
    lesson = Lesson(title="MoE", exercise="13_moe.py", solution=Path("s.py"),
                    stub=Path("e.py"), tests=Path("t"), parts=parts,
                    canvas_assignment_id=canvas_assignment_id)
    if roster_value is None:
        roster_value = {
            "alice": Student(name="Liddell, Alice", email="alice@u.edu", lms_id="4001",
                             sis_user_id="30000001", sis_login_id="al1", section="SEC-1"),
            "bob": Student(name="Bob Brown", email="bob@u.edu", lms_id="4002"),
            "carol": Student(name="Carol King", lms_id="4003"),
        }
    return Course(course="minimind-test", lessons={"13": lesson}, roster=roster_value)


def record(sid: str, status: str, passed: list[bool], problem: str = "") -> dict:
    """A scores.json student: 2 ffn tests (1 pt each), 3 router tests (1 pt each)."""
    names = [("ffn", "test_shape"), ("ffn", "test_output[float32-0]"),
             ("router", "test_topk"), ("router", "test_softmax"), ("router", "test_norm")]
    tests = [{"name": n, "part": p, "outcome": "passed" if ok else "failed",
              "score": 1.0 if ok else 0.0, "max_score": 1.0,
              "max_abs_diff": None if ok else 0.026, "message": "" if ok else "output differs",
              "diagnosis": None if ok else {"id": "gelu", "title": {"en": "GELU used",
                                                                    "zh": "用了 GELU"},
                                            "hint": {"en": "Use SiLU.", "zh": "用 SiLU。"}}}
             for (p, n), ok in zip(names, passed)]
    parts = {p: {"score": sum(t["score"] for t in tests if t["part"] == p),
                 "max_score": float(pts), "passed": sum(t["outcome"] == "passed" for t in tests
                                                        if t["part"] == p),
                 "tests": sum(t["part"] == p for t in tests)}
             for p, pts in (("ffn", 2), ("router", 3))}
    return {"student_id": sid, "score": sum(t["score"] for t in tests), "max_score": 5.0,
            "status": status, "sandboxed": True, "problem": problem, "parts": parts,
            "tests": tests}


@pytest.fixture
def scores() -> dict:
    return {"lesson": "13", "max_score": 5.0, "course": "minimind-test", "version": "abc",
            "students": [record("alice", "graded", [True, True, False, True, True]),
                         record("bob", "missing", [False] * 5, "no file was submitted"),
                         record("zed", "graded", [True] * 5)]}


def by_id(scores: dict) -> dict[str, dict]:
    return {s["student_id"]: s for s in scores["students"]}


def test_gradescope_results_match_format_and_scores(tmp_path, scores):
    paths = export(make_course(), "13", scores, tmp_path, ["gradescope"])
    files = {p.stem: p for p in paths if p.parent.name == "gradescope"}
    assert set(files) == {"alice", "bob", "zed"}
    for sid, student in by_id(scores).items():
        res = json.loads(files[sid].read_text())
        for key, kind in GS_TOP.items():
            assert isinstance(res[key], kind), key
        assert res["score"] == student["score"]
        assert res["visibility"] in VISIBILITY and res["stdout_visibility"] in VISIBILITY
        assert len(res["tests"]) == len(student["tests"])
        assert sum(t["score"] for t in res["tests"]) == pytest.approx(student["score"])
        assert len({t["number"] for t in res["tests"]}) == len(res["tests"])
        for t in res["tests"]:
            for key, kind in GS_TEST.items():
                assert isinstance(t[key], kind), key
            assert t["status"] in {"passed", "failed"} and t["visibility"] in VISIBILITY
            assert t["output_format"] in {"text", "html", "simple_format", "md", "ansi"}
            assert t["visibility"] == ("after_due_date" if t["tags"] == ["router"] else "visible")
    alice = json.loads(files["alice"].read_text())
    failed = next(t for t in alice["tests"] if t["status"] == "failed")
    assert failed["number"] == "2.1" and "Use SiLU." in failed["output"]
    assert "no file was submitted" in json.loads(files["bob"].read_text())["output"]


def test_canvas_csv_matches_format_and_scores(tmp_path, scores):
    course = make_course(canvas_assignment_id=901234)
    (path,) = [p for p in export(course, "13", scores, tmp_path, ["canvas"])
               if p.suffix == ".csv"]
    rows = list(csv.reader(path.open(newline="", encoding="utf-8")))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "Lesson 13 MoE (901234)"]
    assert "Points Possible" in rows[1][0] and float(rows[1][5]) == scores["max_score"]
    assert all(len(r) == 6 for r in rows)
    got = {r[1] or r[3]: float(r[5]) for r in rows[2:]}  # Canvas ID, else SIS login
    people = {"4001": "alice", "4002": "bob", "zed": "zed"}
    assert got == {k: by_id(scores)[sid]["score"] for k, sid in people.items()}
    assert rows[2] == ["Liddell, Alice", "4001", "30000001", "al1", "SEC-1", "4.0"]


def test_canvas_column_without_assignment_id(tmp_path, scores):
    (path,) = [p for p in export(make_course(), "13", scores, tmp_path, ["canvas"])
               if p.suffix == ".csv"]
    assert next(csv.reader(path.open()))[-1] == "Lesson 13 MoE"


def test_lti_score_objects(tmp_path, scores):
    (path,) = [p for p in export(make_course(), "13", scores, tmp_path, ["lti"])
               if p.suffix == ".jsonl"]
    objs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(objs) == 3
    expected = {"4001": by_id(scores)["alice"], "4002": by_id(scores)["bob"],
                "zed": by_id(scores)["zed"]}
    for o in objs:
        assert set(o) == LTI_KEYS
        assert isinstance(o["userId"], str) and isinstance(o["comment"], str)
        assert isinstance(o["scoreGiven"], float) and isinstance(o["scoreMaximum"], float)
        assert o["scoreGiven"] == expected[o["userId"]]["score"]
        assert o["scoreMaximum"] == 5.0
        assert o["timestamp"].endswith("Z")
        datetime.fromisoformat(o["timestamp"].replace("Z", "+00:00"))
        assert o["activityProgress"] in {"Initialized", "Started", "InProgress",
                                         "Submitted", "Completed"}
        assert o["gradingProgress"] == "FullyGraded"
    bob = next(o for o in objs if o["userId"] == "4002")
    assert bob["activityProgress"] == "Initialized"
    assert bob["comment"].startswith("No file was submitted. ffn 0/2;")


def test_moodle_csv(tmp_path, scores):
    (path,) = [p for p in export(make_course(), "13", scores, tmp_path, ["moodle"])
               if p.name == "moodle.csv"]
    rows = list(csv.DictReader(path.open(newline="", encoding="utf-8")))
    header = list(rows[0])
    assert header == ["username", "Lesson 13 MoE", "Feedback: Lesson 13 MoE"]
    assert {r["username"]: float(r["Lesson 13 MoE"]) for r in rows} == {
        s["student_id"]: s["score"] for s in scores["students"]}
    assert all(r["Feedback: Lesson 13 MoE"] for r in rows)


def test_moodle_uses_email_when_everyone_has_one(tmp_path, scores):
    scores["students"] = scores["students"][:2]
    (path,) = [p for p in export(make_course(), "13", scores, tmp_path, ["moodle"])
               if p.name == "moodle.csv"]
    rows = list(csv.DictReader(path.open(newline="")))
    assert [r["email"] for r in rows] == ["alice@u.edu", "bob@u.edu"]


def test_roster_mismatch_is_reported_not_dropped(tmp_path, scores):
    paths = export(make_course(), "13", scores, tmp_path, ["canvas", "lti"])
    report = (tmp_path / "roster_report.txt").read_text()
    assert tmp_path / "roster_report.txt" in paths
    assert "zed" in report.split("not in the roster")[1].split("In the roster")[0]
    assert "carol" in report.split("In the roster but not")[1]
    assert "zed" in (tmp_path / "canvas.csv").read_text()


def test_roster_from_csv(tmp_path, scores):
    (tmp_path / "roster.csv").write_text(
        "student_id,name,email,lms_id,sis_user_id,sis_login_id,section\n"
        "alice,\"Liddell, Alice\",alice@u.edu,4001,30000001,al1,SEC-1\n"
        "bob,Bob Brown,bob@u.edu,4002,,,\n", encoding="utf-8")
    course = make_course(Path("roster.csv")).model_copy(update={"root": tmp_path})
    people = roster.load(course)
    assert people["alice"] == make_course().roster["alice"]
    assert people["bob"].lms_id == "4002"


def test_roster_from_canvas_gradebook_export(tmp_path):
    (tmp_path / "gb.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Lesson 12 (5)\n"
        "    Points Possible,,,,,10.00\n"
        "\"Alvarez, Ava\",4001,30000001,av123456,SEC-001,9.0\n", encoding="utf-8")
    people = roster.read_csv(tmp_path / "gb.csv")
    assert people == {"av123456": Student(name="Alvarez, Ava", lms_id="4001",
                                          sis_user_id="30000001", sis_login_id="av123456",
                                          section="SEC-001")}


def test_roster_csv_without_ids_is_an_error(tmp_path):
    (tmp_path / "r.csv").write_text("name,email\nA,a@u\n")
    with pytest.raises(ConfigError, match="student_id"):
        roster.read_csv(tmp_path / "r.csv")


def test_rejects_unknown_format_and_wrong_lesson(tmp_path, scores):
    with pytest.raises(ValueError, match="unknown export"):
        export(make_course(), "13", scores, tmp_path, ["blackboard"])
    with pytest.raises(ValueError, match="lesson"):
        export(make_course(), "13", {**scores, "lesson": "12"}, tmp_path, ["canvas"])


def test_nbgrader_gradebook_round_trip(tmp_path, scores):
    api = pytest.importorskip("nbgrader.api")
    course = make_course()
    earlier = {**scores, "students": [{**s, "tests": s["tests"][:-1]} for s in scores["students"]]}
    export(course, "13", earlier, tmp_path, ["nbgrader"])  # before the last test existed
    (db,) = [p for p in export(course, "13", scores, tmp_path, ["nbgrader"]) if p.suffix == ".db"]
    nbgrader = Path(sys.executable).parent / "nbgrader"

    def nbgrader_export() -> dict[str, dict]:
        subprocess.run([str(nbgrader), "export", f"--db=sqlite:///{db}",
                        f"--CourseDirectory.course_id={course.course}"],
                       cwd=tmp_path, check=True, capture_output=True)
        return {r["student_id"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}

    grades = nbgrader_export()
    for s in scores["students"]:
        assert grades[s["student_id"]]["assignment"] == "lesson_13"
        assert float(grades[s["student_id"]]["score"]) == s["score"]
        assert float(grades[s["student_id"]]["max_score"]) == s["max_score"]
    assert grades["alice"]["last_name"] == "Liddell"
    with api.Gradebook(f"sqlite:///{db}", course_id=course.course) as gb:  # a TA's override
        grade = gb.find_grade("router:test_topk", "13_moe", "lesson_13", "alice")
        grade.manual_score = 1.0
        gb.db.commit()
    export(course, "13", scores, tmp_path, ["nbgrader"])  # a re-export keeps it
    assert float(nbgrader_export()["alice"]["score"]) == by_id(scores)["alice"]["score"] + 1
