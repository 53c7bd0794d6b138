"""Lesson 11 probes: call one attention function on given inputs, return tensors.

The same functions run on the student's module inside the sandbox and on the
solution (or a known-mistake variant) on the trusted side. This file is visible
inside the sandbox: it holds no answers. Results are returned as they are, whatever
their shape or dtype (the checks report those; a probe that raised on them would
make the test unreadable, never diagnosed).
"""
import torch

from grader.inside.probekit import backward, grad, plain


# Masked places as one finite value in every dtype the lesson uses: the comparison
# takes inf minus inf for a difference, and a mask is a place, not an infinity. So
# -inf, and the lowest float (a common way to mask too), read alike.
LOWEST = -3.0e38


def _finite(t: torch.Tensor) -> torch.Tensor:
    if not t.is_floating_point():
        return t
    return torch.nan_to_num(t, nan=float("nan"), neginf=LOWEST, posinf=-LOWEST).clamp(
        LOWEST, -LOWEST)


def _copy(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.clone()


# ---- part "repeat_kv" -------------------------------------------------------------

def repeat_kv(m, x: torch.Tensor, n_rep: int) -> dict:
    return {"y": plain(m.repeat_kv(x.clone(), n_rep), "repeat_kv's result")}


# ---- part "mask" ------------------------------------------------------------------

def mask(m, scores: torch.Tensor, attention_mask: torch.Tensor | None = None) -> dict:
    """mask_scores on a copy of the scores (it may add in place, as MiniMind does)."""
    out = m.mask_scores(scores.clone(), _copy(attention_mask))
    return {"scores": _finite(plain(out, "mask_scores's result"))}


# ---- part "attention" -------------------------------------------------------------

def attention(m, xq: torch.Tensor, xk: torch.Tensor, xv: torch.Tensor,
              attention_mask: torch.Tensor | None = None,
              gy: torch.Tensor | None = None) -> dict:
    """attention(...)'s output and, when `gy` is given, the gradients of q, k and v
    for the loss (output · gy).sum()."""
    q, k, v = (t.clone().requires_grad_(gy is not None) for t in (xq, xk, xv))
    y = m.attention(q, k, v, _copy(attention_mask))
    out = {"y": plain(y, "attention's result")}
    if gy is not None:
        backward(y, gy)
        out.update(q_grad=grad(q), k_grad=grad(k), v_grad=grad(v))
    return out


def warm_up() -> None:
    """Run the operations the probes and submissions use once in the warm worker."""
    q = torch.randn(1, 4, 3, 8, requires_grad=True)
    k = q[:, :2, None].expand(1, 2, 2, 3, 8).reshape(1, 4, 3, 8)
    s = (q @ k.transpose(-2, -1)) / 8 ** 0.5 + torch.full((3, 3), float("-inf")).triu(1)
    (torch.softmax(s.float(), dim=-1) @ k).sum().backward()
