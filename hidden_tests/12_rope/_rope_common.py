"""Lesson 12's test helpers: input makers and per-call checks (trusted side).

Shared by the graded and the practice tests and shipped to students with the
practice tests, so it holds no case and no seed: every graded case lives in the
graded `test_<part>.py` files. Inputs are drawn from seeded generators and cached
(probes clone what they are given, so cached tensors are never modified). The
tables `apply` rotates by are the reference's own (its `freqs` results), so a bug
in a student's tables costs points in part "freqs" only.
"""
from functools import lru_cache

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
# MiniMind's inference_rope_scaling=True: YaRN from a 2048-token training length to 32k.
MINIMIND_YARN = {"beta_fast": 32, "beta_slow": 1, "factor": 16,
                 "original_max_position_embeddings": 2048, "attention_factor": 1.0,
                 "type": "yarn"}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def freqs_args(dim: int, rows: tuple, end=None, rope_base=None, rope_scaling=None) -> dict:
    return dict(dim=dim, rows=rows, end=end, rope_base=rope_base, rope_scaling=rope_scaling)


def check_freqs(check, got: dict, ref: dict, tol: str | None = None) -> None:
    """Both tables: shape and dtype of the whole, values of the rows sent back."""
    check.equal("table shapes", got["shape"], ref["shape"],
                f"shapes {got['shape']}, expected {ref['shape']} ([end, dim] each)")
    check.equal("table dtypes", got["dtype"], ref["dtype"],
                f"dtypes {got['dtype']}, expected {ref['dtype']}")
    check.close("cos table", got["cos"], ref["cos"], tol=tol)
    check.close("sin table", got["sin"], ref["sin"], tol=tol)


@lru_cache(maxsize=None)
def qk(seed: int, dtype: str, q_shape: tuple, k_shape: tuple) -> tuple:
    g, d = gen(seed), DTYPES[dtype]
    return randn(g, *q_shape, dtype=d), randn(g, *k_shape, dtype=d)


def apply_args(reference, seed: int, dtype: str, batch: int, heads: int, kv_heads: int,
               positions: tuple, freqs: dict, layout: str = "bshd") -> dict:
    """q [B, S, H, D] and k [B, S, H_kv, D] (or [B, H, S, D] with unsqueeze_dim=0 for
    layout "bhsd"), rotated by the reference's table rows `positions` (start, stop)."""
    table = reference.call("freqs", **freqs_args(rows=(*positions, 1), **freqs))
    dim, seq = table["cos"].shape[-1], positions[1] - positions[0]
    q_shape, k_shape = (batch, seq, heads, dim), (batch, seq, kv_heads, dim)
    if layout == "bhsd":
        q_shape, k_shape = (batch, heads, seq, dim), (batch, kv_heads, seq, dim)
    q, k = qk(seed, dtype, q_shape, k_shape)
    return dict(q=q, k=k, cos=table["cos"], sin=table["sin"],
                unsqueeze_dim=0 if layout == "bhsd" else None)


def check_apply(check, got: dict, ref: dict, tol: str | None = None) -> None:
    for name in ("q", "k"):
        check.shape(f"{name}_embed shape", got[name], tuple(ref[name].shape))
        check.equal(f"{name}_embed dtype", str(got[name].dtype), str(ref[name].dtype),
                    f"{name}_embed is {got[name].dtype}, expected {ref[name].dtype} "
                    f"(the dtype of {name})")
        check.close(f"{name}_embed", got[name], ref[name], tol=tol)


def check_offset(check, got: dict, ref: dict) -> None:
    check.equal("row shapes", got["shape"], ref["shape"],
                f"shapes {got['shape']}, expected {ref['shape']} ([seq_length, dim] each)")
    dtypes = [str(got["cos"].dtype), str(got["sin"].dtype)]
    check.equal("row dtypes", dtypes, [str(ref["cos"].dtype), str(ref["sin"].dtype)],
                f"dtypes {dtypes}: the rows are the tables' own, not converted")
    check.close("cos rows", got["cos"], ref["cos"])
    check.close("sin rows", got["sin"], ref["sin"])
