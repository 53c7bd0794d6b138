"""Fresh, small inputs to trace this lesson's failing parts on (grader/judge/trace_inputs.py):
examples.py's makers at sizes its smallest examples never try (four tokens after two
cached ones, a padded batch of two), with the backward pass, so that a gradient the
wiring cuts is followed too. Seeded as examples.py's are, never a graded case.
Graders only: not shipped."""
from __future__ import annotations

from pathlib import Path

import torch

from grader.judge.smallest import load
from grader.judge.trace_inputs import Request, randn

EXAMPLES = load(Path(__file__).parent)
SIZES = dict(S=4, P=2, rep=2, kv=2, pad=1, cache=1, B=2, L=2)


def _requests(part: str, g: torch.Generator, *flags: dict) -> list[Request]:
    probe, _, make, _ = EXAMPLES.PARTS[part]
    out = []
    for changed in flags:
        args = make({**SIZES, **changed})
        gy = randn(g, *args["gy"].shape)
        out.append((probe, {**args, "gy": gy, "grads": True}))
    return out


BUILDERS = {
    "self_attn": lambda g: _requests("self_attn", g, {}),
    "block": lambda g: _requests("block", g, {"moe": 0}, {"moe": 1}),
    "model": lambda g: _requests("model", g, {"moe": 1}),
}
