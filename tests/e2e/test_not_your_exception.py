"""Smaller items of issue 26: a file Python could not read gets a syntax hint (its line
and message) and no moe box about parts that "failed too"; weights the grader's loader
could not load are said to be that, naming the parameter, and what a probe finds the
module lacks of the lesson's interface is said as the interface's message: neither is
"Your code raised an exception"."""
from __future__ import annotations

import pytest
from markupsafe import escape

from grader.pages import feedback
from tests.conftest import grade_sources

MOE_RETURN = "        return y.view(batch_size, seq_len, hidden_dim)\n"
FFN_INIT = "        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)\n"
RENAMED = "        self.w1 = nn.Linear(hidden_size, intermediate_size, bias=False)\n" \
          "        self.gate_proj = self.w1\n"


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory) -> dict:
    source = ctx13.refs.source
    assert source.count(FFN_INIT) == 1 and source.count("def route(") == 1
    assert source.count(MOE_RETURN) == 1
    sources = {"renamed": source.replace(FFN_INIT, RENAMED),
               "pair": source.replace(MOE_RETURN, MOE_RETURN[:-1] + ", self.aux_loss\n"),
               "syntax": source.replace("def route(", "def route(:", 1),
               "fullwidth": source.replace("if norm_topk_prob:", "if norm_topk_prob：", 1)}
    return grade_sources(ctx13, slot13, tmp_path_factory, sources)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_loaders_refusal_is_not_the_students_exception(graded, course, lang):
    """A layer whose parameter is registered twice (gate_proj and w1) lists it under its
    first name, w1: the grader cannot load gate_proj.weight by name."""
    record = graded["renamed"]
    errors = [t.error for t in record.tests if t.part == "ffn" and t.error]
    assert errors and all(e["kind"] == "load" for e in errors)
    assert "your FeedForward has no parameter named gate_proj.weight" in errors[0]["message"]
    t = feedback.STRINGS[lang]
    page = feedback.render_student(record, course, "13", lang)
    ffn = page[page.index('id="part-ffn"'):page.index('id="part-router"')]
    assert str(escape(t["kind_load"])) in ffn and str(escape(t["kind_exception"])) not in ffn
    assert "gate_proj.weight" in ffn


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_probes_contract_message_is_not_the_students_exception(graded, course, lang):
    """A layer whose forward returns (y, aux_loss): the probe says it must return a
    tensor (probekit.ContractError), and the page says it is the interface, not a raise."""
    record = graded["pair"]
    errors = [t.error for t in record.tests if t.part == "moe" and t.error]
    assert errors and all(e["kind"] == "contract" for e in errors)
    assert errors[0]["message"] == ("MOEFeedForward.forward's result must be a torch.Tensor, "
                                    "got tuple")
    t = feedback.STRINGS[lang]
    page = feedback.render_student(record, course, "13", lang)
    moe = page[page.index('id="part-moe"'):]
    assert str(escape(t["kind_contract"])) in moe and str(escape(t["kind_exception"])) not in moe
    assert "must be a torch.Tensor, got tuple" in moe


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_file_python_could_not_read_gets_a_hint_and_no_moe_box(graded, course, lang):
    record = graded["syntax"]
    assert record.status != "graded" and "SyntaxError" in record.problem
    found = feedback.syntax_error(record.problem)
    assert found and found["line"] == ctx_line(record)
    t = feedback.STRINGS[lang]
    page = feedback.render_student(record, course, "13", lang)
    at = t["at_line"].format(line=found["line"])
    assert str(escape(t["syntax_hint"].format(message=found["message"], line=at))) in page
    assert "This part calls" not in page and "这一部分会调用" not in page


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_full_width_character_is_named_with_the_ascii_one_to_type(graded, course, lang):
    """Issue 51: `if norm_topk_prob：` (a Chinese keyboard's colon) got the hint that a
    colon may be missing; the student has one, the full-width one."""
    record = graded["fullwidth"]
    found = feedback.syntax_error(record.problem)
    assert found and found["typed"] == {"char": "：", "code": "U+FF1A", "ascii": ":"}
    t = feedback.STRINGS[lang]
    page = feedback.render_student(record, course, "13", lang)
    at = t["at_line"].format(line=found["line"]).capitalize()
    said = t["syntax_typed"].format(line=at, **found["typed"])
    assert str(escape(said)) in page and ("‘:’" in said or "“:”" in said)
    assert str(escape(t["syntax_hint"].format(message=found["message"], line=at))) not in page


@pytest.mark.parametrize("message, typed", [
    ("invalid character '（' (U+FF08)", ("（", "(")),
    ("invalid character '，' (U+FF0C)", ("，", ",")),
    ("invalid character '“' (U+201C)", ("“", '"')),
    ("invalid character '。' (U+3002)", ("。", ".")),
    ("invalid non-printable character U+3000", ("\u3000", " ")),
    ("invalid character '€' (U+20AC)", None),
    ("invalid syntax", None)])
def test_what_a_chinese_keyboard_types_is_mapped_to_ascii(message, typed):
    found = feedback.typed_instead(message)
    assert (found and (found["char"], found["ascii"])) == (typed or None)


def ctx_line(record) -> int:
    """The line the sandbox's traceback names (`File "13_moe.py", line N`)."""
    head = record.import_traceback.split("line ", 1)[1]
    return int(head.split()[0].strip(","))
