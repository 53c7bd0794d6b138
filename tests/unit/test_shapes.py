"""The shapes question marked by the grader: spellings of one shape are one shape
(SymPy over the lesson's names), each wrong field loses exactly its share, and the
reason is said in the lesson's terms."""
from __future__ import annotations

import pytest

from grader.judge import shapes
from grader.lesson.release import SHAPE_FIELDS

RIGHT = {"x_flat": "[N, H]", "scores": "[N, E]", "topk_idx": "[N, K]",
         "topk_weight": "[N, K]", "y": "[B, S, H]"}
SHARE = 0.25  # 1.25 points over five fields

CORRECT = [
    RIGHT,
    {"x_flat": "[B*S, H]", "scores": "[B*S, E]", "topk_idx": "[B*S, K]",
     "topk_weight": "[B*S, K]", "y": "[B, S, H]"},
    {"x_flat": "(N, H)", "scores": "(N, E)", "topk_idx": "(N, K)", "topk_weight": "(N, K)",
     "y": "(B, S, H)"},
    {"x_flat": "[B×S, H]", "scores": "[B × S, num_experts]", "topk_idx": "[B x S, top_k]",
     "topk_weight": "[BxS, top_k]", "y": "[B,S,H]"},
    {"x_flat": "[batch * seq, hidden_size]", "scores": "[batch * seq, num_experts]",
     "topk_idx": "[batch * seq, num_experts_per_tok]",
     "topk_weight": "[batch * seq, num_experts_per_tok]", "y": "[batch, seq, hidden_size]"},
    {"x_flat": "torch.Size([N, H])", "scores": "torch.Size([N, E])",
     "topk_idx": "torch.Size([N, K])", "topk_weight": "torch.Size([N, K])",
     "y": "torch.Size([B, S, H])"},
    {"x_flat": "[S*B, H]", "scores": "[S*B, E]", "topk_idx": "[S*B, K]",
     "topk_weight": "[S*B, K]", "y": "[B, S, H]"},
    {"x_flat": "（N，H）", "scores": "【N，E】", "topk_idx": "(N,K)", "topk_weight": "N, K",
     "y": "B, S, H"},
    {"x_flat": "`[N, H]`", "scores": " [ N , E ] ", "topk_idx": "[N, K,]",
     "topk_weight": "[(B)*(S), K]", "y": "[B*S, H]"},  # y as it is while experts add in
    {"x_flat": "[batch_size*seq_len, hidden_dim]", "scores": "[bsz*seq_len, n_experts]",
     "topk_idx": "[N, topk]", "topk_weight": "[N, k]", "y": "[batch_size, seq_len, hidden_dim]"},
    {"x_flat": "[b*s, h]", "scores": "[n, e]", "topk_idx": "[n, k]", "topk_weight": "[n, K]",
     "y": "[b, s, h]"},
]


@pytest.mark.parametrize("answer", CORRECT)
def test_correct_spellings_get_full_marks(answer):
    marks = shapes.mark(answer, 1.25)
    assert shapes.score(marks) == 1.25, {f: str(m.why) for f, m in marks.items()}


WRONG = [  # (field, its text, what the page must say)
    ("x_flat", "[B, S, H]", "has 3 dimensions; x_flat has 2"),
    ("scores", "[N, K]", "one column per expert"),
    ("topk_idx", "[N, E]", "K = num_experts_per_tok"),
    ("topk_weight", "[N]", "has 1 dimensions"),
    ("y", "[B, S, I]", "dimension 3"),
    ("y", "[N, E]", "reshaped back to x's shape"),
    ("x_flat", "[N, hidden]]", "could not read"),
    ("scores", "[N, experts_count]", "not one of the lesson's names"),
    ("topk_idx", "", "no answer"),
    ("x_flat", "[B+S, H]", "N = B*S"),
]


@pytest.mark.parametrize("field, text, said", WRONG)
def test_a_wrong_field_loses_exactly_its_share_and_says_why(field, text, said):
    marks = shapes.mark({**RIGHT, field: text}, 1.25)
    assert shapes.score(marks) == 1.25 - SHARE
    assert [f for f, m in marks.items() if not m.ok] == [field]
    assert said in str(marks[field].why)
    assert marks[field].why.texts["zh"] and marks[field].why.texts["zh"] != str(marks[field].why)


def test_y_flattened_is_accepted_and_the_page_says_which_is_which():
    marks = shapes.mark({**RIGHT, "y": "[N, H]"}, 1.25)
    assert marks["y"].ok and "inside the layer" in str(marks["y"].note)
    assert shapes.mark(RIGHT, 1.25)["y"].note is None


def test_shares_are_exact_units_for_any_valid_total():
    for total in (1.25, 2.5, 5, 0.0048828125 * 5):
        marks = shapes.mark({}, total)
        assert sum(m.max_score for m in marks.values()) == total
        assert len({m.max_score for m in marks.values()}) == 1
        assert shapes.score(marks) == 0


@pytest.mark.parametrize("hostile", ["__import__('os').system('touch /tmp/x')",
                                     "(" * 5000 + "N" + ")" * 5000, "N" + "*N" * 3000,
                                     "lambda: 1", "9" * 10_000])
def test_hostile_text_is_never_evaluated_and_never_crashes(hostile):
    marks = shapes.mark({f: hostile for f in SHAPE_FIELDS}, 1.25)
    assert shapes.score(marks) == 0


def test_grader_check_prints_the_shapes_mark_and_the_wrong_field(tmp_path):
    """What `grader check` adds after the practice tests: the q6 mark, field by field."""
    import io
    from pathlib import Path

    from rich.console import Console

    from grader import config
    from grader.run import practice_output
    from grader.intake.answers import read_answers
    from grader.judge.written import shapes_marks

    course = config.load(Path(__file__).resolve().parents[2] / "course.yml")
    written = course.lesson("13").written
    f = tmp_path / "13_moe.py"
    f.write_text(f"ANSWER_Q6 = {dict(RIGHT, scores='[N, K]')!r}\n", encoding="utf-8")
    outcome = {"language": "zh", "written": shapes_marks(written, read_answers(f, written),
                                                          "zh")}
    buf = io.StringIO()
    practice_output.print_written(outcome, course, "13", Console(file=buf, width=300))
    text = buf.getvalue()
    assert "q6        1/1.25" in text and "scores：`[N, K]` 的第 2 维不对" in text
    assert "x_flat" not in text  # right fields are not listed


def test_a_question_s_own_fields_are_marked_against_its_own_shapes():
    """Lesson 13b's shapes question (course.yml's `shapes`): the assembly's names
    (P cached positions, n_heads, n_kv_heads, head_dim, V), any spelling of the same
    shape right, a wrong one told why in each language."""
    from grader import config as course_config
    from grader.text.strings import in_language

    q = course_config.load(course_config.Path(__file__).parents[2] / "course.yml") \
        .lesson("13b").written["q2"]
    right = {"hidden_states": "[B, S, hidden_size]", "xq": "(bsz, seq_len, n_heads, head_dim)",
             "xk": "[B, S + past, num_key_value_heads, head_dim]",
             "scores": "[B, n_heads, S, P+S]", "logits": "[B, S, vocab_size]"}
    marks = shapes.mark(right, q.points, q.shapes)
    assert list(marks) == list(q.fields()) and all(m.ok for m in marks.values()), marks
    assert shapes.score(marks) == q.points
    wrong = shapes.mark({**right, "xk": "[B, S, n_kv_heads, head_dim]"}, q.points, q.shapes)
    assert not wrong["xk"].ok and shapes.score(wrong) == 1.0
    assert "P earlier keys" in in_language(wrong["xk"].why, "en")
    assert "缓存" in in_language(wrong["xk"].why, "zh")
