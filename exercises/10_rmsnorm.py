"""RMSNorm —— MiniMind's normalisation layer.

y = weight * x / sqrt(mean(x², last dim) + eps), computed in float32 and cast back.
"""
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError()
