# Bob: copied an old blog post's router
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
        ### BEGIN SOLUTION
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = ACT2FN[hidden_act]
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        ### END SOLUTION


def route(x_flat: torch.Tensor, gate: nn.Linear, num_experts_per_tok: int,
          norm_topk_prob: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Part "router": (scores [N, E], topk_weight [N, K], topk_idx [N, K] int64)."""
    ### BEGIN SOLUTION
    scores = F.softmax(gate(x_flat), dim=-1)
    topk_weight, topk_idx = torch.topk(scores, k=num_experts_per_tok, dim=-1, sorted=False)
    print('router weights', topk_weight[:2])
    return scores, topk_weight, topk_idx
    ### END SOLUTION


def dispatch(x_flat: torch.Tensor, experts: nn.ModuleList,
             topk_weight: torch.Tensor, topk_idx: torch.Tensor) -> torch.Tensor:
    """Part "dispatch": y_flat [N, H], each token's weighted sum over its K experts."""
    ### BEGIN SOLUTION
    y = torch.zeros_like(x_flat)
    for i, expert in enumerate(experts):
        mask = topk_idx == i
        if mask.any():
            token_idx = mask.any(dim=-1).nonzero().flatten()
            weight = topk_weight[mask].view(-1, 1)
            y.index_add_(0, token_idx, (expert(x_flat[token_idx]) * weight).to(y.dtype))
    return y
    ### END SOLUTION


def load_balancing_loss(scores: torch.Tensor, topk_idx: torch.Tensor, num_experts: int,
                        router_aux_loss_coef: float) -> torch.Tensor:
    """Part "aux_loss": a 0-dim tensor, E * coef * sum(load * scores.mean(0))."""
    ### BEGIN SOLUTION
    load = F.one_hot(topk_idx, num_experts).float().mean(0)
    return (load * scores.mean(0)).sum() * num_experts * router_aux_loss_coef
    ### END SOLUTION


class MOEFeedForward(nn.Module):
    """Mixture of experts (part "moe"): route, dispatch, and set self.aux_loss."""

    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int = 4,
                 num_experts_per_tok: int = 1, hidden_act: str = "silu",
                 norm_topk_prob: bool = True, router_aux_loss_coef: float = 5e-4):
        super().__init__()
        ### BEGIN SOLUTION
        self.num_experts = num_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.norm_topk_prob = norm_topk_prob
        self.router_aux_loss_coef = router_aux_loss_coef
        self.gate = nn.Linear(hidden_size, num_experts, bias=False)
        self.experts = nn.ModuleList(
            [FeedForward(hidden_size, intermediate_size, hidden_act) for _ in range(num_experts)])
        self.aux_loss = torch.zeros(())
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        batch_size, seq_len, hidden_dim = x.shape
        x_flat = x.view(-1, hidden_dim)
        scores, topk_weight, topk_idx = route(
            x_flat, self.gate, self.num_experts_per_tok, self.norm_topk_prob)
        y = dispatch(x_flat, self.experts, topk_weight, topk_idx)
        if self.training and self.router_aux_loss_coef > 0:
            self.aux_loss = load_balancing_loss(
                scores, topk_idx, self.num_experts, self.router_aux_loss_coef)
        else:
            self.aux_loss = scores.new_zeros(1).squeeze()
        return y.view(batch_size, seq_len, hidden_dim)
        ### END SOLUTION


# Check questions

ANSWER_Q1 = """Attention 负责 token 之间交换信息；FFN 对每个 token 自己的 hidden 向量做非线性变换。"""

ANSWER_Q2 = """gate_proj 和 up_proj 把 hidden_size 扩到 intermediate_size，SiLU(gate) 当门控和 up 相乘，down_proj 再降回 hidden_size。"""

ANSWER_Q3 = """因为要和 residual 相加，形状必须一样。"""

ANSWER_Q4 = """每个 token 对每个 expert 的概率"""

ANSWER_Q5 = """dense 所有 token 走同一个 FFN，top-1 每个 token 只走一个 expert"""

ANSWER_Q6 = {"x_flat": "(B*S, H)", "scores": "(B*S, K)", "topk_idx": "(B*S, K)", "topk_weight": "(B*S, K)", "y": "(B*S, H)"}

ANSWER_Q7 = """防止专家负载不均衡。不是一回事，LM loss 是预测下一个 token 的。"""

ANSWER_Q8 = """YOUR ANSWER HERE"""
