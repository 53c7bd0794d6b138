"""Lesson 12 probes: call one RoPE function on given inputs, return tensors.

The same functions run on the student's module inside the sandbox and on the
solution (or a known-mistake variant) on the trusted side. This file is visible
inside the sandbox: it holds no answers. Tables are returned as rows
`start:stop:step` (a 32k-row table is 12 MiB; every 64th row shows its drift and its
mistakes), with the whole table's shape and dtype.
"""
import torch

from grader.inside.probekit import ContractError, plain

# Rows of a slice sent back: a correct slice has seq_length (<= 16 in the tests), and a
# wrong one, up to a whole table, must stay within what a reply may be beside the
# reference's (its shape is sent whole).
MAX_ROWS = 128


def _pair(out, what: str, names: tuple[str, str]) -> tuple[torch.Tensor, torch.Tensor]:
    """The two tensors of a (a, b) result, checked, not yet copied."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ContractError(f"{what} must return a tuple ({names[0]}, {names[1]}), got "
                        f"{type(out).__name__}")
    for value, name in zip(out, names):
        if not isinstance(value, torch.Tensor):
            raise ContractError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return out[0], out[1]


def _table(t: torch.Tensor, rows: tuple) -> torch.Tensor:
    return t[slice(*rows)] if t.dim() >= 1 else t


# ---- part "freqs" -----------------------------------------------------------------

def freqs(m, dim: int, rows: tuple, end: int | None = None, rope_base: float | None = None,
          rope_scaling: dict | None = None) -> dict:
    """precompute_freqs_cis(dim, …) with only the arguments given (the others take the
    student's defaults, which must be MiniMind's); rows `start:stop:step` of each table."""
    kwargs = {k: v for k, v in (("end", end), ("rope_base", rope_base),
                                ("rope_scaling", rope_scaling)) if v is not None}
    cos, sin = _pair(m.precompute_freqs_cis(dim, **kwargs), "precompute_freqs_cis",
                     ("freqs_cos", "freqs_sin"))
    return {"cos": plain(_table(cos, rows), "freqs_cos"),
            "sin": plain(_table(sin, rows), "freqs_sin"),
            "shape": [list(cos.shape), list(sin.shape)],
            "dtype": [str(cos.dtype), str(sin.dtype)]}


# ---- part "apply" -----------------------------------------------------------------

def apply(m, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
          unsqueeze_dim: int | None = None) -> dict:
    kwargs = {} if unsqueeze_dim is None else {"unsqueeze_dim": unsqueeze_dim}
    out = m.apply_rotary_pos_emb(q.clone(), k.clone(), cos.clone(), sin.clone(), **kwargs)
    q_embed, k_embed = _pair(out, "apply_rotary_pos_emb", ("q_embed", "k_embed"))
    return {"q": plain(q_embed, "q_embed"), "k": plain(k_embed, "k_embed")}


# ---- part "offset" ----------------------------------------------------------------

def _random_tables(end: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stand-in tables (any rows will do: the part is about which rows are taken),
    each row different, cos and sin apart."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(end, dim, generator=g), torch.randn(end, dim, generator=g)


def offset(m, end: int, dim: int, seed: int, seq_length: int, past: list | None = None) -> dict:
    """`past` = [batch, past_len, kv_heads, head_dim] of a cached layer's k and v (built
    here, as zero-stride views: only their shape matters), or None: no cache."""
    freqs_cos, freqs_sin = _random_tables(end, dim, seed)
    cache = None
    if past is not None:
        cache = (torch.zeros(1, 1, 1, 1).expand(*past), torch.zeros(1, 1, 1, 1).expand(*past))
    out = m.rope_position_embeddings(freqs_cos, freqs_sin, seq_length, cache)
    cos, sin = _pair(out, "rope_position_embeddings", ("cos", "sin"))
    # a wrong slice may be most of a 32k table: its first rows and its shape show that
    return {"cos": plain(cos[:MAX_ROWS], "cos"), "sin": plain(sin[:MAX_ROWS], "sin"),
            "shape": [list(cos.shape), list(sin.shape)]}


def warm_up() -> None:
    """Run the operations the probes and submissions use once in the warm worker."""
    t = torch.outer(torch.arange(64), torch.rand(8)).float()
    cos, sin = torch.cat([t.cos(), t.cos()], -1), torch.cat([t.sin(), t.sin()], -1)
    q = torch.randn(1, 64, 2, 16)
    (q * cos.unsqueeze(1) + torch.cat((-q[..., 8:], q[..., :8]), -1) * sin.unsqueeze(1)).sum()
    torch.polar(torch.ones(4), torch.rand(4)).real.to(torch.bfloat16)
