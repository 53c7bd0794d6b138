"""Lesson 13 probes: build modules from given weights, call one part, return tensors.

The same functions run on the student's module inside the sandbox and on the
solution (or a known-mistake variant) on the trusted side, so both sides see
identical inputs and construction. This file is visible inside the sandbox: it
holds no answers. The experts handed to `dispatch` are a deliberately different
network (`ProbeExpert`, tanh-gated), which tests dispatch in isolation from the
FFN. Errors raised here name what the student must fix.
"""
import torch
from torch import nn

from grader.inside.probekit import (ContractError, backward, build, fixed_linear, grad, load,
                                    plain, stand_in)
# `grads` is dispatch's and moe's flag
from grader.inside.probekit import grads as parameter_grads


class ProbeExpert(nn.Module):
    """A stand-in expert shaped like the FFN (gate_proj, up_proj, down_proj, act_fn)
    but with tanh as its activation: dispatch must call its experts, whatever they
    compute, and code that reaches into an expert's layers still works."""

    def __init__(self, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor):
        super().__init__()
        self.gate_proj = fixed_linear(gate)
        self.up_proj = fixed_linear(up)
        self.down_proj = fixed_linear(down)
        self.act_fn = torch.tanh

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gated = self.act_fn(self.gate_proj(x))  # not the FFN's line: this file is shipped
        return self.down_proj(gated * self.up_proj(x))


# ---- part "ffn" -----------------------------------------------------------------

def ffn_forward(m, hidden: int, inter: int, state: dict, x: torch.Tensor,
                gy: torch.Tensor) -> dict:
    """Output and gradients, and what the layout checks use: the names of parameters
    the reference lacks (they got non-zero values) and which layers are nn.Linear."""
    ffn = build(m.FeedForward, "FeedForward", hidden, inter)
    ffn.to(x.dtype)
    extra = load(ffn, state, "FeedForward")
    linear = {n: isinstance(getattr(ffn, n, None), nn.Linear)
              for n in ("gate_proj", "up_proj", "down_proj")}
    x = x.clone().requires_grad_(True)
    y = ffn(x)
    plain(y, "FeedForward.forward's result")
    backward(y, gy)
    return {"y": plain(y, "y"), "x_grad": grad(x), "grads": parameter_grads(ffn),
            "layout": {"extra": extra, "linear": linear}}


# ---- part "router" --------------------------------------------------------------

def route(m, gate_weight: torch.Tensor, x_flat: torch.Tensor, k: int, norm: bool,
          g_scores: torch.Tensor, g_weight: torch.Tensor) -> dict:
    gate = fixed_linear(gate_weight.to(x_flat.dtype))
    x = x_flat.clone().requires_grad_(True)
    out = m.route(x, gate, k, norm)
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise ContractError("route must return a tuple (scores, topk_weight, topk_idx), got "
                        f"{type(out).__name__}" + (f" of length {len(out)}"
                                                   if isinstance(out, (tuple, list)) else ""))
    for t, n in zip(out, ("scores", "topk_weight", "topk_idx")):
        plain(t, n)
    scores, weight, idx = out
    loss = None
    if scores.shape == g_scores.shape and scores.requires_grad:
        loss = (scores * g_scores).sum()
    if (weight.shape == idx.shape and weight.requires_grad and idx.dtype == torch.int64
            and idx.dim() == 2 and idx.shape[0] == g_weight.shape[0]
            and int(idx.min()) >= 0 and int(idx.max()) < g_weight.shape[1]):
        # upstream gradient per (token, expert), so slot order does not matter
        term = (weight * g_weight.gather(1, idx)).sum()
        loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    return {"scores": plain(scores, "scores"), "topk_weight": plain(weight, "topk_weight"),
            "topk_idx": plain(idx, "topk_idx"), "x_grad": grad(x),
            "gate_grad": grad(gate.weight)}


# ---- part "dispatch" ------------------------------------------------------------

def _experts(expert_weights: list) -> nn.ModuleList:
    return nn.ModuleList([ProbeExpert(*weights) for weights in expert_weights])


def dispatch(m, expert_weights: list, x_flat: torch.Tensor, topk_weight: torch.Tensor,
             topk_idx: torch.Tensor, gy: torch.Tensor, grads: bool = True) -> dict:
    """`grads=False` (the output-only cases) skips the backward pass and its tensors;
    the forward runs exactly as with it (inputs still require grad)."""
    experts = _experts(expert_weights)
    x = x_flat.clone().requires_grad_(True)
    w = topk_weight.clone().requires_grad_(True)
    y = m.dispatch(x, experts, w, topk_idx.clone())
    plain(y, "dispatch's result")
    if not grads:
        return {"y": plain(y, "y")}
    backward(y, gy)
    return {"y": plain(y, "y"), "x_grad": grad(x), "weight_grad": grad(w),
            "grads": parameter_grads(experts)}


# ---- part "aux_loss" ------------------------------------------------------------

def aux_loss(m, scores: torch.Tensor, topk_idx: torch.Tensor, num_experts: int,
             coef: float) -> dict:
    s = scores.clone().requires_grad_(True)
    aux = m.load_balancing_loss(s, topk_idx.clone(), num_experts, coef)
    plain(aux, "load_balancing_loss's result")
    if aux.numel() == 1 and aux.requires_grad:
        aux.sum().backward()
    return {"aux": plain(aux, "aux"), "scores_grad": grad(s)}


# ---- part "moe": the whole layer ---------------------------------------------

def _layer(m, hidden, inter, num_experts, k, norm, coef, state, x, train):
    layer = build(m.MOEFeedForward, "MOEFeedForward", hidden, inter,
                    num_experts=num_experts, num_experts_per_tok=k,
                    norm_topk_prob=norm, router_aux_loss_coef=coef)
    layer.to(x.dtype)
    extra = load(layer, state, "MOEFeedForward")
    layer.train(train)
    gate, experts = getattr(layer, "gate", None), getattr(layer, "experts", None)
    # Only what loading weights and calling the layer need (the contract's names):
    # an expert of any class serves, MiniMind's own among them.
    layout = {
        "extra": extra,
        "gate_linear": isinstance(gate, nn.Linear),
        "gate_bias": getattr(gate, "bias", None) is not None,
        "experts_list": isinstance(experts, nn.ModuleList),
        "experts": len(experts) if isinstance(experts, nn.ModuleList) else -1,
    }
    return layer, layout


def moe(m, hidden: int, inter: int, num_experts: int, k: int, norm: bool, coef: float,
        state: dict, x: torch.Tensor, gy: torch.Tensor, train: bool,
        grads: bool = True) -> dict:
    """The layer's output and aux loss, and its layout; with `grads`, the gradients of
    (y·gy).sum() (+ aux in training) too. Without, the backward pass is skipped."""
    layer, layout = _layer(m, hidden, inter, num_experts, k, norm, coef, state, x, train)
    xs = x.clone().requires_grad_(True)
    y = layer(xs)
    plain(y, "MOEFeedForward.forward's result")
    if not hasattr(layer, "aux_loss"):
        raise ContractError("MOEFeedForward.forward must set self.aux_loss")
    aux = layer.aux_loss
    plain(aux, "MOEFeedForward.aux_loss")
    out = {"y": plain(y, "y"), "aux": plain(aux, "aux"), "layout": layout}
    if not grads:
        return out
    if y.shape == gy.shape and y.requires_grad:
        loss = (y * gy).sum()
        if train and aux.numel() == 1 and aux.requires_grad:
            loss = loss + aux.sum()
        loss.backward()
    return {**out, "x_grad": grad(xs), "grads": parameter_grads(layer)}


# ---- stand-ins: the earlier parts as the trusted side computes them ----------------
# A stand-in round (docs/design.md, "Stand-ins") runs the student's MOEFeedForward with
# the parts that failed replaced by these, which ask the trusted side for the
# reference's results on whatever they are given: only the layer's wiring is the
# student's. Outside that round the trusted side refuses them (the request fails).

def _bare(n_in: int, n_out: int) -> nn.Linear:
    return nn.Linear(n_in, n_out, bias=False)


class StoodInFeedForward(nn.Module):
    """FeedForward's stand-in: the lesson's layout (weights load by name), its forward
    the reference's on these weights."""

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str = "silu"):
        super().__init__()
        # the contract's names and shapes, built apart: this file is shipped
        self.gate_proj, self.up_proj = (_bare(hidden_size, intermediate_size) for _ in "gu")
        self.down_proj = _bare(intermediate_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return stand_in("FeedForward", [x, self.gate_proj.weight, self.up_proj.weight,
                                        self.down_proj.weight])[0]


def stood_in_route(x_flat, gate, num_experts_per_tok, norm_topk_prob=True):
    weights = [getattr(gate, "weight", None)]
    if getattr(gate, "bias", None) is not None:
        weights.append(gate.bias)
    return stand_in("route", [x_flat, *weights], k=int(num_experts_per_tok),
                    norm=bool(norm_topk_prob))


def stood_in_dispatch(x_flat, experts, topk_weight, topk_idx):
    """Every expert on every token here (the experts are the layer's own), the
    reference's dispatch of their outputs on the trusted side."""
    outputs = torch.stack([expert(x_flat) for expert in experts])
    return stand_in("dispatch", [outputs, topk_weight], topk_idx=topk_idx)[0]


def stood_in_load_balancing_loss(scores, topk_idx, num_experts, router_aux_loss_coef):
    return stand_in("load_balancing_loss", [scores], topk_idx=topk_idx,
                    num_experts=int(num_experts), coef=float(router_aux_loss_coef))[0]


STAND_INS = {"FeedForward": StoodInFeedForward, "route": stood_in_route,
             "dispatch": stood_in_dispatch, "load_balancing_loss": stood_in_load_balancing_loss}


def moe_stood_in(m, stood_in: list, **args) -> dict:
    """`moe` with the module's names in `stood_in` replaced by their stand-ins for the
    call (the layer looks them up when it is built and called)."""
    kept = {name: getattr(m, name, None) for name in stood_in}
    try:
        for name in stood_in:
            setattr(m, name, STAND_INS[name])
        return moe(m, **args)
    finally:
        for name, value in kept.items():
            setattr(m, name, value)


def warm_up() -> None:
    """Run the kinds of operations the probes and submissions use once in the warm
    worker, so each forked child does not pay torch's first-use costs again."""
    for dtype in (torch.float32, torch.float64):
        g = torch.Generator().manual_seed(0)
        w = [torch.randn(8, 4, generator=g, dtype=dtype) for _ in range(3)]
        expert = ProbeExpert(w[0], w[1], w[2].T.contiguous())
        x = torch.randn(6, 4, generator=g, dtype=dtype, requires_grad=True)
        scores = torch.softmax(x @ w[0][:4].T, dim=-1)
        weight, idx = torch.topk(scores, k=2, dim=-1, sorted=False)
        weight = weight / weight.sum(-1, keepdim=True)
        y = torch.zeros_like(x).index_add_(0, idx[:, 0], expert(x) * weight[:, :1])
        load = nn.functional.one_hot(idx, 4).float().mean(0)
        ((y * y).sum() + (load * scores.mean(0)).sum()).backward()
