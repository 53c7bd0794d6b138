"""Lesson 13b's questions (grader/judge/questions.py): for a wiring part no known mistake
explains, what the student's Attention, MiniMindBlock or model is asked on fresh inputs:
does the padding mask or the cache change anything, does the last token change the
earlier tokens' results (causal attention), do float64 inputs come back float64. Inputs
are examples.py's makers at sizes its smallest examples never try (more new tokens than
they have), from its fresh seeds: no graded case, so a student bundle may ship it."""
from __future__ import annotations

from pathlib import Path

import torch

from grader.judge.questions import Question
from grader.judge.smallest import load

EXAMPLES = load(Path(__file__).parent)
TOKENS = EXAMPLES.HIGH["S"] + 1  # more new tokens than any smallest example has
FUNCTIONS = {"self_attn": "Attention", "block": "MiniMindBlock",
             "model": "CourseMiniMindForCausalLM"}


def _made(part: str, i: int, **changed: int) -> dict | None:
    """examples.py's input for `part` on round i: another number of new tokens each
    round (its makers' seeds follow the sizes), after two cached ones, a padded batch of
    two, grouped-query heads, two MoE layers."""
    sizes = {**EXAMPLES.ONE, **dict(S=TOKENS + i, P=2, rep=2, kv=1, pad=1, cache=1, B=2,
                                    moe=1, L=2), **changed}
    return EXAMPLES.PARTS[part][2](sizes)


def _unpadded(args: dict | None) -> tuple[dict, dict] | None:
    """The pair: `args` with its padding mask, and with none."""
    return None if args is None else (args, {**args, "mask": None})


def _moved(past: object) -> object:
    """The cache with every cached value moved by 0.5."""
    if isinstance(past, torch.Tensor):
        return past + 0.5
    return None if past is None else [_moved(p) for p in past]


def _other_cache(args: dict | None) -> tuple[dict, dict] | None:
    return None if args is None else (args, {**args, "past": _moved(args["past"])})


def _last_token(args: dict | None) -> tuple[dict, dict] | None:
    """The pair: `args`, and `args` with the last new token changed (its hidden state, or
    its id)."""
    if args is None:
        return None
    if "input_ids" in args:
        ids = args["input_ids"].clone()
        ids[:, -1] = (ids[:, -1] + 1) % args["cfg"]["vocab_size"]
        return args, {**args, "input_ids": ids}
    x = args["x"].clone()
    x[:, -1] += 1.0
    return args, {**args, "x": x}


def _earlier(t: torch.Tensor) -> torch.Tensor:
    """An output [B, S, ...] of every new token but the last."""
    return t[:, :-1] if t.dim() >= 2 else t


def _asked(part: str) -> list[Question]:
    f, (probe, *_, outputs) = FUNCTIONS[part], EXAMPLES.PARTS[part]
    y = outputs[:1]  # the output (or logits), one row per new token
    return [
        Question("ignores", f, probe, tuple(outputs), lambda i: _unpadded(_made(part, i)),
                 argument="attention_mask", canonical=EXAMPLES.canonical),
        Question("ignores", f, probe, tuple(outputs),  # (unpadded: a model that drops
                 # the cache has fewer keys than a padding mask over the cache names)
                 lambda i: _other_cache(_made(part, i, pad=0)),
                 argument="past_key_values" if part == "model" else "past_key_value",
                 canonical=EXAMPLES.canonical),
        Question("earlier", f, probe, tuple(y), lambda i: _last_token(_made(part, i, pad=0)),
                 others=_earlier),
        Question("dtype", f, probe, tuple(y), lambda i: _made(part, i)),
    ]


QUESTIONS: dict[str, list[Question]] = {part: _asked(part) for part in FUNCTIONS}
