"""Lesson 11's smallest failing examples (grader/judge/smallest.py): which fresh inputs each
part is tried on, smallest first, how two outputs are compared, and the lines of the
snippet that call the student's function. Shipped in the student bundle (fresh inputs only)."""
from __future__ import annotations

from collections.abc import Callable

import torch

from grader.judge.smallest import Example, generator, literal, rounded

MODULE = "11_attention"  # what the snippet imports: the student's file, next to it
# probes.py returns a masked place as this finite value; shown as -inf, as MiniMind
# writes it (any value at or below it counts as masked)
LOWEST = -3.0e38
# course.yml's `attention` tolerance: MiniMind's softmax is float32 whatever the inputs'
# dtype, so a correct float64 softmax differs from it by up to 2.1e-7
TOLERANCES = {("attention", "y"): {"float64": (1.0e-5, 1.0e-4)}}


def _padding(g: torch.Generator, batch: int, total: int) -> torch.Tensor | None:
    """[batch, total] of 1 (a token) and 0 (padding) with at least one 0 and the first
    key of every row a token (no query sees only padding: MiniMind's -1e9 then gives a
    uniform row, which says nothing); None where there is no room for that."""
    if total < 2:
        return None
    keep = (torch.rand(batch, total, generator=g) < 0.7).long()
    keep[:, 0] = 1
    if bool(keep.all()):
        keep[0, -1] = 0
    return keep


def _repeat_kv(s: dict) -> dict:
    g = generator(11, s["B"], s["T"], s["kv"], s["D"], s["rep"])
    return dict(x=rounded(g, s["B"], s["T"], s["kv"], s["D"]), n_rep=s["rep"])


def _mask(s: dict) -> dict | None:
    g = generator(12, s["B"], s["H"], s["S"], s["past"], s["pad"])
    total = s["past"] + s["S"]
    scores = rounded(g, s["B"], s["H"], s["S"], total)
    if not s["pad"]:
        return dict(scores=scores, attention_mask=None)
    pad = _padding(g, s["B"], total)
    return None if pad is None else dict(scores=scores, attention_mask=pad)


def _attention(s: dict) -> dict | None:
    g = generator(13, s["B"], s["S"], s["past"], s["kv"], s["rep"], s["D"], s["pad"])
    total, heads = s["past"] + s["S"], s["kv"] * s["rep"]
    args = dict(xq=rounded(g, s["B"], s["S"], heads, s["D"]),
                xk=rounded(g, s["B"], total, s["kv"], s["D"]),
                xv=rounded(g, s["B"], total, s["kv"], s["D"]), attention_mask=None)
    if s["pad"]:
        args["attention_mask"] = _padding(g, s["B"], total)
        if args["attention_mask"] is None:
            return None
    return args


# part -> (probe, size names, maker, outputs compared); past: keys in the KV cache,
# pad: a padding mask given, rep: query heads per kv head
ONE = dict(B=1, T=1, S=1, past=0, H=1, kv=1, rep=1, D=1, pad=0)
HIGH = dict(B=2, T=2, S=3, past=2, H=2, kv=2, rep=3, D=2, pad=1)
PARTS: dict[str, tuple[str, tuple[str, ...], Callable[[dict], dict | None], list[str]]] = {
    "repeat_kv": ("repeat_kv", ("rep", "kv", "T", "D", "B"), _repeat_kv, ["y"]),
    "mask": ("mask", ("S", "past", "pad", "B", "H"), _mask, ["scores"]),
    "attention": ("attention", ("S", "past", "rep", "kv", "D", "pad", "B"), _attention,
                  ["y"]),
}


def canonical(out: dict) -> dict:
    """Masked places as -inf: what MiniMind's mask writes and a student's print shows."""
    scores = out.get("scores")
    if isinstance(scores, torch.Tensor) and scores.is_floating_point():
        scores = scores.masked_fill(scores <= LOWEST, float("-inf"))
        return {**out, "scores": scores.masked_fill(scores >= -LOWEST, float("inf"))}
    return out


def lines(example: Example) -> list[str]:
    """The snippet's lines that build the part's inputs and call the student's function
    (`m`, their module)."""
    a = example.args
    if example.part == "repeat_kv":
        return [f"x = {literal(a['x'])}", f"print(m.repeat_kv(x, {a['n_rep']}))"]
    mask = a["attention_mask"]
    out = [f"attention_mask = {literal(mask) if mask is not None else None}"]
    if example.part == "mask":
        return [f"scores = {literal(a['scores'])}", *out,
                "print(m.mask_scores(scores, attention_mask))"]
    return [f"xq = {literal(a['xq'])}", f"xk = {literal(a['xk'])}",
            f"xv = {literal(a['xv'])}", *out,
            "print(m.attention(xq, xk, xv, attention_mask))"]
