"""Lesson 11's test helpers: input makers and per-call checks (trusted side).

Shared by the graded and the practice tests and shipped to students with the
practice tests, so it holds no case and no seed: every graded case lives in a graded
`test_<part>.py`. Inputs are drawn in float64 from seeded generators, then cast, and
cached (probes clone what they are given). Padding masks keep the first key of every
row, so no query has every key masked (MiniMind's -1e9 then gives a uniform row that
nothing checks); they are int64 like a tokenizer's.
"""
from functools import lru_cache

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
EXPLAINED = "matches the reference with the mistakes found in your other parts"


def randn(g: torch.Generator, *shape: int, dtype: str = "float32") -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(DTYPES[dtype])


def padding(g: torch.Generator, batch: int, total: int) -> torch.Tensor:
    """[batch, total] of 1 (a token) and 0 (padding), the first key always a token."""
    keep = (torch.rand(batch, total, generator=g) < 0.7).long()
    keep[:, 0] = 1
    return keep


@lru_cache(maxsize=None)
def kv(seed: int, dtype: str, shape: tuple) -> torch.Tensor:
    return randn(torch.Generator().manual_seed(seed), *shape, dtype=dtype)


@lru_cache(maxsize=None)
def scores_args(seed: int, dtype: str, batch: int, heads: int, seq: int, past: int,
                padded: bool) -> dict:
    """Scores [B, H, S, past + S] and, if `padded`, a padding mask [B, past + S]."""
    g = torch.Generator().manual_seed(seed)
    scores = randn(g, batch, heads, seq, past + seq, dtype=dtype)
    return dict(scores=scores, attention_mask=padding(g, batch, past + seq) if padded else None)


@lru_cache(maxsize=None)
def attention_args(seed: int, dtype: str, batch: int, seq: int, past: int, heads: int,
                   kv_heads: int, head_dim: int, padded: bool, grads: bool = False) -> dict:
    """xq [B, S, H, D], xk and xv [B, past + S, H_kv, D], a padding mask if `padded`, and
    an upstream gradient for the output [B, S, H·D] if `grads`."""
    g = torch.Generator().manual_seed(seed)
    total = past + seq
    args = dict(xq=randn(g, batch, seq, heads, head_dim, dtype=dtype),
                xk=randn(g, batch, total, kv_heads, head_dim, dtype=dtype),
                xv=randn(g, batch, total, kv_heads, head_dim, dtype=dtype),
                attention_mask=padding(g, batch, total) if padded else None)
    if grads:
        args["gy"] = randn(g, batch, seq, heads * head_dim, dtype=dtype)
    return args


def check_tensor(check, name: str, got, ref, alt=None, tol: str | None = None) -> None:
    """Shape, dtype, then values (against `alt`, trusted results, when given)."""
    check.shape(f"{name} shape", got, tuple(ref.shape))
    check.equal(f"{name} dtype", str(getattr(got, "dtype", type(got).__name__)), str(ref.dtype),
                f"{name} is {getattr(got, 'dtype', type(got).__name__)}, expected {ref.dtype} "
                "(the inputs' dtype)")
    if alt is None:
        check.close(name, got, ref, tol=tol)
    else:
        check.close(name, got, ref, tol=tol, alt=alt, alt_note=EXPLAINED)


def check_attention(check, got: dict, ref: dict, explained) -> None:
    """The output, and the gradients when asked for, against the reference or else the
    solution with the mistakes found in the other parts (`explained()`, on a mismatch).
    The `attention` tolerance: MiniMind's softmax is float32 whatever the inputs' dtype."""
    check_tensor(check, "output", got["y"], ref["y"],
                 alt=lambda: [r["y"] for r in explained()], tol="attention")
    for name in ("q_grad", "k_grad", "v_grad"):
        if name in ref:
            check.grad(name, got[name], ref[name], tol="attention",
                       alt=lambda name=name: [r[name] for r in explained()],
                       alt_note=EXPLAINED)
