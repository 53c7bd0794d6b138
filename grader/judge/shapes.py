"""A shapes question (lesson 13's q6, lesson 13b's q2), marked by the grader.

Each field is read by a small parser of its own (names, whole numbers, `*`, `+`,
brackets), never by `eval` or SymPy's `parse_expr` (which evaluates), and compared with
the question's shapes (course.yml's `shapes`, else lesson 13's `EXPECTED`) symbolically
over the lessons' declared names, so `[B*S, H]`,
`(N, hidden_size)` and `[seq_len × batch, H]` are one shape. Each field is an equal
share of the question's points (grader/points.py's units); the reason a field is wrong
is said in the lesson's terms, in every language.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import sympy

from grader import points
from grader.config import ShapeField, shape_fields
from grader.text.strings import Said, say

B, S, H, E, K, INTER = sympy.symbols("B S H E K I", positive=True, integer=True)
# the assembly's (lesson 13b): cached positions, vocabulary, query and kv heads, head size
P, V, HEADS, KV_HEADS, HEAD_DIM = sympy.symbols("P V n_heads n_kv_heads head_dim",
                                                positive=True, integer=True)
N = B * S
# the lesson's declared names (§1.5's table, §3's code), and the spellings students use
NAMES = {
    "B": B, "batch": B, "batch_size": B, "bsz": B, "bs": B,
    "S": S, "seq": S, "seq_len": S, "seqlen": S, "sequence_length": S, "L": S, "T": S,
    "H": H, "hidden": H, "hidden_size": H, "hidden_dim": H, "D": H, "d_model": H, "dim": H,
    "N": N, "tokens": N, "num_tokens": N,
    "E": E, "num_experts": E, "n_experts": E, "experts": E,
    "K": K, "k": K, "top_k": K, "topk": K, "num_experts_per_tok": K,
    "I": INTER, "intermediate_size": INTER,
    "b": B, "s": S, "h": H, "n": N, "e": E,
    "P": P, "past": P, "past_len": P, "past_length": P, "cache_len": P,
    "V": V, "vocab": V, "vocab_size": V,
    "n_heads": HEADS, "num_heads": HEADS, "num_attention_heads": HEADS,
    "n_local_heads": HEADS, "heads": HEADS,
    "n_kv_heads": KV_HEADS, "num_kv_heads": KV_HEADS, "num_key_value_heads": KV_HEADS,
    "n_local_kv_heads": KV_HEADS, "kv_heads": KV_HEADS,
    "head_dim": HEAD_DIM, "d_head": HEAD_DIM,
}
EXPECTED = {"x_flat": (N, H), "scores": (N, E), "topk_idx": (N, K),
            "topk_weight": (N, K), "y": (B, S, H)}
Y_FLAT = (N, H)  # y while the experts add into it (§3's code calls it y too)
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(\S))")


class Unreadable(ValueError):
    """The text is no shape the parser knows; `said` tells the student why."""

    def __init__(self, said: Said):
        super().__init__(str(said))
        self.said = said


def _normalised(text: str) -> str:
    """Spellings of the same shape made one: `torch.Size(…)`, `(…)`, `×`, `·`, `x`."""
    text = text.strip().strip("`").strip()
    text = re.sub(r"^torch\.Size\s*\((.*)\)$", r"\1", text, flags=re.S).strip()
    text = text.replace("×", "*").replace("·", "*").replace("（", "(").replace("）", ")")
    text = text.replace("，", ",").replace("【", "[").replace("】", "]")
    text = re.sub(r"(?<=[\w)\]])\s*\bx\b\s*(?=[\w(\[])", "*", text)  # `B x S`
    if len(text) >= 2 and text[0] in "([" and text[-1] in ")]":
        text = text[1:-1]
    return text


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(text):
        number, name, other = m.groups()
        if number:
            out.append(("num", number))
        elif name:
            if name not in NAMES and "x" in name and all(p in NAMES for p in name.split("x")):
                for i, part in enumerate(name.split("x")):  # BxS
                    out += [("op", "*")] * bool(i) + [("name", part)]
            else:
                out.append(("name", name))
        elif other:
            out.append(("op", other))
    return out


def parse(text: str) -> tuple[sympy.Expr, ...]:
    """A shape's dimensions as SymPy expressions; raises Unreadable."""
    given = text.strip()
    toks = _tokens(_normalised(text))
    pos = 0

    def peek() -> tuple[str, str] | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> tuple[str, str]:
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def atom() -> sympy.Expr:
        tok = peek()
        if tok is None:
            raise Unreadable(say("shape_unreadable", given=f"`{given}`"))
        kind, value = take()
        if kind == "num":
            return sympy.Integer(int(value[:6]))
        if kind == "name":
            if value not in NAMES:
                raise Unreadable(say("shape_unknown_name", name=f"`{value}`"))
            return NAMES[value]
        if value in "([":
            inner = summed()
            if (closing := peek()) is None or closing[1] not in ")]":
                raise Unreadable(say("shape_unreadable", given=f"`{given}`"))
            take()
            return inner
        raise Unreadable(say("shape_unreadable", given=f"`{given}`"))

    def product() -> sympy.Expr:
        value = atom()
        while peek() == ("op", "*"):
            take()
            value = value * atom()
        return value

    def summed() -> sympy.Expr:
        value = product()
        while peek() in (("op", "+"), ("op", "-")):
            sign = take()[1]
            value = value + product() if sign == "+" else value - product()
        return value

    dims = []
    if not toks:
        raise Unreadable(say("shape_no_answer"))
    while True:
        dims.append(summed())
        if peek() is None:
            break
        if peek() != ("op", ","):
            raise Unreadable(say("shape_unreadable", given=f"`{given}`"))
        take()
        if peek() is None:  # a trailing comma: (N, H,)
            break
    return tuple(dims)


def same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(sympy.expand(x - y) == 0 for x, y in zip(a, b))


@dataclass
class FieldMark:
    """One field's verdict: `ok`, and what the page says (`why` when wrong, `note` when
    an alternative form was accepted)."""

    ok: bool
    score: float
    max_score: float
    why: Said | None = None
    note: Said | None = None


def mark_field(field: str, text: str, own: ShapeField | None = None
               ) -> tuple[bool, Said | None, Said | None]:
    """(right, why it is wrong, a note on an accepted alternative) for one field: of the
    question's own `shapes` (`own`), or else one of lesson 13's five."""
    if not text.strip():
        return False, say("shape_no_answer"), None
    try:
        dims = parse(text)
    except Unreadable as exc:
        return False, exc.said, None
    except RecursionError:  # brackets nested thousands deep
        return False, say("shape_unreadable", given="the answer"), None
    want = parse(own.shape) if own is not None else EXPECTED[field]
    if same(dims, want):
        return True, None, None
    if own is None and field == "y" and same(dims, Y_FLAT):
        return True, None, say("shape_y_flat")
    why = (Said({"en": own.why, "zh": own.why_zh or own.why}) if own is not None
           else say(f"shape_why_{field}"))
    given = f"`{text.strip()}`"
    if len(dims) != len(want):
        return False, say("shape_rank", given=given, got=len(dims), field=field,
                          want=len(want), why=why), None
    n = next(i for i, (x, y) in enumerate(zip(dims, want)) if sympy.expand(x - y) != 0)
    return False, say("shape_dim", n=n + 1, given=given, why=why), None


def mark(fields: dict[str, str], total: float,
         own: dict[str, ShapeField] | None = None) -> dict[str, FieldMark]:
    """Each field's mark: an equal share of `total` (whole units) when right, else 0.
    `own`: the question's `shapes` (course.yml), where it names its fields."""
    names = shape_fields(own or {})
    shares = points.shares(points.units(total, "the shapes question"), len(names))
    out = {}
    for field, share in zip(names, shares):
        ok, why, note = mark_field(field, fields.get(field, ""), (own or {}).get(field))
        out[field] = FieldMark(ok, points.as_points(share if ok else 0),
                               points.as_points(share), why, note)
    return out


def score(marks: dict[str, FieldMark]) -> float:
    """The question's mark, summed in whole units (points.py's one rounding)."""
    return points.as_points(sum(points.units(m.score, "a shape field") for m in marks.values()))
