"""What a mistake in a part moe calls costs, as docs/students.md says (issues 26 and 54):
a known mistake costs points in its own part only (the `explained` fixture); so does one
no known mistake explains, when moe's stand-in round (grader/judge/standin.py) finds the
layer's own wiring right with the reference standing in for the failing parts. A
wiring mistake still costs moe's points, and nothing of the round reaches the page."""
from __future__ import annotations

import json

import pytest

from grader.pages import feedback
from tests.conftest import grade_sources

FFN = "        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))\n"
UNLISTED = "        return self.down_proj(self.act_fn(self.gate_proj(x)) + self.up_proj(x))\n"


# Written from the lesson, none of them in mistakes.yml: a sigmoid gate in the FFN (a
# GLU, not SwiGLU), a softmax with a temperature in the router (sigmoid routing, first
# used here, is a listed mistake since issue 54), and a layer that never sets its aux
# loss in training.
SIGMOID_FFN = "        return self.down_proj(torch.sigmoid(self.gate_proj(x)) * self.up_proj(x))\n"
SOFTMAX = "    scores = F.softmax(gate(x_flat), dim=-1)\n"
TEMPERATURE_ROUTER = "    scores = F.softmax(gate(x_flat) / 2, dim=-1)\n"
AUX_ON = "        if self.training and self.router_aux_loss_coef > 0:\n"
AUX_DROPPED = "        if False:  # the aux loss, dropped\n"
# A route that asks the trusted side for the reference's answer (the stand-in's call
# frame, through the module the probes use): refused outside the round.
ROUTE_DEF = "def route("
CALLS_STAND_IN = (
    "def route(x_flat, gate, k, norm=True):\n"
    "    import sys\n"
    "    kit = sys.modules['grader.inside.probekit']\n"
    "    return kit.stand_in('route', [x_flat, gate.weight], k=int(k), norm=bool(norm))\n\n\n"
    "def _own_route(")
# In the round (its FeedForward is then not the file's own), print and raise a marker.
MOE_FORWARD = "        batch_size, seq_len, hidden_dim = x.shape\n"
EXFILTRATES = (MOE_FORWARD +
               "        if type(self.experts[0]).__name__ != 'FeedForward':\n"
               "            print('EXFIL-PRINT', flush=True)\n"
               "            raise RuntimeError('EXFIL-RAISE')\n")
MARKERS = ("EXFIL-PRINT", "EXFIL-RAISE")


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory) -> dict:
    refs = ctx13.refs
    source = refs.source
    gelu = next(v.mistake for v in refs.variants if v.mistake.id == "gelu")
    for line in (FFN, SOFTMAX, AUX_ON, MOE_FORWARD):
        assert source.count(line) == 1
    assert source.count(ROUTE_DEF) == 1
    sources = {"gelu": gelu.apply(source), "unlisted": source.replace(FFN, UNLISTED),
               "sigmoid_ffn": source.replace(FFN, SIGMOID_FFN),
               "temperature_router": source.replace(SOFTMAX, TEMPERATURE_ROUTER),
               "aux_dropped": source.replace(AUX_ON, AUX_DROPPED),
               "ffn_and_aux": source.replace(FFN, SIGMOID_FFN).replace(AUX_ON, AUX_DROPPED),
               "calls_stand_in": source.replace(ROUTE_DEF, CALLS_STAND_IN),
               "exfiltrates": source.replace(FFN, SIGMOID_FFN).replace(MOE_FORWARD,
                                                                       EXFILTRATES)}
    return grade_sources(ctx13, slot13, tmp_path_factory, sources)


def _lost(record, part: str) -> float:
    return record.parts[part].max_score - record.parts[part].score


def test_a_listed_mistake_costs_its_part_only(graded, course):
    record = graded["gelu"]
    assert record.parts["ffn"].diagnosis.id == "gelu"
    assert _lost(record, "ffn") == 2 and _lost(record, "moe") == 0
    assert record.max_score - record.score == 2      # students.md: "costs 2"


def _moe_box(record, course, lang: str) -> str:
    page = feedback.render_student(record, course, "13", lang)
    return page[page.index('id="part-moe"'):]


def _said(t: dict, key: str, parts: str) -> str:
    said = t[key].format(parts=parts, them=t["composite_them_one"])
    return str(feedback.clean(said)).replace("'", "&#39;")


@pytest.mark.parametrize("name, part", [("unlisted", "ffn"), ("sigmoid_ffn", "ffn"),
                                        ("temperature_router", "router")])
def test_an_unlisted_mistake_costs_its_part_only_and_moe_says_why(graded, course, name,
                                                                   part):
    """Before stand-ins, moe lost 2 more points here (one wrong FFN line cost 4)."""
    record = graded[name]
    assert record.parts[part].diagnosis is None or record.parts[part].diagnosis.id is None
    assert _lost(record, part) > 0 and _lost(record, "moe") == 0
    assert record.max_score - record.score == _lost(record, part)
    assert record.parts["moe"].stand_in == {"parts": [part], "passed": True}
    for lang in ("en", "zh"):
        assert _said(feedback.STRINGS[lang], "stand_in_excused", part) in \
            _moe_box(record, course, lang)


def test_a_wiring_mistake_still_costs_moe(graded, course):
    """Its parts are right: no round runs, and moe loses points as before."""
    record = graded["aux_dropped"]
    assert _lost(record, "moe") > 0
    assert all(_lost(record, p) == 0 for p in ("ffn", "router", "dispatch", "aux_loss"))
    assert record.parts["moe"].stand_in is None


def test_a_wiring_mistake_beside_an_unlisted_one_is_not_excused(graded, course):
    record = graded["ffn_and_aux"]
    assert _lost(record, "ffn") > 0 and _lost(record, "moe") > 0
    assert record.parts["moe"].stand_in == {"parts": ["ffn"], "passed": False}
    for lang in ("en", "zh"):
        t = feedback.STRINGS[lang]
        box = _moe_box(record, course, lang)
        assert _said(t, "stand_in_not_excused", "ffn") in box
        assert _said(t, "composite_unexplained", "ffn") in box


def test_a_stand_in_called_outside_the_round_gets_no_answer_and_no_points(graded):
    """The router's tests ask the student's route; its stand-in call is refused, the
    request fails, and the router part earns nothing."""
    record = graded["calls_stand_in"]
    assert record.parts["router"].score == 0
    refused = [t for t in record.tests if t.part == "router" and not t.passed]
    assert refused and all(t.error and t.error["kind"] == "protocol" for t in refused)
    assert "stand-in" in refused[0].message


def test_nothing_the_round_prints_or_raises_reaches_the_page(graded, course):
    """The round ran (moe's wiring raised in it, so it is not excused), and neither
    its print nor its exception is anywhere in the record or on a page."""
    record = graded["exfiltrates"]
    assert record.parts["moe"].stand_in == {"parts": ["ffn"], "passed": False}
    assert _lost(record, "moe") > 0
    kept = json.dumps(record.to_json(), ensure_ascii=False)
    pages = [feedback.render_student(record, course, "13", lang) for lang in ("en", "zh")]
    for marker in MARKERS:
        assert marker not in kept and all(marker not in p for p in pages)
