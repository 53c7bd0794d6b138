"""RMSNorm —— MiniMind's normalisation layer.

y = weight * x / sqrt(mean(x², last dim) + eps), computed in float32 and cast back.
"""
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True))
        return self.weight * normed.type_as(x)
        ### END SOLUTION
