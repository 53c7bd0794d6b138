"""Lesson 11's questions (grader/judge/questions.py): for a failing part no known mistake
explains, what the student's function is asked on fresh inputs: whether the padding
mask or n_rep has any effect, whether a token's output changes with a later token's
input (attention is causal), and whether float64 stays float64. Inputs are made by
examples.py's makers at sizes its smallest examples never try (beyond its HIGH), from
its fresh seeds: no graded case. Shipped in the student bundle (fresh inputs only)."""
from __future__ import annotations

from pathlib import Path

import torch

from grader.judge.questions import ROUNDS, Question
from grader.judge.smallest import load

EXAMPLES = load(Path(__file__).parent)
TRIES = 20  # sizes tried for one round (a padding mask needs room for a 0)


def _made(part: str, i: int, pad: int = 1) -> dict | None:
    """examples.py's input for `part` on round i: one batch, more tokens, heads and
    features than its smallest examples try, another size each round."""
    high = EXAMPLES.HIGH
    for j in range(TRIES):
        sizes = dict(B=1, T=high["T"] + 2 + i + ROUNDS * j, S=high["S"] + 2 + i + ROUNDS * j,
                     past=high["past"] + 1 + i, H=high["H"] + 1, kv=high["kv"],
                     rep=high["rep"] - 1, D=high["D"] + 2 + i, pad=pad)
        args = EXAMPLES.PARTS[part][2](sizes)
        if args is not None:
            return args
    return None


def _unpadded(args: dict | None) -> tuple[dict, dict] | None:
    """The pair: `args` with its padding mask, and the same without one."""
    return None if args is None else (args, {**args, "attention_mask": None})


def _n_rep(args: dict | None) -> tuple[dict, dict] | None:
    return None if args is None else (args, {**args, "n_rep": args["n_rep"] + 1})


def _last_token(args: dict | None) -> tuple[dict, dict] | None:
    """The pair: `args`, and `args` with the last token's query, key and value changed
    (the last of the cache's keys and the new tokens' is the last new token's)."""
    if args is None:
        return None
    moved = {}
    for name in ("xq", "xk", "xv"):
        t = args[name].clone()
        t[:, -1] += 1.0
        moved[name] = t
    return args, {**args, **moved}


def _earlier(t: torch.Tensor) -> torch.Tensor:
    """The output [B, S, H·D] of every token but the last."""
    return t[:, :-1] if t.dim() >= 2 else t


canonical = EXAMPLES.canonical
QUESTIONS: dict[str, list[Question]] = {
    "repeat_kv": [
        Question("ignores", "repeat_kv", "repeat_kv", ("y",),
                 lambda i: _n_rep(_made("repeat_kv", i)), argument="n_rep"),
        Question("dtype", "repeat_kv", "repeat_kv", ("y",), lambda i: _made("repeat_kv", i)),
    ],
    "mask": [
        Question("ignores", "mask_scores", "mask", ("scores",),
                 lambda i: _unpadded(_made("mask", i)), argument="attention_mask",
                 canonical=canonical),
        Question("dtype", "mask_scores", "mask", ("scores",), lambda i: _made("mask", i),
                 canonical=canonical),
    ],
    "attention": [
        Question("ignores", "attention", "attention", ("y",),
                 lambda i: _unpadded(_made("attention", i)), argument="attention_mask"),
        Question("earlier", "attention", "attention", ("y",),
                 lambda i: _last_token(_made("attention", i, pad=0)), others=_earlier),
        Question("dtype", "attention", "attention", ("y",), lambda i: _made("attention", i)),
    ],
}
