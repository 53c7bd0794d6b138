"""The feedback pages: escaping of untrusted text, both languages, every number shown."""
from __future__ import annotations

import copy
import html
from pathlib import Path

import pytest
from markupsafe import escape

from grader import config
from grader.pages import feedback, report
from grader.record import GradeRecord
from grader.text.shown import NON_FINITE
from grader.judge.tally import Tally

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>alert('x')</script>"


def render_student(record: dict, *args) -> str:
    """A page from a record in its stored form (results/<id>.json), as `grader report`."""
    return feedback.render_student(GradeRecord.from_json(record), *args)


def render_report(records: list[dict], *args) -> str:
    return report.render_report(Tally.of([GradeRecord.from_json(r) for r in records]), *args)


@pytest.fixture(scope="module")
def course() -> config.Course:
    return config.load(ROOT / "course.yml")


def _check(**over) -> dict:
    check = {"name": "output", "passed": False, "message": "differs by 0.0123",
             "max_abs_diff": 0.012345678, "max_rel_diff": 3.25, "atol": 1e-5, "rtol": 1e-4,
             "where": [1, 3, 17], "got_value": 0.4567, "ref_value": 0.4443,
             "got_shape": [2, 8, 64], "ref_shape": [2, 8, 64],
             "got_dtype": "float32", "ref_dtype": "float32",
             "heatmap": [[0.0, 2e-6, 0.003], [0.0123, NON_FINITE, 0.0]]}
    return {**check, **over}


def _test(name: str, part: str, passed: bool, **over) -> dict:
    test = {"name": name, "part": part, "outcome": "passed" if passed else "failed",
            "score": 0.25 if passed else 0.0, "max_score": 0.25, "max_abs_diff": None,
            "message": "", "duration_s": 0.01, "error": None, "diagnosis": None,
            "checks": [{"name": "output", "passed": True, "max_abs_diff": 1e-8}]}
    return {**test, **over}


def make_record(course: config.Course, student_id: str = "alice") -> dict:
    """A graded record with one diagnosed failure, one exception and passes elsewhere."""
    parts = {k: {"score": p.points, "max_score": p.points, "passed": 2, "tests": 2}
             for k, p in course.lesson("13").parts.items()}
    parts["router"].update(score=0.0, passed=0)
    parts["ffn"].update(score=1.0, passed=1)
    tests = [_test(f"test_{k}[{i}]", k, True) for k in parts for i in range(2)
             if k not in ("router", "ffn")]
    tests += [_test("test_output[float32-0]", "ffn", True),
              _test("test_output[float64-1]", "ffn", False,
                    checks=[_check(), _check(name="shape", max_abs_diff=None, heatmap=None,
                                             message="shape [16, 64], expected [2, 8, 64]",
                                             got_shape=[16, 64], ref_shape=[2, 8, 64])],
                    diagnosis={"id": None}),
              _test("test_route[0]", "router", False, checks=[_check(name="topk_weight")],
                    diagnosis={"id": "no_renorm",
                               "title": {"en": "top-k weights not renormalised",
                                         "zh": "top-k 权重没有重新归一化"},
                               "hint": {"en": "See #l13-principle 1.5", "zh": "见 1.5 节"}}),
              _test("test_route[1]", "router", False, checks=[],
                    error={"kind": "exception", "message": "ZeroDivisionError: division by zero",
                           "traceback": 'File "13_moe.py", line 40, in route\n    1/0',
                           "type": "ZeroDivisionError"})]
    return {"student_id": student_id, "lesson": "13", "sandboxed": True, "score": 7.0,
            "max_score": 10.0, "status": "graded", "problem": "", "import_traceback": "",
            "output": "hello from the student\n", "timing": {"cpu_s": 1.5, "elapsed_s": 2.25},
            "parts": parts, "tests": tests, "raw_log": {"secret": "RAW-REPORT-CONTENT"}}


def _practice(record: dict) -> dict:
    for test in record["tests"]:
        test["practice"] = True
    return record


def test_failing_check_numbers_all_appear(course):
    """A practice case's numbers are shown whole: its reference results ship anyway."""
    page = render_student(_practice(make_record(course)), course, "13", "en")
    for value in (0.012345678, 3.25, 1e-5, 1e-4, 0.4567, 0.4443):
        assert feedback.num(value) in page
    assert "[1, 3, 17]" in page and "[16, 64]" in page and "[2, 8, 64]" in page
    assert "float32" in page and "ZeroDivisionError" in page and 'line 40, in route' in page
    assert page.count('<svg class="heat"') == 2  # the shape check has no heatmap
    assert "[1, 0] 0.0123" in page and "NaN or inf" in page  # heatmap cell tooltip, legend
    assert "top-k weights not renormalised" in page and "See #l13-principle 1.5" in page
    assert "No known mistake matches" in page
    assert "hello from the student" in page
    assert "RAW-REPORT-CONTENT" not in page
    assert "Content-Security-Policy" in page


def test_a_graded_case_shows_its_count_beyond_and_no_element(course):
    """Issues 24 and 52: a graded case's card shows no value of the reference's and no
    fact of one element (a record stored before its checks kept none: position,
    largest difference, relative error, heatmap, which counts differ), each of which a
    resubmission could bisect a graded output from; the verdict's count beyond the
    tolerance, the tolerance and the shapes, and where elements can be seen instead."""
    record = make_record(course)
    record["tests"][-3]["checks"][0].update(
        outside=7, size=1024, axes={"rows": "tokens"},
        structure={"kind": "rows", "rows": [3, 5], "count": 2, "total": 16})
    record["tests"][-3]["pictures"] = [{"name": "tokens per expert", "labels": ["e0", "e1"],
                                        "got": [3.0, 5.0], "ref": [4.0, 5.0]}]
    for lang in ("en", "zh"):
        t = feedback.STRINGS[lang]
        page = render_student(record, course, "13", lang)
        for value in (0.012345678, 3.25, 0.4567, 0.4443):
            assert feedback.num(value) not in page, value
        assert "1, 3, 17" not in page and "3, 5" not in page and "e0" not in page
        assert "<svg" not in page  # no heatmap, no counts side by side
        assert t["worst_at"] not in page and t["max_rel"] not in page
        assert t["max_abs"] not in page and "1e0 – 1e1" not in page
        assert t["n_of_m"].format(n=7, m=1024) in page and "1e-05 + 0.0001" in page
        assert "[2, 8, 64]" in page and "float32" in page
        assert html.escape(t["s_rows_count"].format(count=2, total=16), quote=False) \
            in page.replace("&#39;", "'")
        assert html.escape(t["graded_no_elements"], quote=False) in page.replace("&#39;", "'")


def test_hostile_strings_are_escaped(course):
    record = make_record(course, student_id=HOSTILE)
    record["output"] = HOSTILE + "\x1b[31mred\x1b[0m\x00\u202egnp.exe" + "x" * 100_000
    record["tests"][-1]["error"]["message"] = HOSTILE
    record["tests"][-1]["error"]["traceback"] = HOSTILE
    record["tests"][-2]["checks"][0]["message"] = HOSTILE
    record["tests"][-2]["diagnosis"]["hint"] = {"en": HOSTILE}
    for page in (render_student(record, course, "13", "en"),
                 render_report([record], course, "13", "en")):
        assert "<script" not in page
        assert "\x1b" not in page and "\x00" not in page and "\u202e" not in page
    page = render_student(record, course, "13", "en")
    assert html.escape(HOSTILE, quote=False) in page.replace("&#39;", "'")
    assert "more characters cut" in page and len(page) < 200_000


def test_both_languages(course):
    record = make_record(course)
    en = render_student(record, course, "13", "en")
    zh = render_student(record, course, "13", "zh")
    assert 'lang="en"' in en and "Your results match" in en
    assert 'lang="zh-CN"' in zh and "你的结果与" in zh and "top-k 权重没有重新归一化" in zh
    assert course.lesson("13").parts["router"].title_zh in zh
    assert "班级报告" in render_report([record], course, "13", "zh")
    assert course.language in ("en", "zh")
    assert render_student(record, course, "13") == (en if course.language == "en" else zh)
    with pytest.raises(ValueError):
        render_student(record, course, "13", "fr")


def test_missing_file_record(course):
    problem = "no file was submitted"
    error = {"kind": "missing", "message": problem, "traceback": "", "type": ""}
    record = make_record(course, student_id="bob")
    record.update(status="missing", problem=problem, score=0.0, output="", sandboxed=False)
    record.pop("timing")
    record["parts"] = {k: {**v, "score": 0.0, "passed": 0} for k, v in record["parts"].items()}
    record["tests"] = [{**t, "outcome": "failed", "score": 0.0, "checks": [], "error": error,
                        "message": problem, "diagnosis": None} for t in record["tests"]]
    page = render_student(record, course, "13", "en")
    assert "No file was submitted" in page and problem in page
    assert "Graded without the sandbox" in page
    assert "tests could not run for the reason shown at the top" in page
    assert page.count(problem) == 1  # the banner, not once per test


def test_repeated_errors_are_shown_once(course):
    record = make_record(course)
    error = {"kind": "not_implemented", "message": "NotImplementedError", "traceback": "tb-line",
             "type": "NotImplementedError"}
    record["tests"] = [_test(f"test_aux[{i}]", "aux_loss", False, error=error, checks=[])
                       for i in range(4)]
    page = render_student(record, course, "13", "en")
    assert page.count("tb-line") == 1 and "3 more tests failed with the same error" in page
    assert "Not implemented yet" in page


def test_class_report(course):
    good = make_record(course, "carol")
    good.update(score=10.0, timing={"elapsed_s": 9.5, "cpu_s": 1.0})
    broken = copy.deepcopy(make_record(course, "dave"))
    broken.update(status="timeout", problem="ran longer than 120 s", score=0.0,
                  timing={"elapsed_s": 120.0, "cpu_s": 1.0})
    records = [make_record(course), good, broken]
    page = render_report(records, course, "13", "en")
    assert "Class report" in page and "ran longer than 120 s" in page
    assert "top-k weights not renormalised" in page and "no_renorm" in page
    assert "test_route[0]" in page and "0 / 3" in page  # per-test pass rate
    slowest = page[page.index("Slowest submissions"):]
    assert slowest.index("dave") < slowest.index("carol") < slowest.index("alice")
    assert page.count("<svg") >= 3 and "RAW-REPORT-CONTENT" not in page
    assert "No known mistake was diagnosed" in render_report([], course, "13", "en")


def test_a_result_keeps_only_the_heatmaps_its_page_draws(course):
    """Four numeric failures in a part, each with two heatmaps, and one in another part:
    the page draws the first heatmap of the first OPEN_FAILURES cards of each part; the
    stored record keeps those alone, and its page is the same, byte for byte."""
    record = GradeRecord.from_json(_practice(make_record(course)))
    twice = [_check(), _check(name="aux")]
    record.tests += [GradeRecord.from_json({"tests": [_test(f"test_moe[{i}]", "moe", False,
                                                            checks=[dict(c) for c in twice],
                                                            practice=True)]})
                     .tests[0] for i in range(4)]
    kept = feedback.stored(record)

    def maps(r: GradeRecord) -> list[tuple[str, str]]:
        return [(t.name, c["name"]) for t in r.tests for c in t.checks if c.get("heatmap")]

    assert maps(kept) == [("test_output[float64-1]", "output"), ("test_route[0]", "topk_weight"),
                          ("test_moe[0]", "output"), ("test_moe[1]", "output")]
    assert len(maps(record)) == 2 + 2 * 4  # the record itself is not changed
    # a passed check keeps its name alone: the page counts it, the audit names it
    passed = [c for t in kept.tests for c in t.checks if c.get("passed")]
    assert passed and all(set(c) == {"name", "passed"} for c in passed)
    assert any("max_abs_diff" in c for t in record.tests for c in t.checks if c.get("passed"))
    for lang in ("en", "zh"):
        assert feedback.render_student(kept, course, "13", lang) == \
            feedback.render_student(record, course, "13", lang)
    assert feedback.stored(kept) is kept  # nothing more to drop


def test_many_numeric_failures_fold_after_the_first(course):
    record = make_record(course)
    record["tests"] = [_test(f"test_route[{i}]", "router", False, checks=[_check()])
                       for i in range(5)]
    page = render_student(record, course, "13", "en")
    folded = page[page.index("3 more failing tests"):]
    assert "test_route[1]" not in folded and "test_route[2]" in folded


@pytest.mark.parametrize("lang, same, folded", [
    ("en", "1 more test failed with the same error", "1 more failing test<"),
    ("zh", "另有 1 个测试因同样的错误失败", "另外 1 个未通过的测试")])
def test_one_thing_is_said_in_the_singular(course, lang, same, folded):
    """Issue 54: "1 failing tests"; a count of one takes its `_one` form, in both
    languages."""
    record = make_record(course)
    error = {"kind": "not_implemented", "message": "NotImplementedError",
             "traceback": "tb-line", "type": "NotImplementedError"}
    record["tests"] = ([_test(f"test_aux[{i}]", "aux_loss", False, error=error, checks=[])
                        for i in range(2)]
                       + [_test(f"test_route[{i}]", "router", False, checks=[_check()])
                          for i in range(3)])
    page = render_student(record, course, "13", lang)
    assert same in page and folded in page
    assert "1 more tests" not in page and "1 more failing tests" not in page


def test_a_heatmap_red_in_every_cell_is_not_drawn(course):
    """Issue 54: a heatmap beyond the tolerance everywhere added length and said
    nothing; the card's next failing check with an informative one is drawn instead."""
    record = _practice(make_record(course))
    red = [[0.5, 0.2, NON_FINITE], [0.3, 0.4, 0.9]]
    for test in record["tests"]:
        if test["outcome"] == "failed":
            test["checks"] = [_check(name="all_red", heatmap=red), _check(name="some")]
    page = render_student(record, course, "13", "en")
    assert '<svg class="heat"' in page
    assert "[1, 2] 0.9<" not in page and "[0, 2] 0.003<" in page  # the second map drawn
    for test in record["tests"]:
        if test["outcome"] == "failed":
            test["checks"] = [_check(name="all_red", heatmap=red)]
    assert '<svg class="heat"' not in render_student(record, course, "13", "en")


def test_points_are_shown_with_at_most_two_decimals():
    from grader.pages.feedback import points

    assert [points(v) for v in (9.0908203125, 2.0, 2.5, 0.0, 1.5 - 1 / 1024)] == \
        ["9.09", "2", "2.5", "0", "1.5"]


def test_points_round_half_up_as_the_lms_shows_them_everywhere(course):
    """Issue 51: 8.125 was 8.12 on the page (Python rounds half to even), 8.13 in
    Moodle, and the class report showed 9.77002. One rule, half up, everywhere."""
    from grader.pages import report
    from grader.deliver.export.one_line import text
    from grader.pages.feedback import points
    from grader.record import GradeRecord, PartRecord
    from grader.judge.tally import Tally

    assert [points(v) for v in (8.125, 0.125 + 2, 9.77001953125, 1 / 1024, 7.998046875)] == \
        ["8.13", "2.13", "9.77", "0", "8"]
    record = GradeRecord(student_id="s", lesson="13", status="graded", score=8.125,
                         max_score=10.0, parts={"ffn": PartRecord(1.125, 2.0, 1, 2),
                                                "router": PartRecord(7.0, 8.0, 1, 2)},
                         tests=[])
    page = report.render_report(Tally.of([record, GradeRecord(
        student_id="t", lesson="13", status="graded", score=9.77001953125, max_score=10.0,
        parts={"ffn": PartRecord(1.77001953125, 2.0, 1, 2)}, tests=[])]), course, "13", "en")
    assert ">8.13<" in page and ">9.77<" in page and "9.77002" not in page
    assert "8.12" not in page and "1.13" in page
    assert "ffn 1.13/2" in text(course, "13", record)


# ---------------------------------------------------------------- issue 25, items 9-10

def _lesson13_checks(course: config.Course, practice: bool = True) -> list[dict]:
    """Lesson 13's own router and FFN checks on wrong results (unnormalised top-k
    weights, one token routed elsewhere; a token's FFN output off by 1), as stored tests (of
    practice cases, or of graded ones)."""
    import importlib
    import sys

    import torch

    from grader.judge.compare import Checks
    sys.path.insert(0, str(ROOT / "hidden_tests" / "13_moe"))
    try:
        moe = importlib.import_module("_moe_common")
    finally:
        sys.path.pop(0)
    tests = []
    route = Checks(course.tolerances("13"), practice=practice)
    idx = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]])
    weight = torch.tensor([[.6, .4], [.7, .3], [.5, .5], [.8, .2], [.9, .1], [.55, .45]])
    scores = torch.rand(6, 4, generator=torch.Generator().manual_seed(0))
    wrong_idx = idx.clone()
    wrong_idx[0] = torch.tensor([0, 3])
    halved = weight.clone()
    halved[:3] *= 0.5  # (some rows only: a map red in every cell is not drawn)
    moe.check_route(route, {"scores": scores, "topk_weight": halved, "topk_idx": wrong_idx},
                    {"scores": scores, "topk_weight": weight, "topk_idx": idx}, e=4)
    ffn = Checks(course.tolerances("13"), practice=practice)
    y = torch.rand(2, 3, 8, generator=torch.Generator().manual_seed(1))
    off = y.clone()
    off[0, 0] += 1  # one token's output only
    moe.check_ffn(ffn, {"y": off}, {"y": y})
    for name, part, checks in (("test_route[0]", "router", route), ("test_output[0]", "ffn", ffn)):
        tests.append(_test(name, part, False, checks=[c.to_dict() for c in checks.items],
                           pictures=checks.pictures, practice=practice))
    return tests


def _page_text(page: str) -> str:
    """What a page shows as text: its markup, styles and tooltips taken out."""
    import re
    page = re.sub(r"<style.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_failing_page_in_chinese_keeps_no_english_of_the_graders(course):
    """Issue 25 item 9: the check's message, the counts chart (its name, labels and
    legend), the heatmap's axes and the course's title are Chinese on a zh page, as
    the lesson and the grader said them; the record is read back from its JSON first
    (a page is rendered again by `grader report`). A graded case's page too, with
    what it says instead of its map."""
    import json
    english = ("values beyond the tolerance", "tokens chose other experts", course.title,
               "Lesson 13")
    chinese = ("个值中有", "超出容差", "个选中的专家与参考实现的 top-k 不同", course.title_zh,
               "第 13 课：")
    shown = {True: (("tokens per expert", "expert 0", "expert 3", "hidden units",
                     "chosen slots", "yours", "expected", "within tolerance"),
                    ("每个专家分到的 token 数", "专家 0", "专家 3", "隐藏单元", "选中的 K 个位置",
                     "你的结果", "期望结果", "容差内")),
             False: (("practice tests",), ("练习测试",))}
    for practice, (en_only, zh_only) in shown.items():
        record = make_record(course)
        record["tests"] = _lesson13_checks(course, practice)
        stored = json.loads(json.dumps(GradeRecord.from_json(record).to_json()))
        en, zh = (render_student(stored, course, "13", lang) for lang in ("en", "zh"))
        for phrase in (*english, *en_only):
            assert phrase in _page_text(en), phrase
            assert phrase not in _page_text(zh), phrase
        for phrase in (*chinese, *zh_only):
            assert phrase in _page_text(zh), phrase
            assert phrase not in _page_text(en), phrase


def test_heatmap_axes_are_the_checks_own(course):
    """Issue 25 item 10: topk_weight [N, K]'s map names its columns the K chosen slots
    (as lesson 13's check declares), an FFN output's the hidden units; a check that
    declares nothing says what the grader knows (the leading dims, the last dim)."""
    tests = _lesson13_checks(course)
    by_name = {c["name"]: c for t in tests for c in t["checks"]}
    t_en, t_zh = feedback.STRINGS["en"], feedback.STRINGS["zh"]
    assert feedback.heatmap_axes(by_name["topk_weight"], t_en, "en") == \
        ("tokens", "the K chosen slots")
    assert feedback.heatmap_axes(by_name["topk_weight"], t_zh, "zh") == ("token", "选中的 K 个位置")
    assert feedback.heatmap_axes(by_name["output"], t_en, "en") == ("tokens", "hidden units")
    assert feedback.heatmap_axes(by_name["output"], t_zh, "zh") == ("token", "隐藏单元")
    assert feedback.heatmap_axes({}, t_en, "en") == ("the leading dims, flattened", "the last dim")
    record = make_record(course)
    record["tests"] = tests
    page = render_student(record, course, "13", "en")
    ffn = page[page.index("test_output[0]"):page.index("test_route[0]")]  # ffn comes first
    assert "hidden units →" in ffn and "columns: hidden units." in ffn
    route = page[page.index("test_route[0]"):]
    assert "the K chosen slots →" in route and "columns: the K chosen slots." in route
    assert "hidden units" not in route


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_no_match_box_does_not_say_matched(course, lang):
    """"No known mistake matches" was followed by "matched in 1 of the failing tests"
    (issue 26, item 4): the box now says what was compared, and "matched" stays with a
    mistake that was named."""
    t = {k: str(escape(v)) for k, v in feedback.STRINGS[lang].items()}
    page = render_student(make_record(course), course, "13", lang)
    box = page[page.index(t["diagnosis_none"]):]
    box = box[:box.index("</div>")]
    assert str(escape(feedback.counted(feedback.STRINGS[lang], "diagnosis_none_tests", 1))) in box
    assert t["diagnosis_tests"].format(n=1) not in box
    named = page[page.index("top-k") :]
    assert t["diagnosis_tests"].format(n=1) in named


def test_a_near_miss_offers_the_known_mistake_it_comes_close_to(course):
    """Issue 54: Qwen2-MoE's `shared_expert_gate` (a parameter the reference lacks) is
    not the catalogue's `shared_expert` exactly, but the hint is the one to read."""
    from types import SimpleNamespace

    from grader.judge.reference import Mistake, load_mistakes
    from grader.judge.runner import _near
    from grader.record import Diagnosis

    mistakes = load_mistakes(ROOT / "hidden_tests" / "13_moe" / "mistakes.yml")
    ctx = SimpleNamespace(refs=SimpleNamespace(
        variants=[SimpleNamespace(mistake=m) for m in mistakes]))
    extra = {"kind": "extra", "line": 75, "name": "shared_expert_gate.weight"}
    near = _near(ctx, "moe", extra, Diagnosis(None))
    assert near is not None and near.id == "shared_expert"
    assert _near(ctx, "moe", {**extra, "name": "shared_experts_x.weight"}, None) is None
    assert _near(ctx, "moe", {**extra, "kind": "line"}, None) is None
    assert _near(ctx, "moe", extra, Diagnosis("gate_bias")) is None  # explained already
    assert _near(ctx, "ffn", extra, None) is None  # another part's mistake
    assert isinstance(mistakes[0], Mistake)
    record = make_record(course)
    record["tests"].append(_test("test_moe[0]", "moe", False, checks=[_check()]))
    record["parts"]["moe"].update(score=0.0, passed=0, near=near.to_json())
    for lang in ("en", "zh"):
        page = render_student(record, course, "13", lang)
        t = feedback.STRINGS[lang]
        assert str(escape(t["near_match"])) in page
        assert str(escape(near.title[lang])) in page
