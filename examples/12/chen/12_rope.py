"""第 12 课：旋转位置编码 RoPE —— Lesson 12: rotary position embeddings.

Fill in the three graded parts, with MiniMind's signatures and defaults:

  freqs   precompute_freqs_cis: the cos/sin tables [end, dim] (half-split layout,
          base 1e6), with YaRN's frequency correction when rope_scaling is given
  apply   apply_rotary_pos_emb: rotate q and k by their positions (rotate_half)
  offset  rope_position_embeddings: the table rows of the new tokens, which start at
          the KV cache's length (MiniMindModel.forward's start_pos)

Shapes follow MiniMind: q [B, S, H, D], k [B, S, H_kv, D], cos/sin [S, D]; a cached
layer holds (k, v), each [B, past_len, H_kv, D]. Check your work with
`grader check 12_rope.py`.
"""
import math

import torch


def precompute_freqs_cis(dim: int, end: int = int(32 * 1024), rope_base: float = 1e6,
                         rope_scaling: dict = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Part "freqs": (freqs_cos, freqs_sin), each [end, dim] float32."""
    freqs = 1.0 / (rope_base ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    attn_factor = 1.0
    if rope_scaling is not None:
        orig_max = rope_scaling.get("original_max_position_embeddings", 2048)
        factor = rope_scaling.get("factor", 16)
        beta_fast = rope_scaling.get("beta_fast", 32.0)
        beta_slow = rope_scaling.get("beta_slow", 1.0)
        attn_factor = rope_scaling.get("attention_factor", 1.0)
        if end / orig_max > 1.0:
            def inv_dim(b):
                return (dim * math.log(orig_max / (b * 2 * math.pi))) / (2 * math.log(rope_base))
            low = max(math.floor(inv_dim(beta_fast)), 0)
            high = min(math.ceil(inv_dim(beta_slow)), dim // 2 - 1)
            ramp = torch.clamp((torch.arange(dim // 2).float() - low) / max(high - low, 0.001), 0, 1)
            freqs = freqs * (1 - ramp + ramp / factor)
    t = torch.arange(1, end + 1, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    freqs_cos = torch.cat([torch.cos(freqs), torch.cos(freqs)], dim=-1) * attn_factor
    freqs_sin = torch.cat([torch.sin(freqs), torch.sin(freqs)], dim=-1) * attn_factor
    return freqs_cos, freqs_sin


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                         sin: torch.Tensor, unsqueeze_dim: int = 1
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Part "apply": (q_embed, k_embed), shaped and typed like q and k."""
    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)

    q_embed = ((q * cos.unsqueeze(unsqueeze_dim))
               + (rotate_half(q) * sin.unsqueeze(unsqueeze_dim))).to(q.dtype)
    k_embed = ((k * cos.unsqueeze(unsqueeze_dim))
               + (rotate_half(k) * sin.unsqueeze(unsqueeze_dim))).to(k.dtype)
    return q_embed, k_embed


def rope_position_embeddings(freqs_cos: torch.Tensor, freqs_sin: torch.Tensor,
                             seq_length: int, past_key_value: tuple = None
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Part "offset": the (cos, sin) rows [seq_length, dim] of the new tokens."""
    start_pos = past_key_value[0].shape[2] if past_key_value is not None else 0
    return (freqs_cos[start_pos:start_pos + seq_length],
            freqs_sin[start_pos:start_pos + seq_length])
