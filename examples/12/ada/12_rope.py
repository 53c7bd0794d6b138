"""Correct: the complex-number formulation (as Meta's Llama writes RoPE), on
MiniMind's half-split pairs (x_i, x_{i+D/2}) instead of interleaved ones."""
import math

import torch


def _yarn(freqs, dim, end, rope_base, rope_scaling):
    orig_max = rope_scaling.get("original_max_position_embeddings", 2048)
    factor = rope_scaling.get("factor", 16)
    if end <= orig_max:
        return freqs

    def inv_dim(b):
        return dim * math.log(orig_max / (b * 2 * math.pi)) / (2 * math.log(rope_base))
    low = max(math.floor(inv_dim(rope_scaling.get("beta_fast", 32.0))), 0)
    high = min(math.ceil(inv_dim(rope_scaling.get("beta_slow", 1.0))), dim // 2 - 1)
    ramp = ((torch.arange(dim // 2).float() - low) / max(high - low, 0.001)).clamp(0, 1)
    return freqs * (1 - ramp + ramp / factor)


def precompute_freqs_cis(dim, end=32768, rope_base=1e6, rope_scaling=None):
    freqs = 1.0 / (rope_base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    scale = 1.0
    if rope_scaling is not None:
        freqs = _yarn(freqs, dim, end, rope_base, rope_scaling)
        scale = rope_scaling.get("attention_factor", 1.0)
    angles = torch.outer(torch.arange(end, dtype=torch.float32), freqs)
    cis = torch.polar(torch.full_like(angles, scale), angles)
    return cis.real.repeat(1, 2), cis.imag.repeat(1, 2)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    half = q.shape[-1] // 2
    cis = torch.complex(cos[..., :half].float(), sin[..., :half].float()).unsqueeze(unsqueeze_dim)

    def rotate(x):
        z = torch.complex(x[..., :half].float(), x[..., half:].float()) * cis
        return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)
    if q.dtype == torch.float64:
        cis = cis.to(torch.complex128)

        def rotate(x):  # noqa: F811 - float64 stays float64
            z = torch.complex(x[..., :half], x[..., half:]) * cis
            return torch.cat([z.real, z.imag], dim=-1)
    return rotate(q), rotate(k)


def rope_position_embeddings(freqs_cos, freqs_sin, seq_length, past_key_value=None):
    start = 0 if past_key_value is None else past_key_value[0].size(1)
    return freqs_cos.narrow(0, start, seq_length), freqs_sin.narrow(0, start, seq_length)
