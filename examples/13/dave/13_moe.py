"""第 13 课：FFN 与 MoE —— Lesson 13: the FFN and Mixture-of-Experts layer.

Fill in the four graded parts, then `MOEFeedForward`, which puts them together:

  ffn       FeedForward: y = down_proj(silu(gate_proj(x)) * up_proj(x))
  router    route: softmax scores, top-k weights and expert ids
  dispatch  dispatch: send each token to its experts, add the weighted outputs back
  aux_loss  load_balancing_loss: E * coef * sum(load * scores.mean(0))

Shapes follow the lesson: x [B, S, H], x_flat [N, H] with N = B * S, scores [N, E],
topk_weight / topk_idx [N, K]. Check your work with `grader check 13_moe.py`.
"""
import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import ACT2FN


class FeedForward(nn.Module):
    """Dense SwiGLU FFN (part "ffn"): [B, S, H] -> [B, S, H]."""

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str = "silu"):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError()


def route(x_flat: torch.Tensor, gate: nn.Linear, num_experts_per_tok: int,
          norm_topk_prob: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Part "router": (scores [N, E], topk_weight [N, K], topk_idx [N, K] int64)."""
    # YOUR CODE HERE
    raise NotImplementedError()


def dispatch(x_flat: torch.Tensor, experts: nn.ModuleList,
             topk_weight: torch.Tensor, topk_idx: torch.Tensor) -> torch.Tensor:
    """Part "dispatch": y_flat [N, H], each token's weighted sum over its K experts."""
    # YOUR CODE HERE
    raise NotImplementedError()


def load_balancing_loss(scores: torch.Tensor, topk_idx: torch.Tensor, num_experts: int,
                        router_aux_loss_coef: float) -> torch.Tensor:
    """Part "aux_loss": a 0-dim tensor, E * coef * sum(load * scores.mean(0))."""
    # YOUR CODE HERE
    raise NotImplementedError()


class MOEFeedForward(nn.Module):
    """Mixture of experts (part "moe"): route, dispatch, and set self.aux_loss."""

    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int = 4,
                 num_experts_per_tok: int = 1, hidden_act: str = "silu",
                 norm_topk_prob: bool = True, router_aux_loss_coef: float = 5e-4):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError()
