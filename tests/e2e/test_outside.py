"""Code nobody here wrote, graded as students' (issue 26, "behaviour, not form").

tests/fixtures/lesson13/outside/ holds MiniMind upstream's FeedForward and MOEFeedForward
and the MoE blocks of the installed transformers (Mixtral, Qwen2-MoE, Qwen3-MoE,
GraniteMoE), each wrapped into lesson 13's contract (each file's docstring says how).
Graded through the sandbox like any submission. Where a block behaves as MiniMind it
gets full marks in that part; where it differs it loses points there, for a reason the
page states. MiniMind upstream, whose experts are not the file's FeedForward class,
scores full marks (it scored 9.85 when the layout asked for the class).
"""
from pathlib import Path

import pytest

from grader.pages import feedback
from grader.judge import runner
from grader.judge.context import LessonContext

OUTSIDE = Path(__file__).resolve().parents[1] / "fixtures" / "lesson13" / "outside"

# Per part, measured on these fixtures (transformers 5.24); a change is a change in
# what the grader asks, to be looked at, not re-recorded blindly.
EXPECTED = {
    "minimind_upstream": {"ffn": 2.0, "router": 2.0, "dispatch": 2.5, "aux_loss": 1.5,
                          "moe": 2.0},
    # fp32 router, always renormalised; a loss that ignores topk_idx (random routing in
    # the aux cases), in float32
    "hf_mixtral": {"ffn": 2.0, "router": 0.5459, "dispatch": 2.5, "aux_loss": 0.0,
                   "moe": 1.2305},
    # fp32 router; a gated shared expert (parameters the reference lacks)
    "hf_qwen2_moe": {"ffn": 2.0, "router": 0.9092, "dispatch": 2.5, "aux_loss": 0.0,
                     "moe": 0.0},
    "hf_qwen3_moe": {"ffn": 2.0, "router": 0.9092, "dispatch": 2.5, "aux_loss": 0.0,
                     "moe": 1.3848},
    # softmax after top-k over the k logits: always sums to 1
    "hf_granitemoe": {"ffn": 2.0, "router": 0.5459, "dispatch": 2.5, "aux_loss": 0.0,
                      "moe": 1.0771},
}


@pytest.fixture(scope="module")
def graded(course, slot13) -> dict:
    """Limits far above what load reaches: transformers' modelling modules import in
    the child (seconds on a loaded machine), and the scores, not the limits, are tested."""
    limits = course.defaults.limits.model_copy(
        update={"test_wall_s": 120, "submission_wall_s": 1200, "cpu_s": 1200,
                "memory_mb": 4096})
    roomy = course.model_copy(update={"defaults": course.defaults.model_copy(
        update={"limits": limits})})
    out: dict = {}
    subs = [runner.Submission(name, OUTSIDE / f"{name}.py") for name in EXPECTED]
    runner.grade_many(LessonContext(roomy, "13"), subs, slot13,
                      lambda r: out.__setitem__(r.student_id, r))
    return out


@pytest.mark.parametrize("name", list(EXPECTED))
def test_outside_scores_as_expected(graded, name):
    record = graded[name]
    assert record.status == "graded", record.problem
    got = {p: round(v.score, 4) for p, v in record.parts.items()}
    failing = [(t.name, t.message[:200]) for t in record.tests if not t.passed]
    assert got == pytest.approx(EXPECTED[name], abs=2e-4), (got, failing)


def test_behaviour_equal_to_minimind_scores_full_marks_in_that_part(graded):
    """ffn and dispatch are MiniMind's computation in every block: full marks there;
    the float32 router cases with renormalisation behave as MiniMind's too."""
    for name in EXPECTED:
        parts = graded[name].parts
        assert parts["ffn"].score == parts["ffn"].max_score, name
        assert parts["dispatch"].score == parts["dispatch"].max_score, name
        passing = [t.name for t in graded[name].tests if t.part == "router" and t.passed]
        assert any("float32" in n and "norm_topk_prob=True" in n for n in passing), name


def test_the_page_says_why_where_it_differs(graded, course):
    """A fair, specific sentence: the float32 router by its dtype, the shared expert by
    its parameters' names; no sentence about the experts' class."""
    for name, needle in (("hf_mixtral", "scores dtype</span></strong> — got &#39;float32&#39;, "
                                        "expected &#39;float64&#39;"),
                         ("hf_qwen2_moe", "shared_expert.gate_proj.weight")):
        page = feedback.render_student(graded[name], course, "13", "en")
        assert needle in page, name
    for name in EXPECTED:
        page = feedback.render_student(graded[name], course, "13", "en")
        assert "FeedForward layers" not in page


def test_a_loss_that_ignores_topk_idx_is_told_so(graded):
    """Hugging Face's load-balancing loss routes again from the scores: asked on fresh
    inputs, it gives the same value whatever topk_idx is (before: only the no-match box)."""
    for name in ("hf_mixtral", "hf_qwen2_moe", "hf_qwen3_moe", "hf_granitemoe"):
        aux = graded[name].parts["aux_loss"]
        assert aux.diagnosis is None, name  # no known mistake explains it
        assert {"kind": "ignores", "function": "load_balancing_loss",
                "argument": "topk_idx"} in aux.answers, (name, aux.answers)
    assert graded["minimind_upstream"].parts["aux_loss"].answers == []


def test_no_line_of_divergence_on_code_nobody_here_wrote(graded):
    """Issue 27: these blocks are written otherwise from their first value (weights
    packed for a fused kernel, a router in float32): no line is named where their values
    left the reference's. The one line a page names is Qwen2-MoE's shared expert, a
    parameter the reference lacks, at the line that builds it (it named FeedForward's
    gate_proj line, which the shared expert does not use)."""
    for name in EXPECTED:
        source = (OUTSIDE / f"{name}.py").read_text(encoding="utf-8").splitlines()
        named = {part: p.where for part, p in graded[name].parts.items()
                 if p.where and p.where.get("line")}
        if name == "hf_qwen2_moe":
            assert set(named) == {"moe"} and named["moe"]["kind"] == "extra", named
            line = source[named["moe"]["line"] - 1].strip()
            assert line.startswith("self.shared_expert = "), line
        else:
            assert not named, (name, named)
