"""Answers to the check questions, read with `ast` from a .py or from a notebook, never
by running the student's file; the stub's placeholders are no answer."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader import config
from grader.lesson.release import MarkerError, make_stub
from grader.intake.answers import MAX_ANSWER, read_answers
from grader.lesson.release import PLACEHOLDER, stub_section

ROOT = Path(__file__).resolve().parents[2]
COURSE = config.load(ROOT / "course.yml")
WRITTEN = COURSE.lesson("13").written


def _answers(tmp_path, text: str, name: str = "13_moe.py"):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return read_answers(f, WRITTEN)


def test_the_stub_answers_nothing_and_the_committed_stub_is_current():
    stub = (ROOT / "exercises/13_moe.py").read_text(encoding="utf-8")
    solution = (ROOT / "solutions/13_moe.py").read_text(encoding="utf-8")
    assert make_stub(solution, "s", WRITTEN) == stub
    assert stub.index("ANSWER_Q1") > stub.index("class MOEFeedForward")  # after the code
    assert "ANSWER_Q" not in solution
    answers = read_answers(ROOT / "exercises/13_moe.py", WRITTEN)
    assert set(answers) == set(WRITTEN) and not any(a.given for a in answers.values())


def test_a_solution_that_answers_is_refused_naming_the_line():
    with pytest.raises(MarkerError, match=r"s:2: the solution answers a check question"):
        make_stub("x = 1\nANSWER_Q1 = 'model'\n", "s", WRITTEN)


def test_literals_are_read_the_last_assignment_winning(tmp_path):
    got = _answers(tmp_path, 'import os\nANSWER_Q1 = """first"""\nANSWER_Q1 = "second"\n'
                   'ANSWER_Q6 = {"x_flat": "[N, H]", "y": "[B,S,H]"}\n'
                   'ANSWER_Q2: str = "annotated"\n')
    assert got["q1"].text == "second" and got["q2"].text == "annotated"
    assert got["q6"].fields["x_flat"] == "[N, H]" and got["q6"].fields["scores"] == ""
    assert not got["q3"].given


def test_a_file_saved_with_a_byte_order_mark_answers_as_its_code_is_graded(tmp_path):
    """A Windows editor's byte-order mark: the graded run drops it from the code
    (runner.read), and the answers are read from the same text, not refused as
    "does not parse"."""
    got = _answers(tmp_path, '\ufeffANSWER_Q1 = "model"\n')
    assert got["q1"].text == "model" and not got["q1"].problem


def test_code_is_never_run_to_read_an_answer(tmp_path):
    marker = tmp_path / "ran"
    got = _answers(tmp_path, f'open({str(marker)!r}, "w")\n'
                   f'ANSWER_Q1 = open({str(marker)!r}, "w").name\n'
                   'ANSWER_Q2 = f"{1+1}"\n')
    assert not marker.exists()
    assert "not a literal" in got["q1"].problem and not got["q1"].given
    assert "not a literal" in got["q2"].problem


@pytest.mark.parametrize("blank", ["", "   \n\t", PLACEHOLDER, f"  {PLACEHOLDER}\n"])
def test_placeholder_empty_or_blank_is_no_answer(tmp_path, blank):
    assert not _answers(tmp_path, f"ANSWER_Q3 = {blank!r}\n")["q3"].given


def test_a_long_answer_is_cut_and_its_hash_covers_all_of_it(tmp_path):
    a = _answers(tmp_path, f"ANSWER_Q1 = {'a' * (MAX_ANSWER + 5)!r}\n")["q1"]
    b = _answers(tmp_path, f"ANSWER_Q1 = {'a' * (MAX_ANSWER + 6)!r}\n")["q1"]
    assert a.cut and len(a.text) == MAX_ANSWER and a.text == b.text
    assert a.digest != b.digest


def test_a_wrong_type_is_said_not_dropped(tmp_path):
    got = _answers(tmp_path, "ANSWER_Q1 = 42\nANSWER_Q6 = ['N', 'H']\n")
    assert "not a string but a int" in got["q1"].problem
    assert "not a dict" in got["q6"].problem


def test_a_file_that_does_not_parse_answers_nothing_and_says_so(tmp_path):
    got = _answers(tmp_path, 'def broken(:\nANSWER_Q1 = "x"\n')
    assert not any(a.given for a in got.values())
    assert all("does not parse" in a.problem for a in got.values())


def test_a_notebook_answers_in_marked_markdown_cells(tmp_path):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# Lesson 13"},
             {"cell_type": "markdown", "metadata": {},
              "source": ["## ANSWER_Q3\n", "Because of the residual add."]},
             {"cell_type": "markdown", "metadata": {},
              "source": "ANSWER_Q6\n- x_flat: `[N, H]`\n- y: [B, S, H]\n"},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": 'ANSWER_Q8 = "index_add_ writes back"'}]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    got = _answers(tmp_path, json.dumps(nb), "13_moe.ipynb")
    assert got["q3"].text == "Because of the residual add."
    assert got["q6"].fields["x_flat"] == "[N, H]" and got["q6"].fields["y"] == "[B, S, H]"
    assert got["q8"].text == "index_add_ writes back" and not got["q1"].given


def test_no_questions_no_section():
    assert stub_section({}) == ""


def test_a_notebooks_markdown_answers_reach_the_file_it_is_graded_as(tmp_path):
    """`grader run` reads the Python file intake made of a notebook: the marked markdown
    cells are appended to it as literals, after the code (no code line moves)."""
    from grader.intake import notebook

    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "x = 1"},
             {"cell_type": "markdown", "metadata": {},
              "source": '## ANSWER_Q1\nIt says """quotes""" and \\n.'}]
    nb = tmp_path / "13_moe.ipynb"
    nb.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {},
                              "cells": cells}), encoding="utf-8")
    made, _ = notebook.load(nb, "13_moe.ipynb", tmp_path / "out" / "13_moe.py")
    assert made.read_text(encoding="utf-8").startswith("x = 1\n")
    assert read_answers(made, WRITTEN)["q1"].text == 'It says """quotes""" and \\n.'


def test_a_shapes_question_s_own_fields_are_the_ones_read(tmp_path):
    """Lesson 13b's shapes question names its own fields (course.yml's `shapes`): those
    are read, from the dict or a notebook's `field: shape` lines, and lesson 13's are
    fields it does not ask for."""
    written = COURSE.lesson("13b").written
    f = tmp_path / "13b_assembly.py"
    f.write_text('ANSWER_Q2 = {"xq": "[B, S, n_heads, head_dim]", "x_flat": "[N, H]"}\n',
                 encoding="utf-8")
    got = read_answers(f, written)["q2"]
    assert got.fields == {"hidden_states": "", "xq": "[B, S, n_heads, head_dim]", "xk": "",
                          "scores": "", "logits": ""}
    assert got.problem == "fields the question does not ask for: x_flat"
    f.write_text('ANSWER_Q2 = """logits: [B, S, V]\nscores: `[B, n_heads, S, P + S]`"""\n',
                 encoding="utf-8")
    assert read_answers(f, written)["q2"].fields["scores"] == "[B, n_heads, S, P + S]"
