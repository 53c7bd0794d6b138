"""Lesson 13's own cases: broken files cost what they break, tracebacks show only the
student's file, malformed replies and a dead worker. The contract every lesson keeps
(solution full, stub zero, mistakes named in their part, correct variants) is
tests/e2e/test_contract.py, through `grader selftest`."""
from pathlib import Path

import pytest

from grader.judge import runner
from grader.judge.reference import load_mistakes

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "13_moe.py"


def grade_all(ctx, slot, files: dict[str, Path]) -> dict:
    out: dict[str, dict] = {}
    subs = [runner.Submission(sid, path) for sid, path in files.items()]
    runner.grade_many(ctx, subs, slot, lambda r: out.__setitem__(r.student_id, r))
    return out


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory) -> dict:
    """Everything graded in one pytest session, as a TA's run would."""
    tmp = tmp_path_factory.mktemp("subs")
    source = SOLUTION.read_text()
    files = {"solution": SOLUTION}
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
        # top-k's own error, raised in every test: where top-k + 1 raises and elsewhere
        "route_raises": source.replace(
            "    scores = F.softmax(gate(x_flat), dim=-1)\n",
            "    raise RuntimeError(\"selected index k out of range\")\n", 1),
    }
    mistakes = {m.id: m for m in load_mistakes(ROOT / "hidden_tests" / "13_moe" / "mistakes.yml")}
    broken["topk_plus_one"] = mistakes["topk_plus_one"].apply(source)
    for name, text in broken.items():
        files[f"broken-{name}"] = tmp / f"{name}.py"
        files[f"broken-{name}"].write_text(text)
    files["broken-missing"] = tmp / "nothing-here.py"
    return grade_all(ctx13, slot13, files)


def lost(record) -> set[str]:
    return {p for p, v in record.parts.items() if v.score < v.max_score}


def test_every_part_has_tests_for_k1_k2_and_both_dtypes(graded):
    cases = [dict(t.case) for t in graded["solution"].tests]
    for want in ({"dtype": "float32"}, {"dtype": "float64"}, {"K": 1, "norm_topk_prob": True},
                 {"K": 2, "norm_topk_prob": True}, {"K": 2, "norm_topk_prob": False}):
        assert any(all(c.get(k) == v for k, v in want.items()) for c in cases), want
    assert not any("seed" in c for c in cases)  # students see test ids and cases


def test_empty_file(graded):
    r = graded["broken-empty"]
    assert (r.status, r.score) == ("unreadable", 0.0)
    assert "empty" in r.problem


def test_missing_file(graded):
    r = graded["broken-missing"]
    assert (r.status, r.score) == ("missing", 0.0)
    assert "no file was submitted" in r.problem


def test_syntax_error_names_the_line(graded):
    r = graded["broken-syntax"]
    assert (r.status, r.score) == ("import_error", 0.0)
    assert "SyntaxError" in r.problem and "line" in r.problem
    assert "13_moe.py" in r.import_traceback


def test_absent_package(graded):
    r = graded["broken-absent_package"]
    assert r.status == "import_error"
    assert "einops" in r.problem and "provides" in r.problem


def test_missing_function_costs_its_part(graded):
    r = graded["broken-no_route"]
    assert r.status == "graded"
    assert lost(r) == {"router"}
    messages = " ".join(t.message for t in r.tests if t.part == "router")
    assert "route" in messages and "AttributeError" in messages


def test_missing_function_is_pointed_to_in_the_stub(graded, course):
    """The course's own skeleton has no `route`: the page says where the grader's is."""
    import ast

    from grader.pages.feedback import render_student

    stub = ROOT / "exercises" / "13_moe.py"
    line = next(n.lineno for n in ast.parse(stub.read_text()).body
                if getattr(n, "name", "") == "route")
    page = render_student(graded["broken-no_route"], course, "13", "en")
    assert f"no route, which the grader calls: it is in exercises/13_moe.py, line {line}" in page
    assert "exercises/13_moe.py, line" not in render_student(graded["solution"], course, "13")


def test_wrong_return_type_costs_its_part(graded):
    r = graded["broken-route_returns_list"]
    assert "router" in lost(r)
    assert r.parts["ffn"].score == 2.0 and r.parts["dispatch"].score == 2.5
    assert any("tuple (scores, topk_weight, topk_idx)" in t.message for t in r.tests)


def test_a_mistake_is_named_where_its_code_raises_as_its_variant_does(graded, course):
    """Issue 54: top-k + 1 raises where K = E (top-k of more than E experts), and a
    test that raised was never diagnosed, so the part named nothing. Its variant raises
    the same error in those tests, and its results are the student's in the others."""
    r = graded["broken-topk_plus_one"]
    router = [t for t in r.tests if t.part == "router" and not t.practice]
    raised = [t for t in router if t.error]
    assert raised and len(raised) < len(router)
    assert all("K=3" in t.name and "E=3" in t.name for t in raised)
    assert r.parts["router"].diagnosis is not None
    assert r.parts["router"].diagnosis.id == "topk_plus_one"
    assert all(t.diagnosis.id == "topk_plus_one" for t in router if not t.passed)
    from markupsafe import escape

    from grader.pages.feedback import render_student
    for lang in ("en", "zh"):  # named on the page, with its hint, in both languages
        page = render_student(r, course, "13", lang)
        named = r.parts["router"].diagnosis
        assert str(escape(named.title[lang])) in page and str(escape(named.hint[lang])) in page


def test_a_known_mistake_that_makes_moe_raise_is_charged_once(graded):
    """Each mistake charged once (issue 54): top-k + 1 makes the student's own layer
    raise in moe's K = E cases, which `explained` never excuses; the stand-in round runs
    the layer with the grader's route, and it passes, so moe keeps its points."""
    r = graded["broken-topk_plus_one"]
    assert r.parts["router"].score < r.parts["router"].max_score
    assert r.parts["moe"].stand_in == {"parts": ["router"], "passed": True}
    assert r.parts["moe"].score == r.parts["moe"].max_score


def test_code_that_raises_in_every_test_is_named_as_no_mistake(graded):
    """The same error in every test matches top-k + 1 where its variant raises, and
    nowhere else: a raise alone names nothing."""
    r = graded["broken-route_raises"]
    assert all(t.error for t in r.tests if t.part == "router" and not t.passed)
    assert r.parts["router"].score == 0 and r.parts["router"].diagnosis is None


def test_traceback_shows_only_the_students_file(graded):
    r = graded["broken-import_error_inside"]
    errors = [t.error for t in r.tests if t.part == "dispatch"]
    assert errors and all("scipy_not_there" in e["message"] for e in errors)
    for e in errors:
        assert "13_moe.py" in e["traceback"]
        assert "probes.py" not in e["traceback"] and "hidden_tests" not in e["traceback"]
        assert "test_dispatch" not in e["traceback"]


def test_malformed_results_are_the_students_not_a_grader_error(ctx13, slot13, tmp_path):
    """A reply of the wrong structure (forged here by patching the sender of the child's
    own harness, found up the import's stack, so route's results come back empty) is
    charged to the student, not to the grader."""
    forge = (
        "import sys\n"
        "_f = sys._getframe()\n"
        "while not hasattr(_f.f_locals.get('self'), 'protocol'):\n"
        "    _f = _f.f_back\n"
        "_proto = _f.f_locals['self'].protocol\n"
        "_send = _proto.send\n"
        "def _forged(sock, obj, *rest):\n"
        "    if isinstance(obj, dict) and 'topk_idx' in (obj.get('result') or {}):\n"
        "        obj = {'ok': True, 'result': {}}\n"
        "    return _send(sock, obj, *rest)\n"
        "_proto.send = _forged\n")
    path = tmp_path / "13_moe.py"
    path.write_text(SOLUTION.read_text() + "\n" + forge)
    r = runner.grade(ctx13, runner.Submission("m", path), slot13)
    router = [t for t in r.tests if t.part == "router"]
    assert all(not t.passed for t in router)
    assert all(t.error["kind"] == "malformed" for t in router)
    assert "could not be checked" in router[0].message
    assert r.parts["ffn"].score == 2.0 and r.parts["moe"].score == 2.0


def test_a_dead_worker_is_a_grader_fault_not_a_zero(course, ctx13):
    """If the sandboxed worker itself dies, no student is scored: the run stops with
    a grader error, and the submission is graded again on the next run."""
    import os
    import signal

    from grader.sandbox import bwrap, slot as slots

    lesson = course.lesson("13")  # a sandbox of its own, not the tests' shared one
    slot = slots.open_slot(course.path(lesson.probes), bwrap.probe().reason is None,
                           tuple(lesson.preload))
    os.killpg(slot.sandbox.proc.pid, signal.SIGKILL)
    slot.sandbox.proc.wait()
    assert not slot.alive()
    out: list[dict] = []
    with pytest.raises(RuntimeError, match="sandboxed worker failed"):
        runner.grade_many(ctx13, [runner.Submission("x", SOLUTION)], slot, out.append)
    assert out == []
    slot.close()
