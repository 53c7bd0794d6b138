"""Deterministic inputs for the lesson-13 hidden tests (trusted side only).

Cached: every student gets the same inputs, drawn once per process (probes
clone what they are given, so the cached tensors are never modified).

Everything is drawn from seeded generators; router inputs are redrawn until no
token has a near-tie between its K-th and (K+1)-th expert, since CPU top-k breaks
ties arbitrarily and a fair test must not depend on that.
"""
from functools import lru_cache

import torch

H, I, E = 64, 128, 4          # hidden, intermediate, experts
B, S = 2, 5                   # B > 1 so a missing reshape cannot hide
DTYPES = {"float32": torch.float32, "float64": torch.float64}
MIN_GAP = 1e-3


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, dtype=torch.float64, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def ffn_state(g, dtype, hidden=H, inter=I, prefix=""):
    return {f"{prefix}gate_proj.weight": randn(g, inter, hidden, dtype=dtype, scale=hidden ** -0.5),
            f"{prefix}up_proj.weight": randn(g, inter, hidden, dtype=dtype, scale=hidden ** -0.5),
            f"{prefix}down_proj.weight": randn(g, hidden, inter, dtype=dtype, scale=inter ** -0.5)}


def no_ties(logits: torch.Tensor, k: int) -> bool:
    top = logits.sort(dim=-1, descending=True).values
    if k >= logits.shape[-1]:
        return True
    return bool(((top[:, k - 1] - top[:, k]) > MIN_GAP).all())


@lru_cache(maxsize=None)
def router_inputs(seed: int, dtype, k: int, n: int = B * S):
    """(gate weight [E,H], x_flat [N,H]) with a clear top-k for every token."""
    for attempt in range(100):
        g = gen(seed * 1000 + attempt)
        w = randn(g, E, H, dtype=dtype, scale=H ** -0.5 * 3)
        x = randn(g, n, H, dtype=dtype)
        if no_ties(torch.softmax(x.double() @ w.double().T, -1), k):
            return w, x
    raise RuntimeError("no tie-free router inputs found")


@lru_cache(maxsize=None)
def routing(seed: int, dtype, k: int, n: int = B * S):
    """Reference-free routing inputs for dispatch and aux: distinct experts per token."""
    g = gen(seed)
    idx = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(n)])
    weight = torch.rand(n, k, generator=g, dtype=torch.float64).to(dtype) + 0.1
    scores = torch.softmax(randn(g, n, E, dtype=torch.float64) * 2, -1).to(dtype)
    return idx, weight, scores


@lru_cache(maxsize=None)
def expert_weights(seed: int, dtype, hidden=H, inter=I):
    g = gen(seed + 7)
    return [(randn(g, inter, hidden, dtype=dtype, scale=hidden ** -0.5),
             randn(g, inter, hidden, dtype=dtype, scale=hidden ** -0.5),
             randn(g, hidden, inter, dtype=dtype, scale=inter ** -0.5)) for _ in range(E)]


@lru_cache(maxsize=None)
def moe_inputs(seed: int, dtype, k: int):
    """Full MoE weights (gate + E experts) and x [B,S,H] with tie-free routing."""
    w, x_flat = router_inputs(seed, dtype, k)
    g = gen(seed + 99)
    state = {"gate.weight": w}
    for e in range(E):
        state.update(ffn_state(g, dtype, prefix=f"experts.{e}."))
    gy = randn(g, B, S, H, dtype=dtype)
    return state, x_flat.reshape(B, S, H), gy
