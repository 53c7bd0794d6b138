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
