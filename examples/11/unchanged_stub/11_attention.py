"""第 11 课：注意力 —— Lesson 11: attention, as MiniMind's Attention.forward computes it.

Fill in the three graded parts, with MiniMind's signatures (model_minimind.py):

  repeat_kv   repeat_kv(x, n_rep): grouped-query attention's key/value heads, each
              repeated n_rep times in place ([B, T, H_kv, D] -> [B, T, H_kv·n_rep, D];
              head h of the result is kv head h // n_rep)
  mask        mask_scores(scores, attention_mask): the causal mask (-inf above the
              diagonal, over the last S keys: the KV cache's keys come first) and the
              optional padding mask ([B, T], 1 = a real token, 0 = padding: -1e9)
  attention   attention(xq, xk, xv, attention_mask): causal scaled-dot-product
              attention built on the two above, softmax in float32

Shapes follow MiniMind: xq [B, S, H, D]; xk, xv [B, T, H_kv, D] with T = past + S
(the cache's keys first); scores [B, H, S, T]; the output [B, S, H·D]. Check your
work with `grader check 11_attention.py`.
"""
import math

import torch
import torch.nn.functional as F


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Part "repeat_kv": [B, T, H_kv, D] -> [B, T, H_kv·n_rep, D], x itself when n_rep is 1."""
    # YOUR CODE HERE
    raise NotImplementedError()


def mask_scores(scores: torch.Tensor, attention_mask: torch.Tensor = None) -> torch.Tensor:
    """Part "mask": scores [B, H, S, T] with the causal and the padding mask added."""
    # YOUR CODE HERE
    raise NotImplementedError()


def attention(xq: torch.Tensor, xk: torch.Tensor, xv: torch.Tensor,
              attention_mask: torch.Tensor = None) -> torch.Tensor:
    """Part "attention": xq [B, S, H, D], xk and xv [B, T, H_kv, D] -> [B, S, H·D],
    with repeat_kv and mask_scores."""
    # YOUR CODE HERE
    raise NotImplementedError()
