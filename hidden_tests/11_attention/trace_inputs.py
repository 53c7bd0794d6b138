"""Fresh, small inputs to trace this lesson's failing parts on (grader/judge/trace_inputs.py):
seeded from far above any test's seed, never a graded case. Graders only: not shipped."""
from __future__ import annotations

import torch

from grader.judge.trace_inputs import Request, randn


def _repeat_kv(g: torch.Generator) -> list[Request]:
    return [("repeat_kv", dict(x=randn(g, 1, 3, 2, 4), n_rep=2))]


def _mask(g: torch.Generator) -> list[Request]:
    pad = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.float64)
    return [("mask", dict(scores=randn(g, 2, 2, 3, 5), attention_mask=pad)),
            ("mask", dict(scores=randn(g, 1, 2, 3, 3)))]


def _attention(g: torch.Generator) -> list[Request]:
    pad = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.float64)
    return [("attention", dict(xq=randn(g, 2, 3, 4, 4), xk=randn(g, 2, 5, 2, 4),
                               xv=randn(g, 2, 5, 2, 4), attention_mask=pad,
                               gy=randn(g, 2, 3, 16)))]


BUILDERS = {"repeat_kv": _repeat_kv, "mask": _mask, "attention": _attention}
