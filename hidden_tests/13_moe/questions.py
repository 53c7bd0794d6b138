"""Lesson 13's questions (grader/judge/questions.py): for a failing part no known mistake
explains, what the student's function is asked on fresh inputs, to find an argument
with no effect, float64 in and another dtype out, or a token's output that depends on
other tokens. Inputs are made by examples.py's makers at sizes its smallest examples
never try (more than MAX_SIDE tokens), from its fresh seeds: no graded case. Shipped
in the student bundle (fresh inputs only)."""
from __future__ import annotations

from pathlib import Path

import torch

from grader.judge.questions import ROUNDS, Question
from grader.judge.smallest import generator, load, rounded

EXAMPLES = load(Path(__file__).parent)
TOKENS = EXAMPLES.MAX_SIDE + 2   # more tokens than any smallest example has
TRIES = 20                       # sizes tried for one round (a near tie in top-k skips one)


def _made(part: str, i: int) -> dict | None:
    """examples.py's input for `part` on round i: another number of tokens each round
    (its makers' seeds follow the sizes), so no two rounds ask the same."""
    make = EXAMPLES.PARTS[part][2]
    for j in range(TRIES):
        sizes = {**EXAMPLES.ONE,  # every size examples.py's makers read, at its least
                 **dict(N=TOKENS + i + ROUNDS * j, E=4, K=2, H=3 + i, I=4, norm=1, coef=0,
                        eval=0)}
        args = make(sizes)
        if args is not None:
            return args
    return None


def _changed(args: dict | None, name: str, new: object) -> tuple[dict, dict] | None:
    return None if args is None else (args, {**args, name: new})


def _first_token(args: dict | None, name: str) -> tuple[dict, dict] | None:
    """The pair: `args`, and `args` with the first token's input in `name` changed."""
    if args is None:
        return None
    x = args[name].clone()
    x.view(-1, x.shape[-1])[0] += 1.0
    return args, {**args, name: x}


def _others(t: torch.Tensor) -> torch.Tensor:
    """A per-token output's values for every token but the first (tokens: the rows of
    the tensor flattened to its last axis; a 1-d output is one value per token)."""
    return t.reshape(-1, t.shape[-1])[1:] if t.dim() >= 2 else t[1:]


def _routing(args: dict | None, i: int) -> tuple[dict, dict] | None:
    """The same scores, another routing of the same shape (each token's K distinct
    experts)."""
    if args is None:
        return None
    idx = args["topk_idx"]
    g = generator(6, i, *idx.shape)
    other = torch.stack([torch.randperm(args["num_experts"], generator=g)[:idx.shape[1]]
                         for _ in range(idx.shape[0])])
    return _changed(args, "topk_idx", other)


def _scores(args: dict | None, i: int) -> tuple[dict, dict] | None:
    if args is None:
        return None
    g = generator(7, i, *args["scores"].shape)
    return _changed(args, "scores", torch.softmax(rounded(g, *args["scores"].shape) * 2, -1))


def _weights(args: dict | None) -> tuple[dict, dict] | None:
    return None if args is None else _changed(args, "topk_weight", args["topk_weight"] * 0.5 + 0.3)


def _norm(args: dict | None) -> tuple[dict, dict] | None:
    return None if args is None else (args, {**args, "norm": not args["norm"]})


canonical = EXAMPLES.canonical
ROUTE = ("scores", "topk_weight", "topk_idx")
QUESTIONS: dict[str, list[Question]] = {
    "ffn": [
        Question("rows", "FeedForward", "ffn_forward", ("y",),
                 lambda i: _first_token(_made("ffn", i), "x"), others=_others),
        Question("dtype", "FeedForward", "ffn_forward", ("y",), lambda i: _made("ffn", i)),
    ],
    "router": [
        Question("ignores", "route", "route", ROUTE, lambda i: _norm(_made("router", i)),
                 argument="norm_topk_prob", canonical=canonical),
        Question("rows", "route", "route", ROUTE,
                 lambda i: _first_token(_made("router", i), "x_flat"), others=_others,
                 canonical=canonical),
        Question("dtype", "route", "route", ROUTE, lambda i: _made("router", i),
                 canonical=canonical),
    ],
    "dispatch": [
        Question("ignores", "dispatch", "dispatch", ("y",),
                 lambda i: _weights(_made("dispatch", i)), argument="topk_weight"),
        Question("rows", "dispatch", "dispatch", ("y",),
                 lambda i: _first_token(_made("dispatch", i), "x_flat"), others=_others),
        Question("dtype", "dispatch", "dispatch", ("y",), lambda i: _made("dispatch", i)),
    ],
    "aux_loss": [
        Question("ignores", "load_balancing_loss", "aux_loss", ("aux",),
                 lambda i: _routing(_made("aux_loss", i), i), argument="topk_idx"),
        Question("ignores", "load_balancing_loss", "aux_loss", ("aux",),
                 lambda i: _scores(_made("aux_loss", i), i), argument="scores"),
        Question("dtype", "load_balancing_loss", "aux_loss", ("aux",),
                 lambda i: _made("aux_loss", i)),
    ],
    "moe": [
        Question("rows", "MOEFeedForward", "moe", ("y",),
                 lambda i: _first_token(_made("moe", i), "x"), others=_others),
        Question("dtype", "MOEFeedForward", "moe", ("y", "aux"), lambda i: _made("moe", i)),
    ],
}
