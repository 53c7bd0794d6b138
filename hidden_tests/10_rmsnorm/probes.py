"""RMSNorm probes: build the layer with given weights, run forward and backward."""
import torch
from torch import nn


def _plain(value, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(value).__name__}")
    return value.detach().as_subclass(torch.Tensor).clone()


def rmsnorm(m, dim: int, eps: float, weight: torch.Tensor, x: torch.Tensor,
            gy: torch.Tensor) -> dict:
    cls = m.RMSNorm
    if not isinstance(cls, type) or not issubclass(cls, nn.Module):
        raise TypeError("RMSNorm must be a subclass of torch.nn.Module")
    norm = cls(dim, eps=eps).to(x.dtype)
    if not isinstance(getattr(norm, "weight", None), nn.Parameter):
        raise AttributeError("RMSNorm needs a learnable nn.Parameter named weight")
    with torch.no_grad():
        norm.weight.copy_(weight)
    xs = x.clone().requires_grad_(True)
    y = norm(xs)
    _plain(y, "RMSNorm.forward's result")
    if y.shape == gy.shape and y.requires_grad:
        (y * gy).sum().backward()
    grad = norm.weight.grad
    return {"y": _plain(y, "y"),
            "x_grad": None if xs.grad is None else _plain(xs.grad, "x_grad"),
            "weight_grad": None if grad is None else _plain(grad, "weight_grad")}
