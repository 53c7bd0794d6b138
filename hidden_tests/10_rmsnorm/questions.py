"""Lesson 10's questions (grader/judge/questions.py): for a failing part no known mistake
explains, what the student's RMSNorm is asked on fresh inputs: whether eps or the
weight has any effect, whether a token's output depends on other tokens, and whether
float64 stays float64. Inputs are made by examples.py's maker at sizes its smallest
examples never try (more tokens and features than its HIGH), from its fresh seeds: no
graded case. Shipped in the student bundle (fresh inputs only)."""
from __future__ import annotations

from pathlib import Path

import torch

from grader.judge.questions import ROUNDS, Question
from grader.judge.smallest import load

EXAMPLES = load(Path(__file__).parent)
TRIES = 20     # sizes tried for one round (a row near zero skips one)
BIG_EPS = 0.5  # as test_norm.py's large eps: next to mean(x²) ~ 1, plainly visible


def _made(i: int) -> dict | None:
    """examples.py's input on round i: more tokens and features than its smallest
    examples try, another size each round (its seeds follow the sizes)."""
    for j in range(TRIES):
        sizes = dict(S=EXAMPLES.HIGH["S"] + 2 + i + ROUNDS * j, D=EXAMPLES.HIGH["D"] + 2 + i,
                     half=0)
        args = EXAMPLES.PARTS["norm"][2](sizes)
        if args is not None:
            return args
    return None


def _changed(args: dict | None, name: str, new) -> tuple[dict, dict] | None:
    return None if args is None else (args, {**args, name: new(args[name])})


def _first_token(args: dict | None) -> tuple[dict, dict] | None:
    """The pair: `args`, and `args` with the first token's features changed."""
    def moved(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x.view(-1, x.shape[-1])[0] += 1.0
        return x
    return _changed(args, "x", moved)


def _others(t: torch.Tensor) -> torch.Tensor:
    """Every token's output but the first's."""
    return t.reshape(-1, t.shape[-1])[1:]


QUESTIONS: dict[str, list[Question]] = {
    "norm": [
        Question("ignores", "RMSNorm", "rmsnorm", ("y",),
                 lambda i: _changed(_made(i), "eps", lambda _: BIG_EPS), argument="eps"),
        Question("ignores", "RMSNorm", "rmsnorm", ("y",),
                 lambda i: _changed(_made(i), "weight", lambda w: w * 0.5 + 0.3),
                 argument="weight"),
        Question("rows", "RMSNorm", "rmsnorm", ("y",), lambda i: _first_token(_made(i)),
                 others=_others),
        Question("dtype", "RMSNorm", "rmsnorm", ("y",), _made),
    ],
}
