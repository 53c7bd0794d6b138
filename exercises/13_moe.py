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


# ----------------------------------------------------------------------------
# Check questions. Answer each in its string, in English or Chinese; leave the
# code above as it is. A TA marks the written answers; the shapes question is
# marked by the grader (`grader check` shows it).
# 本节检查：在下面的字符串里作答（中英文均可）。
# ----------------------------------------------------------------------------

# q1 (2 points): How do attention and the FFN divide the work in a Transformer block?
# q1（2 分）：Attention 和 FFN 在 Transformer block 里的分工有什么区别？
ANSWER_Q1 = """YOUR ANSWER HERE"""

# q2 (2 points): Why does MiniMind's FFN have three linear layers, gate_proj, up_proj and down_proj?
# q2（2 分）：MiniMind 的 FFN 为什么有 `gate_proj`、`up_proj`、`down_proj` 三个线性层？
ANSWER_Q2 = """YOUR ANSWER HERE"""

# q3 (1.5 points): Why may the FFN's middle be intermediate_size, while its output must return to hidden_size?
# q3（1.5 分）：为什么 FFN 中间可以是 `intermediate_size`，但最终必须回到 `hidden_size`？
ANSWER_Q3 = """YOUR ANSWER HERE"""

# q4 (1.5 points): What does the MoE router's output `scores` represent?
# q4（1.5 分）：MoE 的 router 输出的 `scores` 表示什么？
ANSWER_Q4 = """YOUR ANSWER HERE"""

# q5 (2 points): How does the computation path of a top-1 MoE differ from a dense FFN's?
# q5（2 分）：top-1 MoE 和 dense FFN 的计算路径有什么区别？
ANSWER_Q5 = """YOUR ANSWER HERE"""

# q6 (1.25 points): If the input is x.shape = [B, S, H], write the shapes of x_flat, scores, topk_idx, topk_weight and y.
# q6（1.25 分）：如果输入 `x.shape = [B, S, H]`，写出 `x_flat`、`scores`、`topk_idx`、`topk_weight`、`y` 的形状。
ANSWER_Q6 = {
    "x_flat": "",
    "scores": "",
    "topk_idx": "",
    "topk_weight": "",
    "y": "",
}

# q7 (2 points): Why does MoE need an aux loss? Is it the same thing as the causal LM loss?
# q7（2 分）：为什么 MoE 需要 aux loss？它和 causal LM loss 是一回事吗？
ANSWER_Q7 = """YOUR ANSWER HERE"""

# q8 (1.5 points): What problem does `index_add_` solve in the MoE?
# q8（1.5 分）：`index_add_` 在 MoE 里解决了什么问题？
ANSWER_Q8 = """YOUR ANSWER HERE"""
