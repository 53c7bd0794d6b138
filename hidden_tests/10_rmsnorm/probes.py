"""RMSNorm probes: build the layer with given weights, run forward and backward."""
import torch
from torch import nn

from grader.inside.probekit import ContractError, grad, plain


def rmsnorm(m, dim: int, eps: float, weight: torch.Tensor, x: torch.Tensor,
            gy: torch.Tensor) -> dict:
    cls = m.RMSNorm
    if not isinstance(cls, type) or not issubclass(cls, nn.Module):
        raise ContractError("RMSNorm must be a subclass of torch.nn.Module")
    norm = cls(dim, eps=eps).to(x.dtype)
    if not isinstance(getattr(norm, "weight", None), nn.Parameter):
        raise ContractError("RMSNorm needs a learnable nn.Parameter named weight")
    with torch.no_grad():
        norm.weight.copy_(weight)
    xs = x.clone().requires_grad_(True)
    y = norm(xs)
    plain(y, "RMSNorm.forward's result")
    if y.shape == gy.shape and y.requires_grad:
        (y * gy).sum().backward()
    return {"y": plain(y, "y"), "x_grad": grad(xs), "weight_grad": grad(norm.weight)}
