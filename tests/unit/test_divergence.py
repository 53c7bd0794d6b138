"""The tracer (grader/inside/tracer.py) and the trusted side's reading of a trace
(grader/judge/divergence/, its parser untrusted.py): what is recorded, within which caps, and what a hostile
child's trace can and cannot put on a page."""
import ast
import types
from pathlib import Path

import pytest
import torch

from grader.judge import divergence, trace_inputs
from grader.judge.divergence import finding, quoting, tracing, untrusted
from grader.pages import where
from grader.pages.feedback import STRINGS
from grader.inside import tracer
from grader.record import MAX_CODE, MAX_MATCHED, Where

ROOT = Path(__file__).resolve().parent.parent.parent


def module(source: str, filename: str = "<student>") -> types.ModuleType:
    m = types.ModuleType("student")
    m.__file__ = filename
    exec(compile(source, filename, "exec"), m.__dict__)
    return m


def test_records_each_line_s_new_values_in_place_changes_and_returns_of_its_file_only():
    other = module("def helper(t):\n    u = t * 2\n    return u\n", "<other>")
    m = module("import torch\n"
               "def f(x, helper):\n"
               "    y = torch.zeros_like(x)\n"
               "    y += helper(x)\n"
               "    n = 3\n"
               "    return y, n\n")
    result, events, lines, error, _, _ = tracer.trace("<student>", m.f, torch.ones(2),
                                                   other.helper)
    assert error == "" and result[1] == 3
    seen = [(line, name) for line, name, *_ in events]
    assert seen == [(3, "y"), (4, "y"), (5, "n"), (6, "return[0]"), (6, "return[1]")]
    assert torch.equal(events[1][2], torch.full((2,), 2.0))  # y after `+=`, a copy
    assert lines == [3, 4, 5, 6]
    assert all(func == "f" for _, _, _, func, *_ in events)


def test_caps_on_the_count_and_size_of_values():
    m = module("import torch\n"
               "def f():\n"
               "    big = torch.zeros(tracer_numel + 1)\n"
               "    for i in range(5000):\n"
               "        t = torch.ones(1) * i\n"
               "    return big\n")
    m.tracer_numel = tracer.MAX_NUMEL
    _, events, lines, _, _, _ = tracer.trace("<student>", m.f)
    assert len(events) == tracer.MAX_EVENTS
    assert all(e[2].numel() <= tracer.MAX_NUMEL for e in events)
    assert "big" not in {e[1] for e in events}
    assert len(lines) == tracer.MAX_LINES


def test_an_error_keeps_the_trace_up_to_it():
    m = module("import torch\ndef f(x):\n    y = x + 1\n    raise ValueError('no')\n")
    result, events, _, error, _, _ = tracer.trace("<student>", m.f, torch.ones(1))
    assert result is None and error == "ValueError" and events[0][1] == "y"


def test_a_hostile_trace_is_dropped_not_shown():
    """Anything but well-formed events (an out-of-range line, markup for a name, a
    tensor over the cap, other types) is dropped before it is read."""
    raw = [[10 ** 9, "y", torch.ones(1), "f", 0],
           [2, "</p><script>alert(1)</script>", torch.ones(1), "f", 0],
           [2, "y", torch.ones(tracer.MAX_NUMEL + 1), "f", 0],
           [2, "y", "not a tensor", "f", 0],
           [True, "y", torch.ones(1), "f", 0],
           "junk",
           [2, "y", torch.ones(1), "f", 0, [1, 2], 10 ** 9],  # off beyond the file
           [2, "y", torch.ones(1), "f", 0, [1, 2]],  # six: neither form
           [3, "z", torch.ones(1), "f", 0, ["<b>"], 0],  # a reach of other types: unknown
           [2, "y", torch.ones(1), "f", 0]]
    events = untrusted.events(raw, lines=5)
    assert [(e.line, e.name, e.reach) for e in events] == [(3, "z", None), (2, "y", None)]
    assert untrusted.leaves([[1, "gate.weight"], [2, "<script>"], [True, "x"], "junk"]) == {
        1: "gate.weight"}
    assert untrusted.lines_run([1, 2, 10 ** 9, "x", -1], 5) == [1, 2]


def test_a_where_from_json_is_capped_and_of_a_known_kind():
    assert Where.from_json({"kind": "<b>"}) is None
    assert Where.from_json("line") is None
    w = Where.from_json({"kind": "line", "line": 3, "end": 3, "code": "x" * 999,
                                    "name": "y", "matched": ["a"] * 50, "got": "1", "ref": "2"})
    assert len(w.code) <= MAX_CODE and len(w.matched) == MAX_MATCHED


@pytest.fixture(scope="module")
def lesson13(course):
    from grader.judge.context import LessonContext
    return divergence.lesson_traces(LessonContext(course, "13"))


def _where(lessons, source: str, part: str):
    m = module(source)

    def call(probe, args):
        return reply(divergence.run_traced(m, lessons.probes, probe, args))
    return divergence.where(call, lessons, part, source)


def reply(t: divergence.Trace) -> dict:
    """A trace as the child's harness answers it (grader/inside/harness.py)."""
    return {"result": t.result, "error": t.error, "lines": t.lines,
            "trace": [[e.line, e.name, e.value, e.func, e.step,
                       None if e.reach is None else sorted(e.reach), e.off]
                      for e in t.events]}


def test_the_sentence_names_the_line_its_values_and_the_matched_ones(lesson13):
    old = "weight = topk_weight[mask].view(-1, 1)"
    source = lesson13.source.replace(old, old + ".sqrt()")
    line = source[:source.index(old)].count("\n") + 1
    w = _where(lesson13, source, "dispatch")
    assert (w.kind, w.line, w.name) == ("line", line, "weight")
    assert w.matched[-2:] == ["mask", "token_idx"]
    en = where.sentence(w.to_json(), STRINGS["en"])
    assert en.startswith(f"Line {line} `{old}.sqrt()`: up to here every value")
    assert "`weight` is [" in en and "where the reference’s is [" in en
    zh = where.sentence(w.to_json(), STRINGS["zh"])
    assert zh.startswith(f"第 {line} 行 `{old}.sqrt()`")


def test_the_smallest_example_is_traced_first_and_its_values_are_quoted(course, lesson13):
    """The page's snippet and its line of divergence speak of one input: the example's
    request is the first traced, and the values quoted are computed on it."""
    from grader.judge import smallest
    from grader.judge.context import LessonContext
    from grader.judge.reference import Caller

    old = "weight = topk_weight[mask].view(-1, 1)"
    source = lesson13.source.replace(old, old + ".sqrt()")
    m = module(source)
    refs = LessonContext(course, "13").refs
    example = smallest.examples(lesson13.tests, lesson13.probes, ["dispatch"],
                                Caller(m, lesson13.probes), refs.reference)["dispatch"]
    asked: list[tuple[str, dict]] = []

    def call(probe, args):
        asked.append((probe, args))
        return reply(divergence.run_traced(m, lessons.probes, probe, args))
    lessons = lesson13
    w = divergence.where(call, lessons, "dispatch", source, (example.probe, example.args))
    assert asked[0] == (example.probe, example.args) and len(asked) == 1
    assert (w.kind, w.name) == ("line", "weight")
    # the reference's `weight` on the example: the example's routing weights where the
    # mask picks them (what the snippet's literals hold), not the lesson's other inputs
    ref = divergence.run_traced(lessons.module(0), lessons.probes, example.probe,
                                example.args)
    weights = [e.value for e in ref.events if e.name == "weight"]
    assert weights and w.ref == divergence.shown(weights[0])
    without = divergence.where(call, lessons, "dispatch", source)
    assert without.line == w.line and without.ref != w.ref


@pytest.mark.slow  # records the lesson's traces, then reads them back: ~8 CPU-s
def test_from_a_recording_the_same_line_and_example_without_the_solution(course):
    """The autograder zip's recording holds the reference's side of every fresh input
    (`fresh_for_recording`); a run from it (compute=False, a recording-only reference) finds
    the same example and names the same line, and never runs the solution."""
    from grader.judge import smallest
    from grader.judge.context import LessonContext
    from grader.judge.reference import Caller, recording
    from grader.inside import protocol

    ctx = LessonContext(course, "13")
    assert divergence.fresh_for_recording(ctx) >= 50
    data = protocol.loads(recording(ctx.refs))
    old = "weight = topk_weight[mask].view(-1, 1)"
    source = ctx.refs.source.replace(old, old + ".sqrt()")
    m = module(source)
    found = {}
    for side, refs, compute in (("computed", ctx.refs, True),
                                ("recorded", LessonContext(course, "13").refs, False)):
        if not compute:
            refs.traces.clear()
            refs.traces.update(data["traces"])
        reference = Caller(None, refs.probes, dict(data["reference"])) if not compute \
            else refs.reference
        example = smallest.examples(ctx.tests, refs.probes, ["dispatch"],
                                    Caller(m, refs.probes), reference)["dispatch"]
        lessons = divergence.LessonTraces("13", ctx.refs.source, [], refs.probes,
                                          course.tolerances("13"), ctx.tests, refs.traces,
                                          compute)

        def call(probe, args):
            return reply(divergence.run_traced(m, ctx.refs.probes, probe, args))
        found[side] = (example.snippet, divergence.where(call, lessons, "dispatch", source,
                                                         (example.probe, example.args)))
        if not compute:
            assert lessons._modules == {}  # the solution never compiled, let alone run
    assert found["recorded"] == found["computed"] and found["computed"][1].line
    # and nothing recorded: no line, no error
    empty = divergence.LessonTraces("13", ctx.refs.source, [], ctx.refs.probes,
                                    course.tolerances("13"), ctx.tests, {}, False)
    assert divergence.where(lambda p, a: {}, empty, "dispatch", source) is None


def test_a_gradient_cut_names_its_line_and_what_no_gradient_reaches(lesson13):
    """A `.detach()` on an argument: every forward value matches; the line is the one
    whose value's gradient no longer reaches the router's weight and the layer's input."""
    old = "y = dispatch(x_flat, self.experts, topk_weight, topk_idx)"
    source = lesson13.source.replace(old, old.replace("topk_weight,", "topk_weight.detach(),"))
    w = _where(lesson13, source, "moe")
    line = lesson13.source.splitlines().index("        " + old) + 1
    assert (w.kind, w.line, w.name, w.ref) == ("cut", line, "topk_weight", "gate.weight, x")
    said = where.sentence(w.to_json(), STRINGS["en"])
    assert said.startswith(f"Line {line} `y = dispatch(x_flat, self.experts, topk_weight.detach()")
    assert "`topk_weight` carries no gradient back to `gate.weight`, `x`" in said
    assert "`topk_weight` 不再把梯度传回 `gate.weight`, `x`" in where.sentence(
        w.to_json(), STRINGS["zh"])


def test_a_no_grad_around_a_call_names_the_line_that_turned_recording_off(lesson13):
    """The first value without a gradient is computed inside dispatch; the line named
    is the caller's, whose `torch.no_grad()` turned gradient recording off."""
    old = "y = dispatch(x_flat, self.experts, topk_weight, topk_idx)"
    source = lesson13.source.replace(old, "with torch.no_grad(): " + old)
    w = _where(lesson13, source, "moe")
    line = lesson13.source.splitlines().index("        " + old) + 1
    assert (w.kind, w.line) == ("cut", line)


def test_a_gradient_only_mistake_that_cuts_no_leaf_is_said_plainly(lesson13):
    """A detach on the denominator only: every value still reaches the same inputs and
    parameters, so no line can be named from where gradients flow; the page says only
    that the forward values match and the gradient does not."""
    old = "topk_weight.sum(dim=-1, keepdim=True)"
    source = lesson13.source.replace(old, old + ".detach()")
    w = _where(lesson13, source, "router")
    assert w.kind == "gradient" and w.line == 0
    assert "the gradient does not" in where.sentence(w.to_json(), STRINGS["en"])


def test_no_line_for_a_part_that_does_not_differ_on_the_traced_inputs(lesson13):
    assert _where(lesson13, lesson13.source, "router") is None


def test_no_line_where_the_code_shares_nothing_with_the_reference(lesson13):
    """A router written otherwise from its first line, and wrong: no value of the
    reference's anywhere, no statement in common, so no line is named."""
    wrong = lesson13.source.replace(
        "    scores = F.softmax(gate(x_flat), dim=-1)\n", "").replace(
        "    topk_weight, topk_idx = torch.topk(scores, k=num_experts_per_tok, dim=-1, "
        "sorted=False)\n    if norm_topk_prob:\n        topk_weight = topk_weight / "
        "(topk_weight.sum(dim=-1, keepdim=True) + 1e-20)\n    return scores, topk_weight, "
        "topk_idx\n",
        "    probabilities = torch.sigmoid(gate(x_flat) * 0.5)\n"
        "    best = probabilities.argsort(dim=-1)[:, :num_experts_per_tok]\n"
        "    chosen = probabilities.gather(1, best) * 3\n"
        "    return probabilities, chosen, best\n")
    assert "sigmoid" in wrong
    assert _where(lesson13, wrong, "router") is None


def test_no_line_where_the_first_value_is_one_the_reference_never_computes(lesson13):
    """Code nobody here wrote (Hugging Face's blocks, wrapped) often begins with a value
    of its own (weights packed for a fused kernel): nothing matched before it and the
    reference has no value of that name, so that line is no place where the values
    left the reference's; no line is named (before: that first line was)."""
    old = "    y = torch.zeros_like(x_flat)\n"
    wrong = lesson13.source.replace(old, "    packed = torch.cat([x_flat, x_flat], dim=-1)\n"
                                    + old).replace("weight = topk_weight[mask].view(-1, 1)",
                                                   "weight = topk_weight[mask].view(-1, 1).sqrt()")
    assert "packed" in wrong and ".sqrt()" in wrong
    assert _where(lesson13, wrong, "dispatch") is None


def test_an_extra_parameter_names_the_line_that_builds_what_the_reference_lacks():
    """A bias is the reference's layer built otherwise: the layer's line. A shared
    expert is a module the reference has nothing of: its own line, not that of a layer
    of the same name elsewhere in the file (Qwen2-MoE's page named FeedForward's
    gate_proj line)."""
    theirs = {"gate.weight", "experts.0.gate_proj.weight", "experts.0.up_proj.weight",
              "experts.0.down_proj.weight"}
    assert finding._lacking("experts.0.gate_proj.bias", theirs) == "gate_proj"
    assert finding._lacking("gate.bias", theirs) == "gate"
    assert finding._lacking("shared_expert.gate_proj.weight", theirs) == "shared_expert"
    assert finding._lacking("shared_expert_gate.weight", theirs) == "shared_expert_gate"
    assert finding._lacking("experts.0.gate_proj.bias", set()) == "gate_proj"


def test_fresh_inputs_use_no_seed_of_a_test():
    """Every generator here starts above SEED_BASE; the hidden and practice tests'
    seeds are small integers written in their files."""
    folders = {"10": "10_rmsnorm", "11": "11_attention", "12": "12_rope", "13": "13_moe"}
    for lesson, folder in folders.items():
        tests = ROOT / "hidden_tests" / folder
        parts = trace_inputs.builders(tests)
        assert parts, folder
        for part in parts:
            assert trace_inputs.fresh_inputs(tests, lesson, part)
    numbers = []
    for path in (ROOT / "hidden_tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                numbers.append(node.value)
    assert max(numbers) < trace_inputs.SEED_BASE


def test_the_page_s_sentence_is_escaped_and_quotes_code_as_code():
    found = {"kind": "line", "line": 4, "end": 4, "code": "y = a < b", "name": "y",
             "matched": ["x"], "got": "<img src=x>", "ref": "[1]"}
    [box] = where.boxes_html(found, STRINGS["en"])
    html = str(box["text"])
    assert html.startswith("Line 4 <code>y = a &lt; b</code>")
    assert "<img" not in html and "&lt;img src=x&gt;" in html
    assert where.boxes_html(None, STRINGS["en"]) == []
    # the line that raised: its error is the child's text, escaped too
    raised = {"kind": "raised", "raise_line": 4, "raise_end": 4, "raise_code": "y = a < b",
              "raise_error": "RuntimeError: <script>"}
    [box] = where.boxes_html(raised, STRINGS["en"])
    assert "<script>" not in str(box["text"]) and "&lt;script&gt;" in str(box["text"])


def test_a_recording_of_another_version_s_traces_is_not_read(course, tmp_path):
    """Recordings outlive the grader that made them (the practice recording in a
    student's cache is keyed by the lesson's files): traces recorded unpacked, as an
    earlier version did, are left out, not decoded as if packed."""
    from grader.judge.context import LessonContext
    from grader.judge.reference import lesson_digest, lesson_refs, recording

    ctx = LessonContext(course, "13")
    lesson = course.lesson("13")
    ctx.refs.traces.update({"old": {"traces": []}, "new": torch.zeros(8, dtype=torch.uint8)})
    path = tmp_path / "13.bin"
    path.write_bytes(recording(ctx.refs, lesson_digest(course.path(lesson.solution),
                                                       course.path(lesson.tests))))
    refs = lesson_refs("13", course.path(lesson.solution), course.path(lesson.tests), path)
    assert list(refs.traces) == ["new"]


def test_values_quoted_from_where_they_first_differ_in_the_pages_language(course):
    """Attention's output flattened without its transpose holds the reference's first
    head_dim values (token 0, head 0) and differs only after: the sentence quotes both
    from the first differing index, says which, and they read differently. The shape is
    said in the page's language."""
    from grader.judge.context import LessonContext
    lesson11 = divergence.lesson_traces(LessonContext(course, "11"))
    old = "output.transpose(1, 2).reshape(bsz, seq_len, -1)"
    source = lesson11.source.replace(old, "output.reshape(bsz, seq_len, -1)")
    w = _where(lesson11, source, "attention")
    assert w.kind == "line" and w.got_at == w.ref_at == [0, 0, 4]  # head_dim 4 alike
    got = [v.strip() for v in w.got.strip("[]").split(",")]
    ref = [v.strip() for v in w.ref.strip("[]").split(",")]
    assert got[0] == ref[0] == "…" and got[1] != ref[1]  # the first quoted values differ
    for lang in ("en", "zh"):
        text = where.sentence(w.to_json(), STRINGS[lang])
        placed = STRINGS[lang]["where_from_shape"].format(at=w.got_at, shape=w.got_shape)
        assert text.count(placed) == 2, text
    assert "(shape" not in where.sentence(w.to_json(), STRINGS["zh"])


def test_a_short_value_is_quoted_whole_with_digits_enough_to_differ():
    tols = {"float32": divergence.Tolerance(1e-5, 1e-4)}
    got = torch.tensor([1.0, 2.0, 3.001], dtype=torch.float64)
    q = quoting.quoted(got, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), tols)
    assert q["got"] == "[1, 2, 3.001]" and q["ref"] == "[1, 2, 3]" and not q["got_at"]
    q = quoting.quoted(torch.tensor([2.0, 1.23449]), torch.tensor([2.0, 1.23351]), tols)
    assert (q["got"], q["ref"]) == ("[2, 1.2345]", "[2, 1.2335]")  # .4g reads 1.234 twice


def test_a_gradient_sentence_names_only_the_leaves_it_knows():
    """A cut whose missing leaves the reference's trace did not name says "fewer", an
    addition names what it adds or says "also ... the reference's does not reach";
    a hostile leaf name is escaped on a page."""
    w = {"kind": "cut", "line": 4, "end": 4, "code": "s = x.detach()", "name": "s"}
    en = STRINGS["en"]
    assert "carries the gradient back to fewer inputs" in where.sentence(w, en)
    assert "carries no gradient back to `x`" in where.sentence({**w, "ref": "x"}, en)
    added = {**w, "kind": "added"}
    assert "the reference’s does not reach" in where.sentence(added, en)
    assert "also carries the gradient back to `w`" in where.sentence({**added, "got": "w"},
                                                                          en)
    html = str(where.boxes_html({**w, "ref": "<b>x</b>"}, en)[0]["text"])
    assert "<b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


def test_a_probe_that_timed_out_in_the_graded_session_is_not_traced(course):
    """The trace of a part whose probe ran out of time in the graded session (its child
    then killed) starts no child: the same code would hang it until its own limit
    (frank's check took 25 s, 10 of them two traces that could show nothing)."""
    from grader.judge.context import LessonContext
    from grader.sandbox.session import Session

    class NoChild:
        sandboxed = True

        def spawn(self, limits):
            raise AssertionError("the trace started a child")

        def kill(self):
            return {}

    ctx = LessonContext(course, "13")
    session = Session(NoChild(), "x = 1\n", "13_moe.py", (), course.limits("13"))
    session.timed_out.update(dispatch="test_dispatch[E=4]", moe="test_train[E=4]")
    raw = {"tests": [{"nodeid": "test_dispatch.py::test_dispatch[E=4]", "outcome": "failed"},
                     {"nodeid": "test_moe.py::test_train[E=4]", "outcome": "failed"}]}
    assert divergence.trace_failing(ctx, session, raw)[0] == {}


# ---------------------------------------------------------------- issue 54: the boxes

def _traced_where(lessons, source: str, part: str):
    """`_where`, the reply as the harness sends it, the line that raised included."""
    m = module(source)

    def call(probe, args):
        with torch.random.fork_rng():
            result, events, lines, error, leaves, raised = tracer.trace(
                m.__file__, getattr(lessons.probes, probe), m, **args)
        return {"result": result, "trace": events, "lines": lines, "error": error,
                "leaves": leaves, "raised": raised}
    return divergence.where(call, lessons, part, source)


def _line(source: str, text: str) -> int:
    return source[:source.index(text)].count("\n") + 1


def _without_act_fn(source: str) -> str:
    """The solution as many students write it: no `self.act_fn` line in __init__."""
    out = source.replace("        self.act_fn = ACT2FN[hidden_act]\n", "")
    return out.replace("self.act_fn(", "F.silu(")


WRONG_FFN = ("F.silu(self.gate_proj(x)) * self.up_proj(x)",
             "F.silu(self.gate_proj(x)) + self.up_proj(x)")


def test_a_constructor_laid_out_otherwise_never_moves_the_line(lesson13):
    """Without the reference's `self.act_fn` line, the traces ran different statements
    first in __init__, and the composite part's box named `self.experts = …` ("computes
    nothing where the reference computes _"): the grader's state replaces what a
    constructor builds, so its layout is left out of the comparison."""
    source = _without_act_fn(lesson13.source).replace(*WRONG_FFN)
    line = _line(source, WRONG_FFN[1])
    for part in ("ffn", "moe"):
        w = _traced_where(lesson13, source, part)
        assert (w.kind, w.line) == ("line", line), (part, w)


def test_the_composite_part_points_to_the_earlier_part_that_differs(lesson13):
    source = _without_act_fn(lesson13.source).replace(*WRONG_FFN)
    line = _line(source, WRONG_FFN[1])
    found = {p: _traced_where(lesson13, source, p) for p in ("ffn", "moe")}
    composite, names = lesson13.composite()
    assert (composite, names["ffn"]) == ("moe", "FeedForward")
    pointed = tracing.upstream(found, ["ffn", "moe"], source, composite, names)
    w = pointed["moe"]
    assert (w.kind, w.line, w.part, w.name) == ("upstream", line, "ffn", "FeedForward")
    assert pointed["ffn"] is found["ffn"]
    en = where.sentence(w.to_json(), STRINGS["en"])
    assert en.startswith(f"The first difference is in `FeedForward`, line {line} `")
    assert "see the `ffn` part" in en
    zh = where.sentence(w.to_json(), STRINGS["zh"])
    assert zh.startswith(f"第一处差异在 `FeedForward` 中，第 {line} 行 `")
    # the earlier part passed its own tests: the difference may be the wiring's, so
    # the composite part's box names no line at all
    assert "moe" not in tracing.upstream(found, ["moe"], source, composite, names)
    # a finding in the composite part's own code stays as it is
    own = {"moe": Where("line", _line(source, "x_flat = x.view"), 0, "x")}
    assert tracing.upstream(own, ["ffn", "moe"], source, composite, names) == own


def test_a_line_that_raises_gets_its_own_box(lesson13):
    """A missing `.float()` makes `mean()` raise: the box names that line, first words
    "Line N raised", in both languages; it was "computes nothing" or no box at all."""
    old = "F.one_hot(topk_idx, num_experts).float()"
    source = lesson13.source.replace(old, "F.one_hot(topk_idx, num_experts)")
    line = _line(source, "F.one_hot(topk_idx, num_experts)")
    w = _traced_where(lesson13, source, "aux_loss")
    assert (w.kind, w.raise_line) == ("raised", line)
    boxes = where.boxes(w.to_json(), STRINGS["en"])
    assert len(boxes) == 1
    assert boxes[0][1].startswith(f"Line {line} raised RuntimeError: mean()")
    assert where.boxes(w.to_json(), STRINGS["zh"])[0][1].startswith(
        f"第 {line} 行抛出了 RuntimeError")


def test_an_earlier_differing_line_comes_before_the_raise(lesson13):
    """Sigmoid scores (differ at their line), then a normalisation that raises further
    on: two boxes, the differing line's first."""
    sig = ("F.softmax(gate(x_flat), dim=-1)", "torch.sigmoid(gate(x_flat))")
    top = ("topk_weight.sum(dim=-1, keepdim=True)", "topk_weight.sum(dim=5, keepdim=True)")
    source = lesson13.source.replace(*sig).replace(*top)
    w = _traced_where(lesson13, source, "router")
    assert (w.kind, w.line, w.raise_line) == ("line", _line(source, sig[1]),
                                              _line(source, top[1]))
    heads = [head for head, _ in where.boxes(w.to_json(), STRINGS["en"])]
    assert heads == [STRINGS["en"]["where_head"], STRINGS["en"]["where_raised_head"]]


def test_a_childs_raised_line_is_checked():
    assert untrusted.raised([3, "RuntimeError: x"], 5) == (3, "RuntimeError: x")
    assert untrusted.raised([9, "x"], 5) is None
    assert untrusted.raised([True, "x"], 5) is None
    assert untrusted.raised(["3", "x"], 5) is None
    assert untrusted.raised([3, "x" * 10_000], 5)[1] == "x" * 200
    assert Where.from_json({"kind": "upstream", "part": "<b>"}).part == ""


def test_a_default_of_the_students_own_is_named_at_its_line(course):
    """A `rope_base` default of 10e6 where the lesson's is 1e6 changed `freqs` on line
    24, which the page named; the difference comes from the default on the def line,
    which the page now names, with the parameter and both values."""
    from grader.judge.context import LessonContext
    lessons = divergence.lesson_traces(LessonContext(course, "12"))
    source = lessons.source.replace("rope_base: float = 1e6,", "rope_base: float = 10e6,")
    w = _traced_where(lessons, source, "freqs")
    line = _line(source, "rope_base: float = 10e6,")
    assert (w.kind, w.line, w.name, w.got, w.ref) == ("default", line, "rope_base",
                                                     "1e+07", "1e+06")
    en = where.sentence(w.to_json(), STRINGS["en"])
    assert en.startswith(f"Line {line} `def precompute_freqs_cis(")
    assert "your default for `rope_base` is 1e+07" in en
    assert where.sentence(w.to_json(), STRINGS["zh"]).startswith(f"第 {line} 行 `def ")
    # the same default given by every call: no difference, no box from it
    assert _traced_where(lessons, lessons.source, "freqs") is None


# ---------------------------------------------------------------- issue 57: lesson 13b

def test_a_list_or_tuple_of_tensors_is_followed_element_by_element():
    """A cache kept as a list of (k, v) tuples, and returned so: each tensor is a value
    of its own (`presents[0][1]`, `return[1][0][1]`), as each tensor local is; before,
    a list was no value at all. A list subclass (whose indexing would run the student's
    code) is not followed, nor a list's numbers; the trusted side reads those names."""
    m = module("import torch\n"
               "class Sneaky(list):\n"
               "    pass\n"
               "def f(x):\n"
               "    presents = []\n"
               "    for i in range(2):\n"
               "        presents.append((x + i, x * i))\n"
               "    sizes = [1, 2]\n"
               "    other = Sneaky([x])\n"
               "    return x, presents, 3\n")
    _, events, *_ = tracer.trace("<student>", m.f, torch.ones(2))
    names = [(line, name) for line, name, *_ in events]
    assert (7, "presents[0][1]") in names and (7, "presents[1][0]") in names
    assert names.count((7, "presents[0][0]")) == 1  # recorded once, when it came
    assert [n for _, n in names if n.startswith("return")] == [
        "return[0]", "return[1][0][0]", "return[1][0][1]", "return[1][1][0]",
        "return[1][1][1]", "return[2]"]
    assert not [n for _, n in names if n.startswith(("sizes", "other"))]
    value = dict(((line, name), v) for line, name, v, *_ in events)[(10, "return[1][1][0]")]
    assert torch.equal(value, torch.full((2,), 2.0))
    parsed = untrusted.events(events + [[7, "presents[8]", torch.ones(1), "f", 0, [], 0],
                                        [7, "x[0][0][0][0]", torch.ones(1), "f", 0, [], 0]],
                              lines=10)
    assert [e.name for e in parsed] == [e[1] for e in events]


@pytest.fixture(scope="module")
def lesson13b(course):
    from grader.judge.context import LessonContext
    return divergence.lesson_traces(LessonContext(course, "13b"))


def test_an_old_cache_returned_is_named_where_it_is_kept(lesson13b):
    """The model returning each layer's old cache: the caches are a list of tuples,
    which the tracer did not follow, so every value traced matched and no line was
    named; now the cache list's tensors are compared, and the line that appended the
    old one is named."""
    old = "presents.append(present)"
    source = lesson13b.source.replace(old, "presents.append(past_key_value)")
    w = _traced_where(lesson13b, source, "model")
    assert (w.kind, w.line) == ("line", _line(source, "presents.append(past_key_value)")), w
    assert w.name.startswith("presents[")


K_NORM = ("xq, xk = self.q_norm(xq), self.k_norm(xk)", "xq, xk = self.q_norm(xq), xk")


def test_a_name_an_assignment_leaves_as_it_was_is_compared_with_the_reference_s(lesson13b):
    """k left un-normalised (`xq, xk = self.q_norm(xq), xk`): xk keeps a value the
    reference computes too (before its k_norm), so nothing differed at that line and a
    later one was named (RoPE's, or the scores'); the edited line is named now, with the
    student's xk and the reference's."""
    source = lesson13b.source.replace(*K_NORM)
    w = _traced_where(lesson13b, source, "self_attn")
    assert (w.kind, w.line, w.name) == ("line", _line(source, K_NORM[1]), "xk"), w
    assert w.got != w.ref


def test_a_name_normalised_on_the_next_line_is_no_difference(lesson13b):
    """The k norm on a line of its own after the statement that leaves xk as it was is
    code laid out otherwise: with a mistake further on (the scores scaled the wrong
    way), that mistake's line is named, not the one that left xk as it was."""
    scale = ("/ math.sqrt(self.head_dim)", "* math.sqrt(self.head_dim)")
    source = lesson13b.source.replace(
        K_NORM[0], K_NORM[1] + "\n        xk = self.k_norm(xk)").replace(*scale)
    w = _traced_where(lesson13b, source, "self_attn")
    assert (w.kind, w.line) == ("line", _line(source, scale[1])), w


def test_traces_recorded_by_another_tracer_are_not_read(course):
    """A recording outlives the grader that made it: its traces, made before the tracer
    followed lists (no `presents[0][1]` among them), would have a child's list values
    match nothing and name a wrong line; a trace of another tracer's VERSION is not
    read (no line), one of this tracer's is."""
    from grader.judge.context import LessonContext
    from grader.judge.divergence import lesson as traced
    from grader.judge.reference import request_key

    lessons = divergence.lesson_traces(LessonContext(course, "13"))
    probe, args = lessons.requests("router")[0]
    plain = traced._plain(lessons.reference(probe, args))
    assert plain["tracer"] == tracer.VERSION
    key = request_key(probe, args)
    for version, read in ((tracer.VERSION, True), (tracer.VERSION - 1, False), (None, False)):
        older = divergence.lesson_traces(LessonContext(course, "13"), compute=False)
        try:
            older.recorded[key] = traced._packed({**plain, "tracer": version})
            assert (older.reference(probe, args) is not None) == read, version
        finally:  # (in case the context's recorded traces are shared)
            older.recorded[key] = traced._packed(plain)
