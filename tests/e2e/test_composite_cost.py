"""What a mistake in a part moe calls costs, as docs/students.md says (issue 26): a known
mistake costs points in its own part only; one no known mistake explains costs moe's
points too, and the moe part says its lost points come, at least in part, from it."""
from __future__ import annotations

import pytest

from grader.pages import feedback
from tests.conftest import grade_sources

FFN = "        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))\n"
UNLISTED = "        return self.down_proj(self.act_fn(self.gate_proj(x)) + self.up_proj(x))\n"


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory) -> dict:
    refs = ctx13.refs
    gelu = next(v.mistake for v in refs.variants if v.mistake.id == "gelu")
    assert refs.source.count(FFN) == 1
    sources = {"gelu": gelu.apply(refs.source), "unlisted": refs.source.replace(FFN, UNLISTED)}
    return grade_sources(ctx13, slot13, tmp_path_factory, sources)


def _lost(record, part: str) -> float:
    return record.parts[part].max_score - record.parts[part].score


def test_a_listed_mistake_costs_its_part_only(graded, course):
    record = graded["gelu"]
    assert record.parts["ffn"].diagnosis.id == "gelu"
    assert _lost(record, "ffn") == 2 and _lost(record, "moe") == 0
    assert record.max_score - record.score == 2      # students.md: "costs 2"


def test_an_unlisted_mistake_costs_moe_too_and_moe_says_so(graded, course):
    record = graded["unlisted"]
    assert record.parts["ffn"].diagnosis is None
    assert _lost(record, "ffn") == 2 and _lost(record, "moe") == 2
    assert record.max_score - record.score == 4      # students.md: "can cost 4"
    for lang in ("en", "zh"):
        t = feedback.STRINGS[lang]
        page = feedback.render_student(record, course, "13", lang)
        moe = page[page.index('id="part-moe"'):]
        said = t["composite_unexplained"].format(parts="ffn", them=t["composite_them_one"])
        assert str(feedback.clean(said)).replace("'", "&#39;") in moe
