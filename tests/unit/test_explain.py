"""The page's sentences for contrast, structure and composite parts, in both languages,
and silence where the record supports none."""
from __future__ import annotations

from pathlib import Path

import pytest
from markupsafe import escape

from grader import config
from grader.judge import disclosed
from grader.pages import explain, feedback
from grader.record import GradeRecord, TestRecord

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = [{"kind": "nonfinite", "value": "NaN", "where": [0, 3], "count": 2, "total": 8},
          {"kind": "zeros"}, {"kind": "sign"}, {"kind": "factor", "factor": 0.5},
          {"kind": "shift", "shift": 0.25}, {"kind": "transpose"},
          {"kind": "permutation", "moved": [[0, 1], [1, 0]], "count": 2, "total": 4},
          {"kind": "rows", "rows": [3, 5], "count": 2, "total": 10,
           "shared": [{"field": "expert", "op": "has", "value": 3}]}]


@pytest.fixture(scope="module")
def course() -> config.Course:
    return config.load(ROOT / "course.yml")


def _test(name: str, part: str, case: dict, passed: bool, **over) -> dict:
    return {"name": name, "part": part, "outcome": "passed" if passed else "failed",
            "case": [["test", name.split("[")[0]], *map(list, case.items())], "checks": [], "error": None,
            "diagnosis": None, "message": "" if passed else "output: differs", **over}


def _record(course: config.Course) -> GradeRecord:
    """dispatch fails exactly when K >= 2 (rows share expert 3); moe fails after it."""
    claim = {"kind": "rows", "rows": [1, 4], "count": 2, "total": 10,
             "shared": [{"field": "expert", "op": "has", "value": 3}]}
    failing_check = {"name": "output", "passed": False, "message": "differs by 0.3",
                     "max_abs_diff": 0.3, "atol": 1e-5, "rtol": 1e-4, "structure": claim}
    tests = [_test(f"test_dispatch[E=4 K={k} {d} N=10]", "dispatch",
                   {"E": 4, "K": k, "dtype": d}, k == 1,
                   checks=[] if k == 1 else [failing_check])
             for d in ("float32", "float64") for k in (1, 2, 3)]
    tests += [_test(f"{f}[E=4 K={k}]", "moe", {"E": 4, "K": k}, k == 1, composite=True)
              for f in ("test_train", "test_eval") for k in (1, 2)]
    parts = {k: {"score": p.points, "max_score": p.points, "passed": 1, "tests": 1}
             for k, p in course.lesson("13").parts.items()}
    return GradeRecord.from_json({"student_id": "s", "lesson": "13", "status": "graded",
                                  "score": 5.0, "max_score": 10.0, "parts": parts,
                                  "tests": tests})


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c["kind"])
def test_every_claim_has_a_sentence_in_every_language(claim):
    texts = [explain.structure_text(claim, feedback.STRINGS[lang]) for lang in ("en", "zh")]
    assert all(texts) and texts[0] != texts[1]
    assert "{" not in "".join(texts)


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c["kind"])
def test_a_graded_cases_claim_has_a_sentence_that_names_no_row(claim):
    """A graded case's claim (`disclosed.claim`) keeps its kind and counts: its sentence
    says them, in every language, and no row or element it named."""
    kept = disclosed.claim(claim)
    texts = [explain.structure_text(kept, feedback.STRINGS[lang]) for lang in ("en", "zh")]
    assert all(texts) and texts[0] != texts[1] and "{" not in "".join(texts)
    if kept != claim:
        assert not any(p in text for text in texts for p in ("[0, 3]", "3, 5", "row 1"))


def test_an_unknown_claim_says_nothing():
    assert explain.structure_text({"kind": "guess"}, feedback.STRINGS["en"]) == ""


def test_the_contrast_leads_the_part_and_the_composite_part_points_back(course):
    page = feedback.render_student(_record(course), course, "13", "en")
    dispatch = page[page.index('id="part-dispatch"'):page.index('id="part-aux_loss"')]
    assert "Fails exactly in the cases where K ≥ 2" in dispatch
    assert "Only 2 of the 10 rows differ; the others match" in dispatch  # graded: no rows
    assert "1, 4" not in dispatch
    assert "Every wrong row has expert 3, and no right row has it." in dispatch
    moe = page[page.index('id="part-moe"'):]
    assert ("This part calls the parts before it, and dispatch failed in a way no known "
            "mistake explains. Such a mistake is not forgiven here: wherever it changes this "
            "part&#39;s results, it costs points here too, on top of those lost in it.") in moe
    assert moe.index("This part calls") < moe.index("Fails exactly in the cases where K = 2")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_named_mistake_costs_no_moe_points_and_the_page_says_so(course, lang):
    """dispatch explained by a known mistake: moe is compared with the reference carrying
    it, so moe's own failures are something else, and the page says so, not that
    dispatch's points are taken again."""
    from grader.record import Diagnosis
    record = _record(course)
    record.parts["dispatch"].diagnosis = Diagnosis("overwrite", {"en": "x", "zh": "x"},
                                                   {"en": "", "zh": ""})
    t = feedback.STRINGS[lang]
    page = feedback.render_student(record, course, "13", lang)
    moe = page[page.index('id="part-moe"'):]
    said = t["composite_explained"].format(parts="dispatch", them=t["composite_them_one"])
    assert str(escape(said)) in moe
    assert t["composite_unexplained"][:12] not in moe


def test_no_moe_box_for_a_file_that_never_imported(course):
    """Every part failed for the one import error the banner shows: no part is said to
    have failed "before" moe."""
    record = _record(course)
    record.problem = "SyntaxError: invalid syntax (13_moe.py, line 3)"
    for test in record.tests:
        test.outcome, test.checks = "failed", []
        test.error = {"kind": "import", "message": record.problem}
    page = feedback.render_student(record, course, "13", "en")
    assert "This part calls" not in page


def test_chinese_page(course):
    page = feedback.render_student(_record(course), course, "13", "zh")
    assert "恰好在 K ≥ 2 的用例上失败" in page and "每个出错的行都有 expert 3" in page
    assert "这一部分会调用前面的部分，而 dispatch 的失败没有已知错误能解释" in page
    assert "只要它改变了这一部分的结果，就也会在这里扣分，另外加上在它扣的分" in page


def test_silent_where_the_record_supports_nothing(course):
    record = _record(course)
    for test in record.tests:
        test.outcome, test.checks = "passed", []
    page = feedback.render_student(record, course, "13", "en")
    assert 'class="diag facts"' not in page
    t = feedback.STRINGS["en"]
    moe = [x for x in record.tests if x.part == "moe"]
    assert explain.composite_sentences(moe, ["dispatch"], set(), t) == []  # moe passes
    moe[0].outcome = "failed"
    assert explain.composite_sentences(moe, [], set(), t) == []            # its parts pass
    old = [TestRecord.from_json({"name": f"test_x[{i}]", "outcome": o})
           for i, o in enumerate(("failed", "passed"))]
    assert explain.contrast_sentences(old, t) == []                 # no case fields


def test_a_field_given_only_where_it_fails_and_no_co_feature():
    t = feedback.STRINGS["en"]
    tests = [TestRecord.from_json(d) for d in (
        {"outcome": "passed", "case": [["past", None], ["seq_length", 7]]},
        {"outcome": "passed", "case": [["past", None], ["seq_length", 7]]},
        {"outcome": "failed", "case": [["past", [2, 5, 3, 8]], ["seq_length", 3]]},
        {"outcome": "failed", "case": [["past", [1, 99, 4, 96]], ["seq_length", 1]]})]
    # seq_length ≠ 7 fits as well, a coincidence of these cases: never listed
    assert explain.contrast_sentences(tests, t) == [
        "Fails exactly when past is given: the tests without past pass."]


@pytest.mark.parametrize("lang, said", [
    ("en", "Fails exactly in the cases that leave rope_base at its default: every failing "
           "test does, and no passing test does."),
    ("zh", "恰好在让 rope_base 取默认值的用例上失败：所有失败的测试都是这样，通过的测试都不是。")])
def test_a_field_left_at_its_default_is_said_in_the_students_terms(lang, said):
    """Issue 54: the test table's None is "not given" (the probe leaves the argument at
    the student's default); "where rope_base = None" named a value no student passes."""
    tests = [TestRecord.from_json({"outcome": o, "case": [["dim", d], ["rope_base", b]]})
             for o, d, b in (("passed", 8, 1e4), ("passed", 16, 1e6), ("failed", 64, None),
                             ("failed", 96, None))]
    assert explain.contrast_sentences(tests, feedback.STRINGS[lang]) == [said]


ROUTER = [("3", "1", "float32", "10"), ("3", "3", "float64", "7"), ("4", "2", "float32", "10"),
          ("4", "1", "float64", "10"), ("8", "2", "float64", "12"), ("8", "1", "float32", "1")]


@pytest.mark.parametrize("lang, said", [
    ("en", "Passes only where K = E: the tests with K = E pass, all others fail."),
    ("zh", "只在 K = E 时通过：满足 K = E 的测试都通过，其余都失败。")])
def test_top_k_of_the_smallest_passes_only_where_k_is_e(lang, said):
    """Top-k taking the smallest scores: what the router's results support is K = E,
    alone (the one K = E case's K = 3 and N = 7 are coincidences, never said)."""
    tests = [TestRecord.from_json(
        {"name": f"{f}[E={e} K={k} {d} N={n}]", "outcome": "passed" if e == k else "failed",
         "case": [["test", f], ["E", int(e)], ["K", int(k)], ["dtype", d], ["N", int(n)]]})
        for e, k, d, n in ROUTER for f in ("test_route", "test_gradients")
        if f == "test_route" or d == "float64"]
    assert explain.contrast_sentences(tests, feedback.STRINGS[lang]) == [said]


def test_the_lesson_order_survives_a_store_that_sorts_keys(course):
    import json
    stored = json.loads(json.dumps(_record(course).to_json(), sort_keys=True))
    cases = [explain.case_fields(t) for t in GradeRecord.from_json(stored).tests]
    assert list(cases[0]) == ["test", "E", "K", "dtype"]
    assert explain.case_fields(TestRecord.from_json({"case": {"E": 4}})) == {}  # no pairs


ANSWERS = [{"kind": "ignores", "function": "load_balancing_loss", "argument": "topk_idx"},
           {"kind": "rows", "function": "dispatch"},
           {"kind": "dtype", "function": "route", "output": "scores", "dtype": "float32"}]


@pytest.mark.parametrize("found", ANSWERS, ids=lambda a: a["kind"])
def test_every_answer_has_a_sentence_in_every_language(found):
    texts = [explain.answer_text(found, feedback.STRINGS[lang]) for lang in ("en", "zh")]
    assert all(texts) and texts[0] != texts[1] and "{" not in "".join(texts)
    assert all(found["function"] in text for text in texts)
    assert explain.answer_text({"kind": "guess"}, feedback.STRINGS["en"]) == ""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_grader_check_says_what_the_page_says(course, lang):
    """Issue 26: `grader check` printed none of the page's contrast and structure
    sentences; its summary now holds the very list the page shows, part by part."""
    from grader.run import practice_output
    record = _record(course)
    page = feedback.student_context(record, course, "13", lang)
    report = practice_output.outcome(record, course, "13", [], lang)
    shown = {p["key"]: p["findings"] for p in page["parts"]}
    assert shown["dispatch"] and shown["moe"]
    assert {k: v["findings"] for k, v in report["parts"].items()} == shown


@pytest.mark.parametrize("lang, said", [
    ("en", "Fails in every test of this part but test_gradients, which passes."),
    ("zh", "这一部分除 test_gradients 以外的测试都失败，test_gradients 通过。")])
def test_every_test_but_one_fails_said_by_the_test_s_name(lang, said):
    """A part failing in every test function but one (a `+ 1` where y starts: only the
    gradients survive it) was "the tests with test = test_gradients pass"."""
    tests = [TestRecord.from_json(
        {"name": f"{f}[K={k}]", "outcome": "passed" if f == "test_gradients" else "failed",
         "case": [["test", f], ["K", k]]})
        for f in ("test_layout", "test_train", "test_eval", "test_gradients") for k in (1, 2)]
    assert explain.contrast_sentences(tests, feedback.STRINGS[lang]) == [said]


def test_a_precision_matter_is_named_first_and_the_formulas_box_is_left_out(course):
    """Issue 54: a layer computing its softmax in float32 fails only the float64 cases,
    by < 1e-6 relative; the page said "Compare your code with the lesson's formulas"."""
    def check(precision):
        return {"name": "y", "passed": False, "precision": precision}
    tests = [TestRecord.from_json({"name": f"test_x[{i}]", "part": "router", "outcome": o,
                                   "checks": c, "case": [["dtype", d]],
                                   "diagnosis": {"id": None} if o == "failed" else None})
             for i, (o, d, c) in enumerate((("passed", "float32", []),
                                            ("passed", "float32", []),
                                            ("failed", "float64", [check(True)]),
                                            ("failed", "float64", [check(True)])))]
    t = feedback.STRINGS["en"]
    said = feedback.part_findings(tests, None, [], set(), t)
    assert said[0].startswith("Fails only in the float64 tests, and there by about float32")
    assert feedback.STRINGS["zh"]["finding_precision"] in feedback.part_findings(
        tests, None, [], set(), feedback.STRINGS["zh"])
    record = GradeRecord.from_json({"student_id": "p", "lesson": "13", "status": "graded",
                                    "tests": [x.to_json() for x in tests], "parts": {
                                        "router": {"score": 1, "max_score": 2, "passed": 2,
                                                   "tests": 4}}})
    page = feedback.render_student(record, course, "13", "en")
    assert "Fails only in the float64 tests" in page
    assert "lesson&#39;s formulas" not in page
    tests[3].checks = [check(False)]  # one failure a formula's: no precision finding
    assert not explain.precision_sentences(tests, t)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_finding_that_explains_more_failing_tests_comes_first_everywhere(course, lang):
    """Issue 54: findings are listed by how many of the part's failing tests each
    explains. A dtype answer (the one float64 failing test) came before a structure
    claim found in all three failing tests, on the page, its top (Gradescope's output)
    and in `grader check`; a tie keeps the order of old (the contrast rule first)."""
    claim = {"name": "scores", "passed": False, "message": "differs", "atol": 1e-5,
             "rtol": 1e-4, "structure": {"kind": "factor", "factor": 0.5}}
    tests = [_test(f"test_route[K={k} {d}]", "router", {"K": k, "dtype": d}, k == 1,
                   checks=[] if k == 1 else [claim])
             for k, d in ((1, "float32"), (1, "float64"), (2, "float32"), (2, "float64"),
                          (3, "float32"))]
    answer = {"kind": "dtype", "function": "route", "output": "scores", "dtype": "float32"}
    parts = {k: {"score": p.points, "max_score": p.points, "passed": 1, "tests": 1}
             for k, p in course.lesson("13").parts.items()}
    parts["router"] = {"score": 0.8, "max_score": 2.0, "passed": 2, "tests": 5,
                       "answers": [answer]}
    record = GradeRecord.from_json({"student_id": "s", "lesson": "13", "status": "graded",
                                    "score": 8.8, "max_score": 10.0, "parts": parts,
                                    "tests": tests})
    t = feedback.STRINGS[lang]
    contrast = explain.contrast_sentences(record.tests, t)[0]
    structure = explain.structure_text(claim["structure"], t)
    dtype = explain.answer_text(answer, t)
    said = feedback.student_context(record, course, "13", lang)
    found = next(p["findings"] for p in said["parts"] if p["key"] == "router")
    assert [contrast in found[0], structure in found[1], dtype == found[2]] == [True] * 3
    from grader.run import practice_output
    assert practice_output.outcome(record, course, "13", [], lang)["parts"]["router"][
        "findings"] == found
    top = feedback.render_page_top(record, course, "13", lang)
    shown = [str(escape(x)) for x in found]
    assert top.index(shown[1]) < top.index(shown[2])
