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
    # YOUR CODE HERE
    raise NotImplementedError()


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                         sin: torch.Tensor, unsqueeze_dim: int = 1
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Part "apply": (q_embed, k_embed), shaped and typed like q and k."""
    # YOUR CODE HERE
    raise NotImplementedError()


def rope_position_embeddings(freqs_cos: torch.Tensor, freqs_sin: torch.Tensor,
                             seq_length: int, past_key_value: tuple = None
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Part "offset": the (cos, sin) rows [seq_length, dim] of the new tokens."""
    # YOUR CODE HERE
    raise NotImplementedError()
