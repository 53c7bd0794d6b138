"""Questions instead of guesses (issue 26): a failing part no known mistake explains is
asked more questions on fresh inputs, and each finding is one sentence on the page.
Correct code, whatever its form, never gets one; a Gradescope run answers from the
autograder zip's recording."""
from __future__ import annotations

import pytest

from grader.run import practice_output
from grader.pages import explain, feedback
from grader.judge import questions, runner
from grader.judge.reference import Caller, load_module
from grader.author.selftest import default_correct
from grader.author.tolerance import variants

PARTS = ("ffn", "router", "dispatch", "aux_loss", "moe")
AUX = "    load = F.one_hot(topk_idx, num_experts).float().mean(0)\n"
# Hugging Face's load-balancing loss routes again from the scores: topk_idx is unused
IGNORES_IDX = ("    load = F.one_hot(scores.topk(topk_idx.shape[-1], -1).indices, "
               "num_experts).float().mean(0)\n")
MUTANTS = {
    "aux_ignores_topk_idx": (AUX, IGNORES_IDX),
    "route_float32": ("    scores = F.softmax(gate(x_flat), dim=-1)\n",
                      "    scores = F.softmax(gate(x_flat).float(), dim=-1)\n"),
    "dispatch_mixes_tokens": ("            y.index_add_(0, token_idx, (expert(x_flat[token_idx])",
                              "            y.index_add_(0, token_idx, (expert(x_flat[token_idx] "
                              "+ x_flat.mean(0))"),
}
FOUND = {
    "aux_ignores_topk_idx": ("aux_loss", {"kind": "ignores", "function": "load_balancing_loss",
                                          "argument": "topk_idx"}),
    "route_float32": ("router", {"kind": "dtype", "function": "route", "output": "scores",
                                 "dtype": "float32"}),
    "dispatch_mixes_tokens": ("dispatch", {"kind": "rows", "function": "dispatch"}),
}


def _mutant(refs, name: str) -> str:
    old, new = MUTANTS[name]
    assert refs.source.count(old) == 1, name
    return refs.source.replace(old, new)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_kind_of_question_finds_its_mistake(ctx13, name):
    refs = ctx13.refs
    student = Caller(load_module(f"_q_{name}", _mutant(refs, name), "13_moe.py"), refs.probes)
    part, finding = FOUND[name]
    assert finding in questions.ask(ctx13.tests, part, student, refs.reference)


def test_the_solution_and_correct_variants_get_no_answer(ctx13, course):
    refs = ctx13.refs
    made, _ = variants.generated(refs.source, refs.reference, refs.probes, "13")
    chosen = variants.from_folder(default_correct(course, "13"), refs.probes) + made
    assert len(chosen) >= 5
    students = [("solution", refs.reference.twin())] + [(v.name, v.caller) for v in chosen]
    for name, caller in students:
        for part in PARTS:
            assert questions.ask(ctx13.tests, part, caller, refs.reference) == [], (name, part)


def test_a_question_claims_only_what_holds_on_every_round(ctx13):
    """A loss that ignores topk_idx on the first fresh input only is told nothing."""
    refs = ctx13.refs
    once = ("    load = F.one_hot(topk_idx if scores.shape[0] != "
            f"{questions.load(ctx13.tests).TOKENS} else topk_idx * 0, num_experts)"
            ".float().mean(0)\n")
    student = Caller(load_module("_q_once", refs.source.replace(AUX, once), "13_moe.py"),
                     refs.probes)
    assert questions.ask(ctx13.tests, "aux_loss", student, refs.reference) == []


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory):
    folder = tmp_path_factory.mktemp("questions")
    path = folder / "13_moe.py"
    path.write_text(_mutant(ctx13.refs, "aux_ignores_topk_idx"))
    out = {}
    runner.grade_many(ctx13, [runner.Submission("s", path)], slot13,
                      lambda r: out.__setitem__("r", r))
    return out["r"], path


def test_the_page_and_check_say_it_in_both_languages(graded, course):
    record, _ = graded
    assert record.parts["aux_loss"].diagnosis is None  # no known mistake explains it
    assert record.parts["aux_loss"].answers == [FOUND["aux_ignores_topk_idx"][1]]
    for lang in ("en", "zh"):
        t = feedback.STRINGS[lang]
        said = explain.answer_text(record.parts["aux_loss"].answers[0], t)
        assert "topk_idx" in said and "load_balancing_loss" in said
        page = feedback.render_student(record, course, "13", lang)
        aux = page[page.index('id="part-aux_loss"'):page.index('id="part-moe"')]
        assert str(feedback.clean(said)).replace("'", "&#39;") in aux
        report = practice_output.outcome(record, course, "13", [], lang)
        assert said in report["parts"]["aux_loss"]["findings"]
    assert not any(p.answers for n, p in record.parts.items() if n != "aux_loss")


def test_gradescope_shows_the_finding_above_the_tests(graded, course):
    """results.json's output (what Gradescope shows above the tests) lists a failing
    part's findings, as the page does."""
    from grader.deliver.export.gradescope import results

    record, _ = graded
    said = explain.answer_text(record.parts["aux_loss"].answers[0], feedback.STRINGS["en"])
    output = results(course, "13", record)["output"]
    assert feedback.STRINGS["en"]["findings_head"] in output
    assert str(feedback.clean(said)).replace("'", "&#39;") in output


def test_a_gradescope_run_answers_from_the_recording_only(ctx13, course, slot13, graded):
    """A run from the autograder zip's recording (`recorded_only`) never imports the
    solution: with no recorded answer to a question it states nothing; with the
    recording's (`divergence.fresh_for_recording`) it states what a full run states."""
    from grader.judge import divergence
    from grader.judge.context import LessonContext

    honest, path = graded
    from grader.judge.runner import grade_solution

    for recorded in (False, True):
        ctx = LessonContext(course, "13", recorded_only=True)
        grade_solution(ctx)  # the graded tests' reference results, as a recording holds them
        if recorded:
            divergence.fresh_for_recording(ctx)
        ctx.refs.reference = Caller(None, ctx.refs.probes, dict(ctx.refs.reference.cache),
                                    load=_never)
        out: list = []
        runner.grade_many(ctx, [runner.Submission("s", path)], slot13, out.append)
        answers = {n: p.answers for n, p in out[0].parts.items() if p.answers}
        assert answers == ({"aux_loss": honest.parts["aux_loss"].answers} if recorded else {})


def _never():
    raise AssertionError("a run from the recording imported the solution")
