"""Lesson 10's smallest failing examples (grader/judge/smallest.py): which fresh inputs the
part is tried on, smallest first, and the lines of the snippet that call the student's
layer. Shipped in the student bundle (fresh inputs only)."""
from __future__ import annotations

from collections.abc import Callable

import torch

from grader.judge.smallest import Example, generator, literal, rounded

MODULE = "10_rmsnorm"  # what the snippet imports: the student's file, next to it
EPS = 1e-5             # MiniMind's: a missing eps shows in the sixth digit
# float16 activations as test_norm.py's overflow cases: |x| >= 256 squares past float16's
# largest value (65504), which a layer that does not upcast to float32 cannot take
OVERFLOW = 256
# float16 results as test_norm.py compares them (HALF_ATOL, HALF_RTOL): a correct layer
# may round once or twice more than the reference
TOLERANCES = {("norm", "y"): {"float16": (1e-3, 4e-3)}}


def _norm(s: dict) -> dict | None:
    g = generator(10, s["S"], s["D"], s["half"])
    weight = torch.round((rounded(g, s["D"]) * 0.5 + 1) * 100) / 100  # near one
    x = rounded(g, 1, s["S"], s["D"])
    if s["half"]:
        x = x * 300  # whole numbers, exact in float16
        if x.abs().max() < OVERFLOW:
            return None  # nothing overflows: not the case this flag is for
        x, weight = x.half(), (torch.round(weight * 16) / 16).half()  # exact in float16
    elif (x.pow(2).mean(-1) < 0.01).any():
        return None  # a row near zero: eps decides its scale, not the formula
    return dict(dim=s["D"], eps=EPS, weight=weight, x=x, gy=torch.zeros_like(x))


# part -> (probe, size names, maker, outputs compared); `half`: float16 activations
ONE = dict(S=1, D=1, half=0)
HIGH = dict(S=3, D=4, half=1)
PARTS: dict[str, tuple[str, tuple[str, ...], Callable[[dict], dict | None], list[str]]] = {
    "norm": ("rmsnorm", ("S", "D", "half"), _norm, ["y"]),
}


def lines(example: Example) -> list[str]:
    """The snippet's lines that build the layer, load its weight and call it (`m`, the
    student's module), as the grader's probe does."""
    a = example.args
    dtype = str(a["x"].dtype).removeprefix("torch.")
    return [f"norm = m.RMSNorm({a['dim']}, eps={a['eps']}).to(torch.{dtype})",
            "with torch.no_grad():",
            f"    norm.weight.copy_({literal(a['weight'])})",
            f"x = {literal(a['x'])}",
            "print(norm(x))"]
