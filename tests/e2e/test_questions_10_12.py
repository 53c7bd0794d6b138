"""Questions on fresh inputs for lessons 10 to 12 (grader/judge/questions.py, each lesson's
questions.py): every question finds the mistake it is about, and the solution, every
correct variant and every correct fixture of the lesson get no answer at all."""
from __future__ import annotations

import pytest

from grader.pages import explain, feedback
from grader.judge import questions
from grader.judge.context import LessonContext
from grader.judge.reference import Caller, load_module
from grader.author.selftest import default_correct
from grader.author.tolerance import variants

# lesson -> mistake -> (line(s) of the solution, replacement, part, the finding)
MUTANTS = {
    "10": {
        "eps_fixed": ("mean(-1, keepdim=True) + self.eps)", "mean(-1, keepdim=True) + 1e-5)",
                      "norm", {"kind": "ignores", "function": "RMSNorm", "argument": "eps"}),
        "no_weight": ("return self.weight * normed.type_as(x)", "return normed.type_as(x)",
                      "norm", {"kind": "ignores", "function": "RMSNorm", "argument": "weight"}),
        "mean_over_tokens": ("xf.pow(2).mean(-1, keepdim=True)",
                             "xf.pow(2).mean((-2, -1), keepdim=True)",
                             "norm", {"kind": "rows", "function": "RMSNorm"}),
        "float32_out": ("return self.weight * normed.type_as(x)",
                        "return (self.weight * normed).float()",
                        "norm", {"kind": "dtype", "function": "RMSNorm", "output": "y",
                                 "dtype": "float32"}),
    },
    "11": {
        "n_rep_fixed": ("x[:, :, :, None, :].expand(bs, slen, num_key_value_heads, n_rep, "
                        "head_dim)\n            .reshape(bs, slen, num_key_value_heads * "
                        "n_rep, head_dim))",
                        "x[:, :, :, None, :].expand(bs, slen, num_key_value_heads, 2, "
                        "head_dim)\n            .reshape(bs, slen, num_key_value_heads * 2, "
                        "head_dim))",
                        "repeat_kv", {"kind": "ignores", "function": "repeat_kv",
                                      "argument": "n_rep"}),
        "repeat_float32": ("            .reshape(bs, slen, num_key_value_heads * n_rep, "
                           "head_dim))",
                           "            .reshape(bs, slen, num_key_value_heads * n_rep, "
                           "head_dim)).float()",
                           "repeat_kv", {"kind": "dtype", "function": "repeat_kv",
                                         "output": "y", "dtype": "float32"}),
        "no_padding": ("    if attention_mask is not None:\n        scores += (1.0 - "
                       "attention_mask.unsqueeze(1).unsqueeze(2)) * -1e9\n", "",
                       "mask", {"kind": "ignores", "function": "mask_scores",
                                "argument": "attention_mask"}),
        "mask_float32": ("    return scores\n", "    return scores.float()\n",
                         "mask", {"kind": "dtype", "function": "mask_scores",
                                  "output": "scores", "dtype": "float32"}),
        "attention_no_padding": ("    scores = mask_scores(scores, attention_mask)\n",
                                 "    scores = mask_scores(scores, None)\n",
                                 "attention", {"kind": "ignores", "function": "attention",
                                               "argument": "attention_mask"}),
        "not_causal": ("    scores = mask_scores(scores, attention_mask)\n",
                       "    scores = scores if attention_mask is None else scores + (1.0 - "
                       "attention_mask[:, None, None, :]) * -1e9\n",
                       "attention", {"kind": "earlier", "function": "attention"}),
        "attention_float32": ("F.softmax(scores.float(), dim=-1).type_as(xq) @ xv",
                              "F.softmax(scores.float(), dim=-1) @ xv.float()",
                              "attention", {"kind": "dtype", "function": "attention",
                                            "output": "y", "dtype": "float32"}),
    },
    "12": {
        "base_fixed": ("freqs = 1.0 / (rope_base ** (", "freqs = 1.0 / (1e6 ** (",
                       "freqs", {"kind": "ignores", "function": "precompute_freqs_cis",
                                 "argument": "rope_base"}),
        "no_yarn": ("    if rope_scaling is not None:\n", "    if False:\n",
                    "freqs", {"kind": "ignores", "function": "precompute_freqs_cis",
                              "argument": "rope_scaling"}),
        "no_sin": ("sin.unsqueeze(unsqueeze_dim)", "cos.unsqueeze(unsqueeze_dim)",
                   "apply", {"kind": "ignores", "function": "apply_rotary_pos_emb",
                             "argument": "sin"}),
        "no_cos": (" * cos.unsqueeze(unsqueeze_dim))", ")",
                   "apply", {"kind": "ignores", "function": "apply_rotary_pos_emb",
                             "argument": "cos"}),
        "apply_float32": (").to(q.dtype)", ").float()",
                          "apply", {"kind": "dtype", "function": "apply_rotary_pos_emb",
                                    "output": "q", "dtype": "float32"}),
        "no_offset": ("start_pos = past_key_value[0].shape[1] if past_key_value is not None "
                      "else 0", "start_pos = 0",
                      "offset", {"kind": "ignores", "function": "rope_position_embeddings",
                                 "argument": "past_key_value"}),
    },
}
CASES = [(lesson, name) for lesson, named in MUTANTS.items() for name in named]
# MiniMind's own RMSNorm: computes in float32 whatever the input, then casts back
UPSTREAM_NORM = ("""import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self.weight * self._norm(x.float()).type_as(x)
""")


@pytest.fixture(scope="module")
def contexts(course) -> dict[str, LessonContext]:
    return {key: LessonContext(course, key) for key in MUTANTS}


@pytest.mark.parametrize("lesson,name", CASES)
def test_each_question_finds_its_mistake(contexts, lesson, name):
    ctx = contexts[lesson]
    old, new, part, finding = MUTANTS[lesson][name]
    source = ctx.refs.source
    assert old in source, name
    module = load_module(f"_q{lesson}_{name}", source.replace(old, new),
                         ctx.refs.reference.module.__file__ or "student.py")
    found = questions.ask(ctx.tests, part, Caller(module, ctx.refs.probes), ctx.refs.reference)
    assert finding in found, found
    for lang in ("en", "zh"):  # each finding is one sentence in each language
        assert explain.answer_text(finding, feedback.STRINGS[lang])


@pytest.mark.parametrize("lesson", list(MUTANTS))
def test_the_solution_and_correct_variants_get_no_answer(contexts, course, lesson):
    ctx = contexts[lesson]
    refs = ctx.refs
    made, _ = variants.generated(refs.source, refs.reference, refs.probes, lesson)
    chosen = variants.from_folder(default_correct(course, lesson), refs.probes) + made
    students = [("solution", refs.reference.twin())] + [(v.name, v.caller) for v in chosen]
    if lesson == "10":
        students.append(("upstream", Caller(load_module("_q10_upstream", UPSTREAM_NORM,
                                                        "10_rmsnorm.py"), refs.probes)))
    assert len(students) >= 3
    parts = list(questions.load(ctx.tests).QUESTIONS)
    assert parts == list(course.lesson(lesson).parts)
    for name, caller in students:
        for part in parts:
            assert questions.ask(ctx.tests, part, caller, refs.reference) == [], (name, part)
