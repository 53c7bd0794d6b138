"""Issue 51, item 7: a notebook's errors name the code cell and the line in it, not the
line of the .py the grader joined its cells into (13_moe.py), a file the student never
saw: the problem of a syntax error, the student's traceback and the line where values
first differ, on the page and in `grader check`, in both languages."""
from __future__ import annotations

import json

import pytest
from markupsafe import escape

from grader.intake import notebook
from grader.pages import feedback
from grader.run.practice_output import outcome
from grader.text.cells import cell_line

SLOW_ROUTE = "    scores = F.softmax(gate(x_flat), dim=-1)\n"


def cells_of(source: str) -> list[str]:
    """The solution as code cells: IPython lines, the imports and the FeedForward, then
    route under a `%%time` (kept, its first line left out) as the third, one per block
    after it, and a `%%bash` cell (left out whole)."""
    blocks = source.split("\n\n\n")
    route = next(i for i, b in enumerate(blocks) if "def route(" in b)
    return ["%matplotlib inline\n!pip install torch", "\n\n\n".join(blocks[:route]),
            "%%time\n" + blocks[route], "%%bash\necho hi\nls", *blocks[route + 1:]]


def as_notebook(cells: list[str]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": c} for c in cells]})


def broken(cells: list[str], needle: str, into: str) -> tuple[list[str], int, int]:
    """`cells` with `needle` replaced by `into`: the cells, and the code cell and the
    line in it (1-based, as Jupyter counts them) of the change."""
    cell = next(i for i, c in enumerate(cells) if needle in c)
    line = cells[cell][:cells[cell].index(needle)].count("\n") + 1
    return [c.replace(needle, into, 1) if i == cell else c for i, c in enumerate(cells)], \
        cell + 1, line


def test_each_line_of_the_joined_file_is_its_cells(ctx13, tmp_path):
    """Every line of the .py that is a cell's maps to that cell's line: the same text,
    or the `pass` an IPython line became; the cell magic's cell counts its `%%time`."""
    cells = cells_of(ctx13.refs.source)
    (tmp_path / "nb.ipynb").write_text(as_notebook(cells))
    path, _ = notebook.load(tmp_path / "nb.ipynb", "nb.ipynb", tmp_path / "out" / "13_moe.py")
    joined = path.read_text().splitlines()
    mapped = 0
    for n, text in enumerate(joined, 1):
        found = cell_line(n, notebook.cells_of(path))
        if found is None:
            assert text == ""  # the blank line between two cells
            continue
        mapped += 1
        mine = cells[found[0] - 1].splitlines()[found[1] - 1]
        assert text == mine or text.endswith("pass  # IPython line left out"), (n, found)
    assert mapped == sum(len(c.splitlines()) for c in cells) - 1 - 3  # %%time, %%bash
    assert cell_line(joined.index("%s" % cells[2].splitlines()[1]) + 1,
                     notebook.cells_of(path)) == (3, 2)


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory) -> dict:
    """Three notebooks graded in a warm slot, as intake loads them: id -> (record,
    code cell, line in it)."""
    from grader.judge import runner

    cells = cells_of(ctx13.refs.source)
    assert sum(SLOW_ROUTE in c for c in cells) == 1
    made = {"syntax": broken(cells, "def route(", "def route(:"),
            "raises": broken(cells, SLOW_ROUTE, SLOW_ROUTE[:-1] + "[:, :, 0]\n"),
            "differs": broken(cells, SLOW_ROUTE, SLOW_ROUTE[:-1] + " * 2\n")}
    subs = []
    for name, (text, _, _) in made.items():
        folder = tmp_path_factory.mktemp(name)
        (folder / "13_moe.ipynb").write_text(as_notebook(text))
        path, notes = notebook.load(folder / "13_moe.ipynb", "13_moe.ipynb",
                                    folder / "converted" / "13_moe.py")
        subs.append(runner.Submission(name, path, notes=notes))
    out: dict = {}
    runner.grade_many(ctx13, subs, slot13, lambda r: out.__setitem__(r.student_id, r))
    return {name: (out[name], cell, line) for name, (_, cell, line) in made.items()}


def said(lang: str, cell: int, line: int) -> str:
    return feedback.STRINGS[lang]["at_cell_line"].format(cell=cell, line=line)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_syntax_error_names_the_cell_and_its_line(graded, course, lang):
    record, cell, line = graded["syntax"]
    assert cell == 3 and record.status == "import_error"
    assert "13_moe.py, line" in record.problem and record.cells  # what Python said
    page = feedback.render_student(record, course, "13", lang)
    check = outcome(record, course, "13", record.notes, lang)
    at = said(lang, cell, line)
    assert f"({at})" in page and f"({at})" in check["problem"]
    assert str(escape(feedback.STRINGS[lang]["syntax_hint"].format(
        line=at, message="invalid syntax"))) in page
    assert at in check["traceback"] and at in page.split("<pre>")[2]
    assert "<code>%matplotlib inline</code>" in page  # a note's code, not Markdown
    assert "`%matplotlib inline`" not in page
    for shown in (page, json.dumps(check, ensure_ascii=False)):
        assert "13_moe.py" not in shown.replace("13_moe.ipynb", "")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_students_traceback_names_the_cell_and_its_line(graded, course, lang):
    record, cell, line = graded["raises"]
    errors = [x.error for x in record.tests if x.part == "router" and x.error]
    assert errors and 'File "13_moe.py", line' in errors[0]["traceback"]
    page = feedback.render_student(record, course, "13", lang)
    at = said(lang, cell, line)
    assert f"{at}, in route" in page and 'File "13_moe.py", line' not in page
    check = outcome(record, course, "13", record.notes, lang)
    shown = [t["traceback"] for t in check["parts"]["router"]["tests"] if t["traceback"]]
    assert shown and all(f"{at}, in route" in t and "13_moe.py" not in t for t in shown)
    # the smallest example says the student's error as Python does, not the grader's class
    yours = check["examples"]["router"].split(feedback.STRINGS[lang]["ex_yours_gives"])[1]
    assert yours.startswith("\n#   IndexError: ") and "StudentError" not in yours


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_where_values_first_differ_names_the_cell_and_its_line(graded, course, lang):
    record, cell, line = graded["differs"]
    assert record.parts["router"].where
    t = feedback.STRINGS[lang]
    at = said(lang, cell, line)
    page = feedback.render_student(record, course, "13", lang)
    check = outcome(record, course, "13", record.notes, lang)
    assert check["parts"]["router"]["where"].startswith(
        at[:1].upper() + at[1:] + " ")
    box = page[page.index(str(escape(t["where_head"]))):]
    assert at[:1].upper() + at[1:] in box[:box.index("</div>")]
