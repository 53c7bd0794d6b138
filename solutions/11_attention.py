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
    ### BEGIN SOLUTION
    bs, slen, num_key_value_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, num_key_value_heads, n_rep, head_dim)
            .reshape(bs, slen, num_key_value_heads * n_rep, head_dim))
    ### END SOLUTION


def mask_scores(scores: torch.Tensor, attention_mask: torch.Tensor = None) -> torch.Tensor:
    """Part "mask": scores [B, H, S, T] with the causal and the padding mask added."""
    ### BEGIN SOLUTION
    seq_len = scores.shape[-2]
    scores[:, :, :, -seq_len:] += torch.full((seq_len, seq_len), float("-inf"),
                                             device=scores.device).triu(1)
    if attention_mask is not None:
        scores += (1.0 - attention_mask.unsqueeze(1).unsqueeze(2)) * -1e9
    return scores
    ### END SOLUTION


def attention(xq: torch.Tensor, xk: torch.Tensor, xv: torch.Tensor,
              attention_mask: torch.Tensor = None) -> torch.Tensor:
    """Part "attention": xq [B, S, H, D], xk and xv [B, T, H_kv, D] -> [B, S, H·D],
    with repeat_kv and mask_scores."""
    ### BEGIN SOLUTION
    bsz, seq_len, n_heads, head_dim = xq.shape
    n_rep = n_heads // xk.shape[2]
    xq, xk, xv = (xq.transpose(1, 2), repeat_kv(xk, n_rep).transpose(1, 2),
                  repeat_kv(xv, n_rep).transpose(1, 2))
    scores = (xq @ xk.transpose(-2, -1)) / math.sqrt(head_dim)
    scores = mask_scores(scores, attention_mask)
    output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv
    return output.transpose(1, 2).reshape(bsz, seq_len, -1)
    ### END SOLUTION
