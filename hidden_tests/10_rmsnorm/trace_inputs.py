"""Fresh, small inputs to trace this lesson's failing parts on (grader/judge/trace_inputs.py):
seeded from far above any test's seed, never a graded case. Graders only: not shipped."""
from __future__ import annotations

import torch

from grader.judge.trace_inputs import Request, randn


def _rmsnorm(g: torch.Generator) -> list[Request]:
    out = []
    for dtype in (torch.float64, torch.bfloat16):
        weight = (randn(g, 6) * 0.5 + 1.0).to(dtype)
        out.append(("rmsnorm", dict(dim=6, eps=1e-5, weight=weight,
                                    x=randn(g, 2, 3, 6, scale=2.0, dtype=dtype),
                                    gy=randn(g, 2, 3, 6, dtype=dtype))))
    return out


BUILDERS = {"norm": _rmsnorm}
