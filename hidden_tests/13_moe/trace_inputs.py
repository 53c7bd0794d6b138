"""Fresh, small inputs to trace this lesson's failing parts on (grader/judge/trace_inputs.py):
seeded from far above any test's seed, never a graded case. Graders only: not shipped."""
from __future__ import annotations

import torch

from grader.judge.trace_inputs import Request, randn


H, INTER, E, K, N = 4, 6, 4, 2, 5  # hidden, intermediate, experts, top-k, tokens


def _ffn_state(g: torch.Generator, prefix: str = "") -> dict:
    return {f"{prefix}gate_proj.weight": randn(g, INTER, H, scale=H ** -0.5),
            f"{prefix}up_proj.weight": randn(g, INTER, H, scale=H ** -0.5),
            f"{prefix}down_proj.weight": randn(g, H, INTER, scale=INTER ** -0.5)}


def _ffn(g: torch.Generator) -> list[Request]:
    return [("ffn_forward", dict(hidden=H, inter=INTER, state=_ffn_state(g),
                                 x=randn(g, 1, N, H), gy=randn(g, 1, N, H)))]


def _routing(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(N)])
    weight = torch.rand(N, K, generator=g, dtype=torch.float64) + 0.1
    scores = torch.softmax(randn(g, N, E) * 2, -1)
    return idx, weight, scores


def _router(g: torch.Generator) -> list[Request]:
    out = []
    for norm in (True, False):
        out.append(("route", dict(gate_weight=randn(g, E, H, scale=1.5), x_flat=randn(g, N, H),
                                  k=K, norm=norm, g_scores=randn(g, N, E),
                                  g_weight=randn(g, N, E))))
    return out


def _dispatch(g: torch.Generator) -> list[Request]:
    idx, weight, _ = _routing(g)
    experts = [tuple(_ffn_state(g).values()) for _ in range(E)]
    return [("dispatch", dict(expert_weights=experts, x_flat=randn(g, N, H), topk_weight=weight,
                              topk_idx=idx, gy=randn(g, N, H)))]


def _aux(g: torch.Generator) -> list[Request]:
    idx, _, scores = _routing(g)
    return [("aux_loss", dict(scores=scores, topk_idx=idx, num_experts=E, coef=0.1))]


def _moe(g: torch.Generator) -> list[Request]:
    out = []
    for norm, train in ((True, True), (False, False)):
        state = {"gate.weight": randn(g, E, H, scale=1.5)}
        for i in range(E):
            state.update(_ffn_state(g, f"experts.{i}."))
        out.append(("moe", dict(hidden=H, inter=INTER, num_experts=E, k=K, norm=norm, coef=0.1,
                                state=state, x=randn(g, 2, 3, H), gy=randn(g, 2, 3, H),
                                train=train)))
    return out


BUILDERS = {"ffn": _ffn, "router": _router, "dispatch": _dispatch, "aux_loss": _aux,
            "moe": _moe}
