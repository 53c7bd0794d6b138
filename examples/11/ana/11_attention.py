"""Ana's lesson 11: einsum, repeat_interleave on the heads axis, masked_fill for the
future keys."""
import torch


def repeat_kv(x, n_rep):
    return x if n_rep == 1 else torch.repeat_interleave(x, n_rep, dim=2)


def mask_scores(scores, attention_mask=None):
    s, t = scores.shape[-2:]
    future = torch.ones(s, t, dtype=torch.bool).triu(t - s + 1)
    scores = scores.masked_fill(future, float("-inf"))
    if attention_mask is not None:
        scores = scores + (1 - attention_mask[:, None, None, :].to(scores.dtype)) * -1e9
    return scores


def attention(xq, xk, xv, attention_mask=None):
    b, s, h, d = xq.shape
    k = repeat_kv(xk, h // xk.shape[2])
    v = repeat_kv(xv, h // xv.shape[2])
    scores = torch.einsum("bshd,bthd->bhst", xq * d ** -0.5, k)
    weights = torch.softmax(mask_scores(scores, attention_mask).float(), dim=-1).to(xq.dtype)
    return torch.einsum("bhst,bthd->bshd", weights, v).reshape(b, s, h * d)
