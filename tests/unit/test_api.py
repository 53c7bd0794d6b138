"""grader.api, called as a script or a notebook calls it: no CLI, nothing printed."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grader import api
from grader.run.grading import NoSubmissions
from grader.store import Store

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course.yml"


def test_quiet_events_keep_what_a_run_tells(capsys):
    events = api.Quiet()
    events.note("3 roster rows left out")
    events.warn("a Moodle download no worksheet maps")
    events.unsandboxed()
    with events.grading(2) as progress:
        progress("done", {"student_id": "alice", "status": "graded"})
    assert events.notes[0] == "3 roster rows left out" and len(events.notes) == 2
    assert events.warnings == ["a Moodle download no worksheet maps"]
    assert capsys.readouterr() == ("", "")


def test_grade_class_of_an_empty_folder_says_so(tmp_path):
    with pytest.raises(NoSubmissions):
        api.grade_class(COURSE, "13", submissions=tmp_path, out=tmp_path / "out")


def test_grade_class_names_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no submissions at"):
        api.grade_class(COURSE, "13", submissions=tmp_path / "nowhere", out=tmp_path)


def _student(sid: str, passed: bool) -> dict:
    score = 2.0 if passed else 0.0
    test = {"name": "test_shape", "part": "ffn", "outcome": "passed" if passed else "failed",
            "score": score, "max_score": 2.0, "message": "" if passed else "output differs"}
    return {"student_id": sid, "score": score, "max_score": 2.0, "status": "graded",
            "sandboxed": True, "problem": "", "tests": [test],
            "parts": {"ffn": {"score": score, "max_score": 2.0, "passed": int(passed),
                              "tests": 1}}}


def test_export_writes_a_graded_class_from_its_scores_json(tmp_path):
    store = Store(tmp_path)
    store.scores_path.parent.mkdir(parents=True, exist_ok=True)
    store.scores_path.write_text(json.dumps(
        {"lesson": "13", "max_score": 2.0, "course": "minimind", "version": "v",
         "students": [_student("alice", True), _student("bob", False)]}))
    paths, unwritten = api.export(COURSE, "13", ["gradescope"], out=tmp_path)
    written = {p.stem: json.loads(p.read_text()) for p in paths if p.suffix == ".json"}
    assert {sid: doc["score"] for sid, doc in written.items()} == {"alice": 2.0, "bob": 0.0}
    assert all(p.is_relative_to(store.export_path) for p in paths)
    assert unwritten == []


def test_export_without_scores_json_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="scores.json"):
        api.export(COURSE, "13", ["gradescope"], out=tmp_path)


@pytest.mark.slow
def test_check_file_runs_the_practice_tests_on_the_solution():
    checked = api.check_file(COURSE, "13", ROOT / "solutions" / "13_moe.py")
    assert checked.status == 0, checked.outcome
    assert checked.record.tests and all(t.outcome == "passed" for t in checked.record.tests)
    # the shapes question's marks, as `grader check --json` prints them (practice_run.STEPS)
    assert list(checked.outcome["written"]) == ["q6"], checked.outcome


def test_the_authoring_guides_example_calls_what_exists():
    guide = (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\bapi\.([a-zA-Z_]+)\(", guide))
    assert named == {"Quiet", "grade_class", "check_file", "export"}
    assert all(callable(getattr(api, name, None)) for name in named)
