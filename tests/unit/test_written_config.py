"""course.yml's `written:` check questions: what load() refuses, and lessons 13's and
13b's."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from grader import config
from grader.config import Question


def _text(**kw) -> dict:
    base = {"points": 2, "title": "t", "text": "?", "kind": "text",
            "rubric": [{"id": "a", "points": 1, "description": "x"},
                       {"id": "b", "points": 1, "description": "y"}]}
    return {**base, **kw}


def test_lesson_13_has_all_eight_questions_and_q6_is_the_shapes_one():
    lesson = config.load(config.Path(__file__).parents[2] / "course.yml").lesson("13")
    assert list(lesson.written) == [f"q{i}" for i in range(1, 9)]
    assert [q for q, v in lesson.written.items() if v.kind == "shapes"] == ["q6"]
    for q in lesson.written.values():
        assert q.title_zh and q.text_zh
        assert q.kind == "shapes" or all(r.description_zh for r in q.rubric)


def test_lesson_13b_asks_about_the_assembly_and_its_stub_holds_the_answers():
    """Lesson 13b's check questions (§7 and §3's steps 7-8): the summed aux loss, en and
    zh with a rubric, and the shapes through the model, its own five fields; its stub,
    made by `grader release`, carries their placeholders."""
    from grader.lesson.release import make_stub

    course = config.load(config.Path(__file__).parents[2] / "course.yml")
    lesson = course.lesson("13b")
    assert list(lesson.written) == ["q1", "q2"]
    q = lesson.written["q1"]
    assert q.kind == "text" and "aux loss" in q.text and q.text_zh and q.title_zh
    assert {r.id for r in q.rubric} == {"per_layer", "not_mean", "into_loss"}
    assert all(r.description_zh for r in q.rubric)
    stub = course.path(lesson.stub).read_text(encoding="utf-8")
    assert stub == make_stub(course.path(lesson.solution).read_text(encoding="utf-8"),
                             str(lesson.solution), lesson.written)
    assert 'ANSWER_Q1 = """YOUR ANSWER HERE"""' in stub
    shapes = lesson.written["q2"]
    assert shapes.kind == "shapes" and shapes.title_zh and shapes.text_zh
    assert shapes.fields() == ("hidden_states", "xq", "xk", "scores", "logits")
    assert all(f.why_zh for f in shapes.shapes.values())
    assert "ANSWER_Q2 = {\n" + "".join(f'    "{f}": "",\n' for f in shapes.fields()) in stub


def test_a_shapes_question_s_own_fields_split_its_points_and_a_text_question_has_none():
    fields = {f: {"shape": "[B, S]", "why": "w"} for f in ("a", "b", "c")}
    with pytest.raises(ValidationError, match="does not split into 3 equal shares"):
        Question(points=1, title="t", text="?", kind="shapes", shapes=fields)
    assert Question(points=0.75, title="t", text="?", kind="shapes",
                    shapes=fields).fields() == ("a", "b", "c")
    with pytest.raises(ValidationError, match="has no `shapes`"):
        Question(**_text(shapes=fields))


def test_a_rubric_must_add_up_to_the_points():
    with pytest.raises(ValidationError, match="add up to 1.5, not the question's 2"):
        Question(**_text(rubric=[{"id": "a", "points": 1.5, "description": "x"}]))


def test_rubric_ids_are_unique_and_a_text_question_needs_items():
    with pytest.raises(ValidationError, match="repeat"):
        Question(**_text(rubric=[{"id": "a", "points": 1, "description": "x"}] * 2))
    with pytest.raises(ValidationError, match="needs rubric items"):
        Question(**_text(rubric=[]))


@pytest.mark.parametrize("points, ok", [(1.25, True), (2.5, True), (5, True), (1, False),
                                        (2, False), (0.25, False)])
def test_shapes_points_split_into_five_exact_shares(points, ok):
    q = {"points": points, "title": "t", "text": "?", "kind": "shapes"}
    if ok:
        assert Question(**q).points == points
    else:
        with pytest.raises(ValidationError, match="5 equal shares"):
            Question(**q)


def test_question_ids_are_q_and_a_number(tmp_path):
    src = (config.Path(__file__).parents[2] / "course.yml").read_text(encoding="utf-8")
    bad = tmp_path / "course.yml"
    bad.write_text(src.replace("      q8:\n", "      question8:\n"), encoding="utf-8")
    for d in ("solutions", "exercises", "hidden_tests", "examples", "tests"):
        (tmp_path / d).symlink_to(config.Path(__file__).parents[2] / d)
    with pytest.raises(config.ConfigError, match=r"written: .*'question8' is not q1"):
        config.load(bad)


def test_the_written_questions_decide_no_code_version(tmp_path):
    """Editing a rubric regrades no code: the questions are marked at every run."""
    root = config.Path(__file__).parents[2]
    course = config.load(root / "course.yml")
    edited = course.model_copy(update={"lessons": {"13": course.lesson("13").model_copy(
        update={"written": {}})}})
    assert edited.version("13") == course.version("13")
