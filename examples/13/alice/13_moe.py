# Alice: correct, but written her own way (sorted top-k, a per-slot loop, F.silu).
import torch
import torch.nn.functional as F
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, hidden_size, intermediate_size, hidden_act="silu"):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def route(x_flat, gate, num_experts_per_tok, norm_topk_prob=True):
    probs = gate(x_flat).softmax(dim=-1)
    w, idx = probs.topk(num_experts_per_tok, dim=-1)          # sorted: also fine
    if norm_topk_prob:
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return probs, w, idx


def dispatch(x_flat, experts, topk_weight, topk_idx):
    out = torch.zeros_like(x_flat)
    for slot in range(topk_idx.shape[1]):                     # loop over top-k slots
        for e, expert in enumerate(experts):
            rows = (topk_idx[:, slot] == e).nonzero(as_tuple=True)[0]
            if rows.numel():
                out.index_add_(0, rows, expert(x_flat[rows]) * topk_weight[rows, slot, None])
    return out


def load_balancing_loss(scores, topk_idx, num_experts, router_aux_loss_coef):
    load = F.one_hot(topk_idx, num_experts).float().mean(0)
    return (load * scores.mean(0)).sum() * num_experts * router_aux_loss_coef


class MOEFeedForward(nn.Module):
    def __init__(self, hidden_size, intermediate_size, num_experts=4, num_experts_per_tok=1,
                 hidden_act="silu", norm_topk_prob=True, router_aux_loss_coef=5e-4):
        super().__init__()
        self.k, self.norm, self.coef, self.E = (num_experts_per_tok, norm_topk_prob,
                                                router_aux_loss_coef, num_experts)
        self.gate = nn.Linear(hidden_size, num_experts, bias=False)
        self.experts = nn.ModuleList(FeedForward(hidden_size, intermediate_size, hidden_act)
                                     for _ in range(num_experts))
        self.aux_loss = torch.tensor(0.0)

    def forward(self, x):
        b, s, h = x.shape
        flat = x.reshape(-1, h)
        scores, w, idx = route(flat, self.gate, self.k, self.norm)
        y = dispatch(flat, self.experts, w, idx)
        if self.training and self.coef > 0:
            self.aux_loss = load_balancing_loss(scores, idx, self.E, self.coef)
        else:
            self.aux_loss = scores.new_zeros(1).squeeze()
        return y.reshape(b, s, h)


# Check questions

ANSWER_Q1 = """Attention mixes information across positions: each token's query looks at the other tokens' keys and takes a weighted sum of their values.
The FFN works on each token by itself: the same two-layer transform is applied to every position's hidden vector, and no positions are mixed."""

ANSWER_Q2 = """It is SwiGLU: down_proj(silu(gate_proj(x)) * up_proj(x)). up_proj makes the candidate features, gate_proj (after SiLU) decides how much of each passes, element-wise, and down_proj maps intermediate_size back to hidden_size."""

ANSWER_Q3 = """Because of the residual connection: hidden_states + mlp(norm(hidden_states)) needs the same last dimension, and the next block expects hidden_size. The middle is internal, so it can be wider to add capacity."""

ANSWER_Q4 = """scores[t, e] is the softmax probability that token t should go to expert e; each row sums to 1. top-k picks the experts from it and the aux loss uses its mean per expert."""

ANSWER_Q5 = """Dense: every token goes through the same FFN. Top-1 MoE: the router scores the token, it goes only through the expert it picked (a FeedForward with its own weights) and the output is scaled by the routing weight. More parameters overall, but about the same compute per token."""

ANSWER_Q6 = {"x_flat": "[N, H]", "scores": "[N, E]", "topk_idx": "[N, K]", "topk_weight": "[N, K]", "y": "[B, S, H]"}

ANSWER_Q7 = """Without it the router collapses onto a few experts and the rest never learn. It is not the LM loss: the LM loss is next-token cross-entropy, the aux loss only penalises unbalanced expert use. Training adds them: loss = res.loss + res.aux_loss."""

ANSWER_Q8 = """Each expert only runs on the tokens routed to it; index_add_ writes its outputs back into y at those tokens' rows, and it adds, so with top-k > 1 the contributions of several experts sum."""
