"""No per-element fact of a graded case anywhere a student can see it (issue 52, item 1).

The attack: a submission right but for one value of a graded output (topk_weight
[10, 2], where a pooled map is per element), resubmitted with that value moved or
changed. A page that names the worst element's position, draws which values are
beyond the tolerance, or gives the largest difference or relative error lets the
resubmissions bisect the graded case's outputs. Each submission is graded in-process
(as test_no_reference_shown.py does) and everything a student receives is rendered
from its record (the page and its top in both languages, Gradescope's results.json,
the LMS exports and comments, what `grader check` prints and writes); the result as
results/<id>.json stores it is read too. They are searched for the position, a map,
the difference and a relative error; and the router's part, as a page and as
Gradescope's per-test output, must read the same wherever the wrong value is.
"""
from __future__ import annotations

import json
import re

import pytest

from grader.pages import feedback
from grader.judge.context import LessonContext
from grader.judge.reference import load_module
from tests.e2e.test_no_reference_shown import _records, _surfaces

RETURN = "    return scores, topk_weight, topk_idx\n"
ROW, COL, OFF = 7, 1, 0.123457  # the one wrong value: where, and by how much
ELSEWHERE = 2                    # the same value wrong at another row


def _one_wrong(row: int, col: int, off: float) -> str:
    """The solution's route, but one value of a [10, 2] topk_weight off."""
    return (f"    if tuple(topk_weight.shape) == (10, 2):\n"
            f"        topk_weight = topk_weight.clone()\n"
            f"        topk_weight[{row}, {col}] += {off}\n" + RETURN)


# every per-element figure the pages had: its label, a relative error's decade
LABELS = [feedback.STRINGS[lang][k] for lang in ("en", "zh")
          for k in ("worst_at", "max_rel", "max_abs")]
BAND = re.compile(r"1e-?\d+ – 1e-?\d+|≥ 1e3|< 1e-6")
POSITION = re.compile(rf"\[\s*{ROW},\s*{COL}\s*\]|rows? {ROW}\b|第 {ROW} 行")
ONE_ELEMENT = {"where", "max_abs_diff", "max_rel_diff", "got_value", "ref_value", "heatmap",
               "axes"}


@pytest.fixture(scope="module")
def attacked(course, tmp_path_factory):
    ctx = LessonContext(course, "13")
    source = ctx.refs.source
    assert source.count(RETURN) == 1
    modules = {name: load_module(f"_one_wrong_{name}", source.replace(RETURN, wrong), "attack")
               for name, wrong in (("here", _one_wrong(ROW, COL, OFF)),
                                   ("there", _one_wrong(ELSEWHERE, COL, OFF)))}
    records = {r.student_id: r for r in _records(ctx, modules)}
    texts = _surfaces(course, "13", list(records.values()), tmp_path_factory.mktemp("elem"))
    return records, texts


def test_the_attack_fails_a_graded_case_by_one_value(attacked):
    records, _ = attacked
    record = records["here"]
    failed = [c for t in record.tests if t.part == "router" and not t.passed
              for c in t.checks if not c.get("passed")]
    assert failed and all(not t.practice for t in record.tests)
    assert {(c["name"], c.get("outside"), c.get("size")) for c in failed} == \
        {("topk_weight", 1, 20)}  # one value of [10, 2] beyond: the count is the verdict's


def test_no_surface_names_the_wrong_value_or_how_far_off_it_is(attacked):
    _, texts = attacked
    assert texts
    for where, text in texts.items():
        assert not POSITION.search(text), (where, POSITION.search(text).group())
        assert not BAND.search(text), (where, BAND.search(text).group())
        assert '<svg class="heat"' not in text, where
        assert "0.123" not in text, where  # the difference, at any precision
        for label in LABELS:
            assert label not in text, (where, label)


def test_the_stored_result_keeps_no_element_of_a_graded_case(attacked):
    """results/<id>.json as the store writes it: a graded check holds its verdict and
    count, no position, value, difference, map or rows, and its test no counts."""
    records, _ = attacked
    stored = json.loads(json.dumps(feedback.stored(records["here"]).to_json()))
    assert stored["tests"] and not stored["tests"][0]["practice"]
    for test in stored["tests"]:
        assert test["max_abs_diff"] is None and not test.get("pictures"), test["name"]
        for check in test["checks"]:
            assert not check.keys() & ONE_ELEMENT, (test["name"], check)
            claim = check.get("structure") or {}
            assert not claim.keys() & {"rows", "where", "moved"}, (test["name"], claim)


def _router(text: str) -> str:
    return text[text.index('id="part-router"'):text.index('id="part-dispatch"')]


def test_the_router_reads_the_same_wherever_the_wrong_value_is(attacked):
    """What a bisecting resubmission compares: the router's part on the page (both
    languages) and its tests on Gradescope are the same for the value wrong at row 7
    or at row 2."""
    _, texts = attacked
    for lang in ("en", "zh"):
        here, there = (_router(texts[f"page {s} {lang}"]) for s in ("here", "there"))
        assert here == there, lang
    here, there = ([t for t in json.loads(texts[f"{s}.json"])["tests"] if "Router" in t["name"]]
                   for s in ("here", "there"))
    assert here == there and any(t["status"] == "failed" for t in here)
