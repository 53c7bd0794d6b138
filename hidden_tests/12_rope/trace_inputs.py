"""Fresh, small inputs to trace this lesson's failing parts on (grader/judge/trace_inputs.py):
seeded from far above any test's seed, never a graded case. Graders only: not shipped."""
from __future__ import annotations

import torch

from grader.judge.trace_inputs import SEED_BASE, Request, randn


def _freqs(g: torch.Generator) -> list[Request]:
    yarn = {"original_max_position_embeddings": 4, "factor": 4, "beta_fast": 4.0,
            "beta_slow": 1.0, "attention_factor": 1.2}
    return [("freqs", dict(dim=8, rows=(0, 12, 1), end=12, rope_base=100.0)),
            ("freqs", dict(dim=8, rows=(0, 16, 1), end=16, rope_base=100.0,
                           rope_scaling=yarn)),
            ("freqs", dict(dim=8, rows=(0, 16, 1), end=16))]


def _apply(g: torch.Generator) -> list[Request]:
    t = torch.outer(torch.arange(3, dtype=torch.float64), randn(g, 4).abs())
    cos, sin = torch.cat([t.cos(), t.cos()], -1), torch.cat([t.sin(), t.sin()], -1)
    return [("apply", dict(q=randn(g, 2, 3, 2, 8), k=randn(g, 2, 3, 1, 8), cos=cos,
                           sin=sin))]


def _offset(g: torch.Generator) -> list[Request]:
    seed = int(torch.randint(1 << 30, (1,), generator=g)) + SEED_BASE
    return [("offset", dict(end=16, dim=4, seed=seed, seq_length=3, past=[2, 5, 1, 4])),
            ("offset", dict(end=16, dim=4, seed=seed, seq_length=3))]


BUILDERS = {"freqs": _freqs, "apply": _apply, "offset": _offset}
