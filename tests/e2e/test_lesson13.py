"""The hidden tests of lesson 13, tested: the solution scores full marks, the stub
zero, every known mistake loses points in its own part only and is named, correct
re-orderings of the arithmetic are not penalised, broken files cost what they break."""
from pathlib import Path

import pytest

from grader import runner
from grader.reference import load_mistakes
from grader.release import make_stub

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "13_moe.py"
MISTAKES = load_mistakes(ROOT / "hidden_tests" / "13_moe" / "mistakes.yml")
CORRECT = sorted((ROOT / "tests" / "fixtures" / "lesson13" / "correct").glob("*.py"))
PARTS = {"ffn", "router", "dispatch", "aux_loss", "moe"}


def grade_all(course, slot, files: dict[str, Path]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    subs = [runner.Submission(sid, path) for sid, path in files.items()]
    runner.grade_many(course, "13", subs, slot, lambda r: out.__setitem__(r["student_id"], r))
    return out


@pytest.fixture(scope="module")
def graded(course, slot13, tmp_path_factory) -> dict[str, dict]:
    """Everything graded in one pytest session, as a TA's run would."""
    tmp = tmp_path_factory.mktemp("subs")
    source = SOLUTION.read_text()
    files = {"solution": SOLUTION, "stub": ROOT / "exercises" / "13_moe.py"}
    for m in MISTAKES:
        files[f"mistake-{m.id}"] = tmp / f"{m.id}.py"
        files[f"mistake-{m.id}"].write_text(m.apply(source))
    for path in CORRECT:
        files[f"correct-{path.stem}"] = path
    broken = {
        "empty": "",
        "syntax": source.replace("def route(", "def route(:", 1),
        "absent_package": "import einops\n" + source,
        "no_route": source.replace("def route(", "def _route(", 1).replace(
            "scores, topk_weight, topk_idx = route(", "scores, topk_weight, topk_idx = _route("),
        "route_returns_list": source.replace(
            "    return scores, topk_weight, topk_idx", "    return [scores, topk_weight]"),
        "import_error_inside": source.replace(
            "    y = torch.zeros_like(x_flat)", "    import scipy_not_there\n"
            "    y = torch.zeros_like(x_flat)", 1),
    }
    for name, text in broken.items():
        files[f"broken-{name}"] = tmp / f"{name}.py"
        files[f"broken-{name}"].write_text(text)
    files["broken-missing"] = tmp / "nothing-here.py"
    return grade_all(course, slot13, files)


def lost(record: dict) -> set[str]:
    return {p for p, v in record["parts"].items() if v["score"] < v["max_score"]}


def test_solution_scores_full_marks(graded):
    r = graded["solution"]
    assert r["status"] == "graded"
    assert r["score"] == r["max_score"] == 10.0
    assert all(t["diagnosis"] is None for t in r["tests"])


def test_stub_scores_zero_with_not_implemented(graded):
    r = graded["stub"]
    assert r["score"] == 0.0 and lost(r) == PARTS
    assert all("not implemented" in t["message"] for t in r["tests"])


def test_every_part_has_tests_for_k1_k2_and_both_dtypes(graded):
    names = " ".join(t["name"] for t in graded["solution"]["tests"])
    for needle in ("float32", "float64", "1-True", "2-True", "2-False"):
        assert needle in names


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_known_mistake_loses_points_in_its_part_only(graded, mistake):
    r = graded[f"mistake-{mistake.id}"]
    assert r["status"] == "graded"
    assert lost(r) == {mistake.part}, r["parts"]


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_known_mistake_is_named(graded, mistake):
    part = graded[f"mistake-{mistake.id}"]["parts"][mistake.part]
    assert part["diagnosis"]["id"] == mistake.id
    assert part["diagnosis"]["hint"]["zh"] and part["diagnosis"]["hint"]["en"]


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_variants_get_full_marks_and_no_diagnosis(graded, path):
    r = graded[f"correct-{path.stem}"]
    assert r["score"] == r["max_score"], [t["message"] for t in r["tests"] if t["message"]]
    assert all(p["diagnosis"] is None for p in r["parts"].values())


def test_empty_file(graded):
    r = graded["broken-empty"]
    assert (r["status"], r["score"]) == ("unreadable", 0.0)
    assert "empty" in r["problem"]


def test_missing_file(graded):
    r = graded["broken-missing"]
    assert (r["status"], r["score"]) == ("missing", 0.0)
    assert "no file was submitted" in r["problem"]


def test_syntax_error_names_the_line(graded):
    r = graded["broken-syntax"]
    assert (r["status"], r["score"]) == ("import_error", 0.0)
    assert "SyntaxError" in r["problem"] and "line" in r["problem"]
    assert "13_moe.py" in r["import_traceback"]


def test_absent_package(graded):
    r = graded["broken-absent_package"]
    assert r["status"] == "import_error"
    assert "einops" in r["problem"] and "provides" in r["problem"]


def test_missing_function_costs_its_part(graded):
    r = graded["broken-no_route"]
    assert r["status"] == "graded"
    assert lost(r) == {"router"}
    messages = " ".join(t["message"] for t in r["tests"] if t["part"] == "router")
    assert "route" in messages and "AttributeError" in messages


def test_wrong_return_type_costs_its_part(graded):
    r = graded["broken-route_returns_list"]
    assert "router" in lost(r)
    assert r["parts"]["ffn"]["score"] == 2.0 and r["parts"]["dispatch"]["score"] == 2.5
    assert any("tuple (scores, topk_weight, topk_idx)" in t["message"] for t in r["tests"])


def test_traceback_shows_only_the_students_file(graded):
    r = graded["broken-import_error_inside"]
    errors = [t["error"] for t in r["tests"] if t["part"] == "dispatch"]
    assert errors and all("scipy_not_there" in e["message"] for e in errors)
    for e in errors:
        assert "13_moe.py" in e["traceback"]
        assert "probes.py" not in e["traceback"] and "hidden_tests" not in e["traceback"]
        assert "test_dispatch" not in e["traceback"]


def test_committed_stub_is_generated_from_the_solution():
    assert make_stub(SOLUTION.read_text()) == (ROOT / "exercises" / "13_moe.py").read_text()


def test_malformed_results_are_the_students_not_a_grader_error(course, slot13, tmp_path):
    """A reply of the wrong structure (forged here by patching the worker's sender so
    route's results come back empty) is charged to the student, not to the grader."""
    forge = (
        "import sys\n"
        "_proto = sys.modules['__main__'].protocol\n"
        "_send = _proto.send\n"
        "def _forged(sock, obj):\n"
        "    if isinstance(obj, dict) and 'topk_idx' in (obj.get('result') or {}):\n"
        "        obj = {'ok': True, 'result': {}}\n"
        "    return _send(sock, obj)\n"
        "_proto.send = _forged\n")
    path = tmp_path / "13_moe.py"
    path.write_text(SOLUTION.read_text() + "\n" + forge)
    r = runner.grade(course, "13", runner.Submission("m", path), slot13)
    router = [t for t in r["tests"] if t["part"] == "router"]
    assert all(t["outcome"] == "failed" for t in router)
    assert all(t["error"]["kind"] == "malformed" for t in router)
    assert "could not be checked" in router[0]["message"]
    assert r["parts"]["ffn"]["score"] == 2.0 and r["parts"]["moe"]["score"] == 2.0


def test_a_dead_worker_is_a_grader_fault_not_a_zero(course):
    """If the sandboxed worker itself dies, no student is scored: the run stops with
    a grader error, and the submission is graded again on the next run."""
    import os
    import signal

    from tests.conftest import open_slot

    slot = open_slot(course, "13")
    os.killpg(slot.sandbox.proc.pid, signal.SIGKILL)
    slot.sandbox.proc.wait()
    assert not slot.alive()
    out: list[dict] = []
    with pytest.raises(RuntimeError, match="sandboxed worker failed"):
        runner.grade_many(course, "13", [runner.Submission("x", SOLUTION)], slot, out.append)
    assert out == []
    slot.close()
