"""Every export is checked against its format and against the scores.json it came from."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import warnings
from datetime import datetime
from pathlib import Path

import pytest

from grader import points
from grader.intake import roster
from grader.config import ConfigError, Course, Lesson, Part, Student
from grader.deliver.export import export as write_exports
from grader.deliver.export.cells import cell
from grader.record import ClassScores, GradeRecord, TestRecord
from grader.store import Store, safe_name, scores_entry

GS_TOP = {"score": (int, float), "output": str, "output_format": str, "visibility": str,
          "stdout_visibility": str, "tests": list}
GS_TEST = {"score": (int, float), "max_score": (int, float), "status": str, "name": str,
           "number": str, "output": str, "output_format": str, "tags": list, "visibility": str}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def export(course: Course, lesson_key: str, scores: dict, out_dir: Path,
           formats: list[str]) -> list[Path]:
    """The exports of a scores.json document, read as `grader export` reads it."""
    return write_exports(course, lesson_key, ClassScores.from_json(scores), out_dir, formats)


def opened(path: Path, **kwargs) -> io.StringIO:
    """The file's text, read and closed at once (an open file left to the collector is a
    ResourceWarning, and warnings fail the suite)."""
    with path.open(**kwargs) as f:
        return io.StringIO(f.read())


LTI_KEYS = {"userId", "scoreGiven", "scoreMaximum", "comment", "timestamp",
            "activityProgress", "gradingProgress"}


def make_course(roster_value=None, canvas_assignment_id=None, **options) -> Course:
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
    return Course(course="minimind-test", lessons={"13": lesson}, roster=roster_value,
                  **options)


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
    assert set(files) == {"alice", "zed"}  # bob handed nothing in: no Gradescope submission
    for sid, student in by_id(scores).items():
        if sid not in files:
            continue
        res = json.loads(files[sid].read_text())
        for key, kind in GS_TOP.items():
            assert isinstance(res[key], kind), key
        assert res["score"] == student["score"]
        assert res["visibility"] in VISIBILITY and res["stdout_visibility"] in VISIBILITY
        assert len(res["tests"]) == len(student["tests"])
        assert sum(t["score"] for t in res["tests"]) == student["score"]
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
    assert alice["output_format"] == "html"
    assert "Total: 4 / 5" in alice["output"] and "<strong>GELU used</strong>: Use SiLU." \
        in alice["output"]
    assert alice["output"].index("Dense FFN") < alice["output"].index("Router")


def test_gradescope_names_a_likely_cause_only_when_a_known_mistake_fits(tmp_path, scores):
    """A diagnosis with no mistake (`{"id": None}`: diagnosable, none fits) names none:
    no empty "Likely cause:" line under the test."""
    alice = by_id(scores)["alice"]
    failed = next(t for t in alice["tests"] if t["outcome"] == "failed")
    failed["diagnosis"] = {"id": None}
    paths = export(make_course(), "13", scores, tmp_path, ["gradescope"])
    res = json.loads(next(p for p in paths if p.stem == "alice").read_text())
    out = next(t for t in res["tests"] if t["status"] == "failed")["output"]
    assert out.startswith("output differs") and "Likely cause" not in out


def test_canvas_csv_matches_format_and_scores(tmp_path, scores):
    course = make_course(canvas_assignment_id=901234)
    (path,) = [p for p in export(course, "13", scores, tmp_path, ["canvas"])
               if p.suffix == ".csv"]
    rows = list(csv.reader(opened(path, newline="", encoding="utf-8")))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "Lesson 13 MoE (901234)"]
    assert "Points Possible" in rows[1][0] and float(rows[1][5]) == scores["max_score"]
    assert all(len(r) == 6 for r in rows)
    got = {r[1] or r[3]: r[5] for r in rows[2:]}  # Canvas ID, else SIS login
    assert got == {"4001": "4.0", "4002": "", "zed": "5.0"}  # bob handed nothing in
    assert rows[2] == ["Liddell, Alice", "4001", "30000001", "al1", "SEC-1", "4.0"]


def test_canvas_column_without_assignment_id(tmp_path, scores):
    (path,) = [p for p in export(make_course(), "13", scores, tmp_path, ["canvas"])
               if p.suffix == ".csv"]
    assert next(csv.reader(opened(path)))[-1] == "Lesson 13 MoE"


def test_lti_score_objects(tmp_path, scores):
    (path,) = [p for p in export(make_course(), "13", scores, tmp_path, ["lti"])
               if p.suffix == ".jsonl"]
    objs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(objs) == 3
    expected = {"4001": by_id(scores)["alice"], "zed": by_id(scores)["zed"]}
    for o in (o for o in objs if o["userId"] in expected):
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
    assert bob["gradingProgress"] == "NotReady" and "scoreGiven" not in bob  # blank


def lti_objects(course: Course, scores: dict, out: Path) -> dict[str, dict]:
    (path,) = [p for p in export(course, "13", scores, out, ["lti"]) if p.suffix == ".jsonl"]
    return {o["userId"]: o for o in map(json.loads, path.read_text().splitlines())}


@pytest.mark.parametrize("applied_by", ["grader", "lms", "none"])
def test_lti_carries_the_hand_in_time_only_when_the_lms_applies_the_rule(
        tmp_path, scores, applied_by):
    """Issue 56: with applied_by lms the score carries the hand-in time (AGS's
    submission.submittedAt and Canvas's extension's submitted_at), so Canvas applies its
    late policy once; otherwise it says new_submission false, since Canvas dates a new
    submission without a time when the score arrives and would call it late."""
    from grader.config import LatePolicy
    from grader.deliver.export.lti import CANVAS_SUBMISSION

    course = make_course()
    course.lessons["13"] = course.lessons["13"].model_copy(
        update={"late": LatePolicy(applied_by=applied_by)})
    handed = {**scores, "students": [
        {**s, "handed_in": "2026-10-02T11:10:00+08:00"} if s["student_id"] == "alice" else s
        for s in scores["students"]]}
    objs = lti_objects(course, handed, tmp_path)
    alice, carol = objs["4001"], objs["zed"]  # zed: no hand-in time known
    if applied_by == "lms":
        assert alice["submission"] == {"submittedAt": "2026-10-02T03:10:00.000Z"}
        assert alice[CANVAS_SUBMISSION] == {"submitted_at": "2026-10-02T03:10:00.000Z"}
    else:
        assert "submission" not in alice
        assert alice[CANVAS_SUBMISSION] == {"new_submission": False}
    assert "submission" not in carol and carol[CANVAS_SUBMISSION] == {"new_submission": False}
    without = lti_objects(make_course(), handed, tmp_path / "no-rule")  # no late rule
    assert set(without["4001"]) == LTI_KEYS


def test_lti_upload_sends_the_hand_in_time_the_export_writes(scores):
    """`grader upload --to lti` sends the bodies `grader export --to lti` writes: with
    applied_by lms, the hand-in time goes with the score."""
    from grader.config import LatePolicy
    from grader.deliver.upload.lti import Outcome, scores_to_send

    course = make_course()
    course.lessons["13"] = course.lessons["13"].model_copy(
        update={"late": LatePolicy(applied_by="lms")})
    handed = {**scores, "students": [
        {**s, "handed_in": "2026-10-02T03:10:00+00:00"} if s["student_id"] == "alice" else s
        for s in scores["students"]]}
    sent = dict(scores_to_send(course, "13", ClassScores.from_json(handed), Outcome()))
    assert sent["alice"]["submission"] == {"submittedAt": "2026-10-02T03:10:00.000Z"}
    assert "submission" not in sent["bob"]  # no hand-in time known


def test_export_says_what_the_lms_does_with_the_late_rule():
    from grader.config import LatePolicy
    from grader.deliver.export import late_notes

    course = make_course()
    assert late_notes(course, "13", ["canvas", "lti", "moodle"]) == []
    for who in ("grader", "lms"):
        course.lessons["13"] = course.lessons["13"].model_copy(
            update={"late": LatePolicy(applied_by=who)})
        said = " ".join(late_notes(course, "13", ["canvas", "lti", "moodle"]))
        if who == "grader":
            assert "Canvas late policy must be off" in said and "new_submission: false" in said
        else:
            assert "submission.submittedAt" in said and "Moodle applies none" in said


def moodle_rows(course: Course, scores: dict, out: Path) -> list[dict]:
    (path,) = [p for p in export(course, "13", scores, out, ["moodle"])
               if p.name == "moodle.csv"]
    return list(csv.DictReader(opened(path, newline="", encoding="utf-8")))


def test_moodle_csv_without_roster_uses_student_ids_as_usernames(tmp_path, scores):
    rows = moodle_rows(make_course(roster_value={}), scores, tmp_path)
    assert list(rows[0]) == ["username", "Lesson 13 MoE", "Feedback: Lesson 13 MoE"]
    assert {r["username"]: r["Lesson 13 MoE"] for r in rows} == {
        "alice": "4.0", "bob": "", "zed": "5.0"}
    assert all(r["Feedback: Lesson 13 MoE"] for r in rows)
    assert not (tmp_path / "roster_report.txt").exists()  # no roster: no one is "not in it"


@pytest.mark.parametrize("kind, want", [
    ("username", {"al1": "4.0", "bob": ""}),          # SIS login, else the student id
    ("email", {"alice@u.edu": "4.0", "bob@u.edu": ""}),
    ("idnumber", {"30000001": "4.0"}),
])
def test_moodle_identifier_is_the_chosen_one_for_every_row(tmp_path, scores, kind, want):
    rows = moodle_rows(make_course(moodle_identifier=kind), scores, tmp_path)
    assert list(rows[0])[0] == kind
    assert {r[kind]: r["Lesson 13 MoE"] for r in rows} == want
    report = (tmp_path / "roster_report.txt").read_text()
    left_out = report.split("Not written")[1]
    assert "moodle: zed: not in the roster" in left_out  # never under another identifier
    assert ("moodle: bob:" in left_out) == (kind == "idnumber")


def test_moodle_email_is_not_dropped_for_everyone_when_one_lacks_it(tmp_path, scores):
    """The old file switched every row to usernames when one email was missing."""
    course = make_course(moodle_identifier="email", roster_value={
        "alice": Student(email="alice@u.edu"), "bob": Student(), "zed": Student(
            email="zed@u.edu")})
    rows = moodle_rows(course, scores, tmp_path)
    assert [r["email"] for r in rows] == ["alice@u.edu", "zed@u.edu"]
    assert "moodle: bob: no email in the roster" in (tmp_path / "roster_report.txt").read_text()


def test_unmatched_rows_are_printed_by_grader_export(tmp_path, scores):
    out = tmp_path / "out"
    out.mkdir()
    (out / "scores.json").write_text(json.dumps(scores))
    (tmp_path / "t").mkdir()
    (tmp_path / "s.py").write_text("")
    (tmp_path / "course.yml").write_text(
        "course: c\nmoodle_identifier: email\nroster: {alice: {email: a@u.edu}}\n"
        "lessons:\n  '13': {title: MoE, exercise: 13_moe.py, solution: s.py, stub: e.py,"
        " tests: t, parts: {ffn: {points: 2}, router: {points: 3}}}\n")
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "export", "--course",
                           str(tmp_path / "course.yml"), "--lesson", "13", "--to", "moodle",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    # a graded student without a row fails the export (issue 25), the file still written
    assert proc.returncode == 1 and "2 graded student(s) have no row" in proc.stderr, \
        proc.stderr
    assert "moodle: zed: not in the roster" in proc.stderr
    rows = list(csv.DictReader(opened(out / "export" / "moodle.csv")))
    assert [r["email"] for r in rows] == ["a@u.edu"]


@pytest.mark.parametrize("missing", ["blank", "zero"])
def test_missing_submission_is_blank_or_zero_in_every_lms_file(tmp_path, scores, missing):
    course = make_course(missing=missing)
    export(course, "13", scores, tmp_path, ["canvas", "moodle", "lti"])
    want = "" if missing == "blank" else "0.0"
    canvas = {r[1]: r[5] for r in csv.reader(opened(tmp_path / "canvas.csv"))}
    assert canvas["4002"] == want and canvas["4001"] == "4.0"
    moodle = {r["username"]: r["Lesson 13 MoE"]
              for r in csv.DictReader(opened(tmp_path / "moodle.csv"))}
    assert moodle["bob"] == want
    lti = {o["userId"]: o for o in map(json.loads,
                                       (tmp_path / "lti_scores.jsonl").read_text().splitlines())}
    assert lti["4002"].get("scoreGiven") == (None if missing == "blank" else 0.0)
    assert lti["4002"]["gradingProgress"] == ("NotReady" if missing == "blank"
                                              else "FullyGraded")


def test_canvas_user_id_from_a_bulk_download_goes_into_id(tmp_path, scores):
    """A Canvas bulk download names files with the numeric Canvas user id; unrostered,
    that id must land in ID (Canvas matches it first), not in SIS Login ID."""
    scores["students"].append({**scores["students"][2], "student_id": "98765"})
    export(make_course(), "13", scores, tmp_path, ["canvas"])
    rows = {r[0]: r for r in csv.reader(opened(tmp_path / "canvas.csv"))}
    assert rows["98765"][1:4] == ["98765", "", ""]
    assert rows["zed"][1:4] == ["", "", "zed"]


def test_roster_mismatch_is_reported_not_dropped(tmp_path, scores):
    paths = export(make_course(), "13", scores, tmp_path, ["canvas", "lti"])
    report = (tmp_path / "roster_report.txt").read_text()
    assert tmp_path / "roster_report.txt" in paths
    assert "zed" in report.split("not in the roster")[1].split("In the roster")[0]
    assert "carol" in report.split("In the roster but not")[1]
    assert "zed" in (tmp_path / "canvas.csv").read_text()


def test_a_fixed_roster_leaves_no_stale_report(tmp_path, scores):
    export(make_course(), "13", scores, tmp_path, ["canvas"])
    assert (tmp_path / "roster_report.txt").exists()
    course = make_course(roster_value={s["student_id"]: Student() for s in scores["students"]})
    assert (tmp_path / "roster_report.txt") not in export(course, "13", scores, tmp_path,
                                                          ["canvas"])
    assert not (tmp_path / "roster_report.txt").exists()


def test_roster_from_csv(tmp_path, scores):
    (tmp_path / "roster.csv").write_text(
        "student_id,name,email,lms_id,sis_user_id,sis_login_id,section\n"
        "alice,\"Liddell, Alice\",alice@u.edu,4001,30000001,al1,SEC-1\n"
        "bob,Bob Brown,bob@u.edu,4002,,,\n", encoding="utf-8")
    course = make_course(Path("roster.csv")).model_copy(update={"root": tmp_path})
    people = roster.load(course).students
    assert people["alice"] == make_course().roster["alice"]
    assert people["bob"].lms_id == "4002"


def test_roster_from_canvas_gradebook_export(tmp_path):
    (tmp_path / "gb.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Lesson 12 (5)\n"
        "    Points Possible,,,,,10.00\n"
        "\"Alvarez, Ava\",4001,30000001,av123456,SEC-001,9.0\n", encoding="utf-8")
    people = roster.read_csv(tmp_path / "gb.csv").students
    assert people == {"av123456": Student(name="Alvarez, Ava", lms_id="4001",
                                          sis_user_id="30000001", sis_login_id="av123456",
                                          section="SEC-001")}


CANVAS_EXPORT = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Lesson 13 (5)\n"
    "    Points Possible,,,,,10.00\n"
    "\"Alvarez, Ava\",4001,30000001,av123456,SEC-001,9.0\n"
    "\"Student, Test\",4999,,,SEC-001,\n"
    "\"Nobody, No\",,,,SEC-001,\n")


def test_a_canvas_export_with_its_test_student_is_a_roster(tmp_path):
    """Canvas's test student has no SIS ids but a Canvas ID: it is a student of that id
    and name (issue 25: it was graded and exported as "12399", and called a row
    "without a student id"); a row with no id at all is left out and named."""
    (tmp_path / "gb.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    found = roster.read_csv(tmp_path / "gb.csv")
    assert list(found.students) == ["av123456", "4999"]
    assert found.students["4999"].name == "Student, Test"
    assert found.students["4999"].lms_id == "4999"
    assert found.skipped == ['gb.csv:5 "Nobody, No"']
    assert found.note() == ('1 roster row(s) without a student id left out of the roster: '
                            'gb.csv:5 "Nobody, No"')


def test_the_rows_left_out_of_the_roster_are_in_the_roster_report(tmp_path, scores):
    (tmp_path / "gb.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    course = make_course(Path("gb.csv")).model_copy(update={"root": tmp_path})
    export(course, "13", scores, tmp_path / "export", ["canvas"])
    report = (tmp_path / "export" / "roster_report.txt").read_text()
    assert report.count("Nobody, No") == 1 and "Student, Test" not in report
    assert "without a student id" in report


def test_a_duplicate_id_names_both_lines(tmp_path):
    (tmp_path / "r.csv").write_text("student_id,name\nann,A\nbob,B\nann,A2\n")
    with pytest.raises(ConfigError, match=r"r.csv:4: student id 'ann' appears twice "
                                          r"\(first on line 2\)"):
        roster.read_csv(tmp_path / "r.csv")


def test_without_a_roster_no_one_is_reported_as_not_in_it(tmp_path, scores):
    """Without a roster every student used to be 'graded but not in the roster'."""
    paths = export(make_course(roster_value={}).model_copy(update={"roster": None}), "13",
                   scores, tmp_path, ["canvas", "lti", "moodle"])
    assert tmp_path / "roster_report.txt" not in paths
    assert not (tmp_path / "roster_report.txt").exists()


def test_roster_csv_without_ids_is_an_error(tmp_path):
    (tmp_path / "r.csv").write_text("name,email\nA,a@u\n")
    with pytest.raises(ConfigError, match="student_id"):
        roster.read_csv(tmp_path / "r.csv")


def test_rejects_unknown_format_and_wrong_lesson(tmp_path, scores):
    with pytest.raises(ValueError, match="unknown export"):
        export(make_course(), "13", scores, tmp_path, ["blackboard"])
    with pytest.raises(ValueError, match="lesson"):
        export(make_course(), "13", {**scores, "lesson": "12"}, tmp_path, ["canvas"])


@pytest.mark.slow  # nbgrader's gradebook made (sqlalchemy)
def test_nbgrader_export_warns_of_nothing(tmp_path, scores):
    """It printed three SQLAlchemy warnings ("not in session") on every export."""
    pytest.importorskip("nbgrader.api")
    from sqlalchemy.exc import SAWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", SAWarning)
        export(make_course(), "13", scores, tmp_path, ["nbgrader"])


@pytest.mark.slow  # nbgrader's gradebook made and read back: ~8 CPU-s
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
        return {r["student_id"]: r for r in csv.DictReader(opened(tmp_path / "grades.csv"))}

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


@pytest.mark.slow  # nbgrader gradebooks made and read back
def test_nbgrader_total_is_the_final_score_after_late_credit(tmp_path, scores):
    """The cells carry the score before late credit and the notebook's penalty is the
    difference: nbgrader's own total is the final score, not a second penalty. A part
    an override changed cannot be carried by its test cells: named, not dropped."""
    pytest.importorskip("nbgrader.api")
    from grader.deliver.export import export_all

    course = make_course()
    alice = by_id(scores)["alice"]
    final = points.as_points(points.credited(points.units(alice["score"], "s"), 80))
    late = {**scores, "students": [
        {**s, "score": final, "raw_score": s["score"],
         "late": {"minutes": 191, "credit": 80, "applied_by": "grader"}}
        if s["student_id"] == "alice" else s for s in scores["students"]]}
    paths, unwritten = export_all(course, "13", ClassScores.from_json(late), tmp_path,
                                  ["nbgrader"])
    assert not unwritten
    (db,) = [p for p in paths if p.suffix == ".db"]
    subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "export",
                    f"--db=sqlite:///{db}", f"--CourseDirectory.course_id={course.course}"],
                   cwd=tmp_path, check=True, capture_output=True)
    grades = {r["student_id"]: r for r in csv.DictReader(opened(tmp_path / "grades.csv"))}
    assert float(grades["alice"]["score"]) == final < alice["score"]
    assert float(grades["alice"]["late_submission_penalty"]) == alice["score"] - final


@pytest.mark.slow  # nbgrader exports made and read back
def test_nbgrader_carries_a_part_override_as_manual_scores_and_clears_them_on_revoke(
        tmp_path, scores):
    """Issue 56: a part `grader override` changed is a human's score: written as
    nbgrader's manual_score on that part's cells (auto_score keeps the automatic one),
    read back through nbgrader's own Gradebook; a revoke clears what the grader wrote
    and keeps a manual score a TA has since changed in formgrader."""
    nbgrader_api = pytest.importorskip("nbgrader.api")
    from grader.deliver.export import export_all

    course = make_course()
    alice = by_id(scores)["alice"]  # ffn: 2 tests of 1 point, both passed
    ffn_set = {**scores, "students": [
        {**s, "score": s["score"] - 1.5, "parts": {**s["parts"], "ffn": {
            **s["parts"]["ffn"], "score": 0.5}}} if s["student_id"] == "alice" else s
        for s in scores["students"]]}
    paths, unwritten = export_all(course, "13", ClassScores.from_json(ffn_set), tmp_path,
                                  ["nbgrader"])
    assert not unwritten
    (db,) = [p for p in paths if p.suffix == ".db"]

    def ffn_cells() -> list[tuple[float | None, float | None, float]]:
        with nbgrader_api.Gradebook(f"sqlite:///{db}", course_id=course.course) as gb:
            return [(g.auto_score, g.manual_score, g.score)
                    for g in (gb.find_grade(f"ffn:{n}", "13_moe", "lesson_13", "alice")
                              for n in ("test_shape", "test_output[float32-0]"))]

    assert ffn_cells() == [(1.0, 0.5, 0.5), (1.0, 0.0, 0.0)]
    with nbgrader_api.Gradebook(f"sqlite:///{db}", course_id=course.course) as gb:
        assert gb.find_submission("lesson_13", "alice").score == alice["score"] - 1.5
    export_all(course, "13", ClassScores.from_json(scores), tmp_path, ["nbgrader"])  # revoked
    assert ffn_cells() == [(1.0, None, 1.0), (1.0, None, 1.0)]

    export_all(course, "13", ClassScores.from_json(ffn_set), tmp_path, ["nbgrader"])
    with nbgrader_api.Gradebook(f"sqlite:///{db}", course_id=course.course) as gb:
        gb.find_grade("ffn:test_shape", "13_moe", "lesson_13", "alice").manual_score = 0.75
        gb.db.commit()  # a TA changed it in formgrader
    _, unwritten = export_all(course, "13", ClassScores.from_json(scores), tmp_path,
                              ["nbgrader"])
    assert ffn_cells() == [(1.0, 0.75, 0.75), (1.0, None, 1.0)]
    assert unwritten == ["nbgrader: alice: cell ffn:test_shape keeps the manual score a TA "
                         "gave it in formgrader after the grader's override was revoked"]


# ------------------------------------------------------- exact totals over a class

# Lesson 13's shape: points and graded tests per part, and one practice test each.
CLASS_PARTS = {"ffn": (2, 8), "router": (2, 11), "dispatch": (2.5, 7), "aux_loss": (1.5, 9),
               "moe": (2, 11)}


def class_course() -> Course:
    parts = {name: Part(points=pts, title=name.title()) for name, (pts, _) in CLASS_PARTS.items()}
    lesson = Lesson(title="MoE", exercise="13_moe.py", solution=Path("s.py"),
                    stub=Path("e.py"), tests=Path("t"), parts=parts)
    return Course(course="minimind-test", lessons={"13": lesson})


def graded_record(sid: str, rate: float, rng) -> GradeRecord:
    """A student as the runner records one: points from grader.points, pass rate `rate`."""
    tests = [TestRecord(name=f"test_{'practice' if practice else 'case'}_{i}", part=name,
                        practice=practice,
                        outcome="passed" if rng.random() < rate else "failed")
             for name, (_, n) in CLASS_PARTS.items()
             for practice in (True, False) for i in range(1 if practice else n)]
    parts = points.award(class_course().lesson("13").parts, tests)
    return GradeRecord(student_id=sid, lesson="13", status="graded",
                       score=points.total(parts), max_score=points.total(parts, "max_score"),
                       parts=parts, tests=tests)


@pytest.fixture
def big_class(tmp_path) -> dict:
    """scores.json of 120 students with partial credit, written by the real Store."""
    import random

    rng = random.Random(13)
    store = Store(tmp_path / "out")
    ids = [f"s{i:03d}" for i in range(120)]
    for i, sid in enumerate(ids):
        rate = 1.0 if i == 0 else 0.0 if i == 1 else rng.random()
        store.save(graded_record(sid, rate, rng), "<html></html>")
    store.write_scores("13", "minimind-test", "v", class_course().lesson("13").max_score,
                       [scores_entry(store.load(sid)) for sid in ids])
    return json.loads((tmp_path / "out" / "scores.json").read_text(encoding="utf-8"))


def test_big_class_has_partial_credit_that_4_decimals_would_drift_on(big_class):
    """The fixture must be able to catch the old drift: many students whose tests,
    rounded to 4 decimals each, would not add up to their total."""
    drifted = 0
    for s in big_class["students"]:
        rounded = sum(round(t["score"], 4) for t in s["tests"])
        drifted += rounded != s["score"]
        assert s["max_score"] == 10.0
    assert drifted > 50
    assert len({s["score"] for s in big_class["students"]}) > 50


def test_gradescope_per_test_scores_add_up_to_scores_json(tmp_path, big_class):
    export(class_course(), "13", big_class, tmp_path / "export", ["gradescope"])
    for s in big_class["students"]:
        res = json.loads((tmp_path / "export" / "gradescope" / f"{s['student_id']}.json")
                         .read_text(encoding="utf-8"))
        assert res["score"] == s["score"]
        assert sum(t["score"] for t in res["tests"]) == s["score"]
        assert sum(t["max_score"] for t in res["tests"]) == s["max_score"] == 10.0
        practice = [t for t in res["tests"] if "practice" in t["tags"]]
        assert len(practice) == len(CLASS_PARTS)
        assert all(t["score"] == t["max_score"] == 0 for t in practice)
    full = json.loads((tmp_path / "export" / "gradescope" / "s000.json").read_text())
    assert full["score"] == 10.0 and sum(t["score"] for t in full["tests"]) == 10.0


def test_lms_files_equal_scores_json_exactly(tmp_path, big_class):
    course = class_course()
    out = tmp_path / "export"
    export(course, "13", big_class, out, ["canvas", "moodle", "lti"])
    want = {s["student_id"]: s["score"] for s in big_class["students"]}
    canvas = list(csv.reader(opened(out / "canvas.csv", newline="", encoding="utf-8")))
    assert float(canvas[1][5]) == 10.0
    assert {r[0]: float(r[5]) for r in canvas[2:]} == want
    moodle = list(csv.DictReader(opened(out / "moodle.csv", newline="", encoding="utf-8")))
    assert {r["username"]: float(r["Lesson 13 MoE"]) for r in moodle} == want
    lti = [json.loads(line) for line in (out / "lti_scores.jsonl").read_text().splitlines()]
    assert {o["userId"]: o["scoreGiven"] for o in lti} == want
    assert {o["scoreMaximum"] for o in lti} == {10.0}
    assert want["s000"] == 10.0 and want["s001"] == 0.0


@pytest.mark.slow  # a class's nbgrader gradebook read back
def test_nbgrader_gradebook_reads_back_scores_json_exactly(tmp_path, big_class):
    """nbgrader totals a submission with SQL SUM over its grades: it must give the
    very same floats."""
    api = pytest.importorskip("nbgrader.api")
    course = class_course()
    # nbgrader's API is slow (a query per grade): a slice, full and zero marks in it
    few = {**big_class, "students": big_class["students"][:10]}
    (db,) = [p for p in export(course, "13", few, tmp_path, ["nbgrader"]) if p.suffix == ".db"]
    with api.Gradebook(f"sqlite:///{db}", course_id=course.course) as gb:
        assert gb.find_assignment("lesson_13").max_score == 10.0
        for s in few["students"]:
            sub = gb.find_submission("lesson_13", s["student_id"])
            assert sub.score == s["score"], s["student_id"]
            assert sub.max_score == s["max_score"]
            for name, part in s["parts"].items():
                cells = [g for g in sub.notebooks[0].grades if g.cell.name.startswith(name + ":")]
                assert sum(g.score for g in cells) == part["score"]
        assert len(gb.find_notebook("13_moe", "lesson_13").grade_cells) == \
            sum(n for _, n in CLASS_PARTS.values())  # practice tests get no grade cell


# ------------------------------------------------------- names from the class

@pytest.mark.parametrize("text", [
    "=1+1", "+1", "-2", "@SUM(1)", "\tx", "\rx", '=HYPERLINK("http://x")', "|cmd",
    # behind leading spaces a spreadsheet trims on import, and fullwidth (NFKC) signs
    ' =HYPERLINK("http://x")', "\u00a0=1", "\u2003\u3000+1", "\u200b-1", "\ufeff@A1",
    "＝1+1", "＠SUM(1)", "｜cmd", "﹦1", " \t =1"])
def test_formula_text_is_neutralised(text):
    assert cell(text) == "'" + text


@pytest.mark.parametrize("value", ["alice", "Liddell, Alice", "", "a=b", 9.5, 0.0, 10,
                                   " alice", "\u00a0", "张伟", "ａｌｉｃｅ", "a|b", "-"[1:]])
def test_plain_text_and_numbers_are_unchanged(value):
    assert cell(value) == value and type(cell(value)) is type(value)


EVIL = ["../../x", "/etc/passwd", '=HYPERLINK("http://x")', "@SUM(1)", "+1", "-1", "..",
        "a/../b", "\tcmd", " =1+1", "\u00a0=2", "＝3", "|cmd"]


def evil_scores(scores: dict) -> dict:
    base = scores["students"][0]
    return {**scores, "students": [{**base, "student_id": sid} for sid in EVIL]}


def test_gradescope_file_names_are_safe_and_unique(tmp_path, scores):
    folder = tmp_path / "export" / "gradescope"
    paths = export(make_course(), "13", evil_scores(scores), tmp_path / "export",
                   ["gradescope"])
    files = [p for p in paths if p.suffix == ".json"]
    assert sorted(files) == sorted(folder.iterdir())
    assert {p.name for p in files} == {f"{safe_name(sid)}.json" for sid in EVIL}
    assert len(files) == len(EVIL)
    assert [p for p in tmp_path.rglob("*") if p.is_file()
            and folder not in p.parents and p.name != "roster_report.txt"] == []


def test_csv_cells_from_the_class_never_start_a_formula(tmp_path, scores):
    course = make_course(roster_value={
        sid: Student(name=sid, lms_id="@1", section="=cmd|' /C calc'!A0") for sid in EVIL})
    out = tmp_path / "export"
    export(course, "13", evil_scores(scores), out, ["canvas", "moodle"])
    for name in ("canvas.csv", "moodle.csv"):
        rows = list(csv.reader(opened(out / name, newline="", encoding="utf-8")))
        cells = [c for r in rows for c in r]
        assert not [c for c in cells if c.lstrip(" \u00a0")[:1] in ("=", "+", "-", "@",
                                                                  "|", "＝")], name
        assert "'" + '=HYPERLINK("http://x")' in cells and "'@SUM(1)" in cells
    canvas = list(csv.reader(opened(out / "canvas.csv", newline="", encoding="utf-8")))
    assert {float(r[5]) for r in canvas[2:]} == {scores["students"][0]["score"]}


@pytest.mark.parametrize("sid", ["../../x", "/etc/passwd", "..", "s123"])
def test_gradescope_autograder_names_the_student_folder_safely(tmp_path, sid):
    from grader.deliver import autograder_zip

    (tmp_path / "submission_metadata.json").write_text(json.dumps({"users": [{"sid": sid}]}))
    name = autograder_zip._student_id(tmp_path)
    assert name == safe_name(sid) and "/" not in name and not name.startswith(".")
    assert (tmp_path / "submissions" / name).resolve().parent == (tmp_path / "submissions")


def test_every_format_is_one_exporter_with_one_signature():
    """nbgrader's ExportPlugin as the anchor: one class per format, named by `--to`, and
    every `export` takes the same typed arguments (no format gets a signature of its own)."""
    import inspect

    from grader.deliver.export import FORMATS, Exporter, exporters

    found = exporters()
    assert list(found) == list(FORMATS)
    signatures = {inspect.signature(type(e).export) for e in found.values()}
    assert signatures == {inspect.signature(Exporter.export)}
    assert all(isinstance(e, Exporter) and e.to == name for name, e in found.items())



def test_gradescope_results_speak_the_exports_language(scores):
    """A zh export's results.json: the status line, a part's name, a known mistake's
    line and the page's top are Chinese, not course.yml's English (the failing test's
    own message, the check's words, is the test's)."""
    from grader.deliver.export.gradescope import results
    from grader.text.strings import STRINGS

    course = make_course()
    lesson = course.lessons["13"]
    parts = {**lesson.parts, "ffn": lesson.parts["ffn"].model_copy(update={"title_zh": "稠密 FFN"})}
    course = course.model_copy(update={"lessons": {"13": lesson.model_copy(update={"parts": parts})}})
    failing = next(t for t in by_id(scores)["alice"]["tests"] if t["outcome"] == "failed")
    failing["checks"] = [{"name": "output", "passed": False, "message": "2 of 4 values beyond",
                          "message_texts": {"en": "2 of 4 values beyond",
                                            "zh": "4 个值中有 2 个超出容差"}}]
    alice = next(s for s in ClassScores.from_json(scores).students if s.student_id == "alice")
    zh, en = results(course, "13", alice, language="zh"), results(course, "13", alice)
    assert zh["output"].startswith(f"<p>{STRINGS['zh']['gs_status_graded']}</p>")
    assert en["output"].startswith("<p>Graded.</p>") and "总分" not in en["output"]
    assert zh["tests"][0]["name"].startswith("稠密 FFN: ")
    failed = next(t for t in zh["tests"] if t["status"] == "failed")["output"]
    assert "可能的原因：用了 GELU" in failed and "Likely cause" not in failed
    assert failed.startswith("输出：4 个值中有 2 个超出容差")  # the check's own words, in zh
    assert next(t for t in en["tests"] if t["status"] == "failed")["output"].startswith(
        "output differs")  # English: the record's message as the run wrote it
