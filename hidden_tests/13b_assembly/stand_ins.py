"""Lesson 13b's stand-ins, the trusted side (grader/judge/standin.py; docs/design.md,
"Stand-ins"). Never shipped, never bound into the sandbox.

An assembly lesson: its graded parts are the wiring, and every piece its stub imports
from `model_parts` (course.yml's `builds_on`: lessons 10–13) is stood in for in every
graded request (`ALWAYS`), not only in a round. `ANSWERS` computes each piece with the
earlier lessons' references (the module `m` the trusted side builds of their
solutions) on whatever the child passed.

This lesson's own parts hold one another: the block holds the Attention, the model its
blocks. So that a mistake is charged in its own part only, the block part is graded
with the reference Attention stood in for the student's, and the model part with the
reference MiniMindBlock stood in for theirs (`NESTED`; probes.py swaps them in). Each
of these answers in the requests of the part that holds it only: the self_attn part's
requests get no Attention, the block part's no MiniMindBlock, the own-code part's
neither, and nothing stands in for the model. Each answer checks what it is given
first, so a child cannot make the trusted side compute something huge.
"""
from __future__ import annotations

import types

import torch
from torch import nn

from grader.inside.probekit import build
from grader.judge.standin import Refused

ALWAYS = True
OWN = "own"  # the part run on the student's own earlier pieces (grader/judge/earlier.py)
# the lesson's own classes stood in for in the part that holds them: class -> (that
# part, its probe: the only one whose requests this stand-in answers)
NESTED = {"Attention": ("block", "block_forward"),
          "MiniMindBlock": ("model", "model_forward")}
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
MAX_ELEMENTS = 1 << 22   # of any one tensor a stand-in is given
MAX_POSITIONS = 1 << 14  # rows of a RoPE table
MAX_EXPERTS = 64


def _floats(inputs: list, n: int, name: str) -> list[torch.Tensor]:
    if len(inputs) != n or any(t.dtype not in FLOATS or t.numel() > MAX_ELEMENTS
                               for t in inputs):
        raise Refused(f"{name} takes {n} floating tensors of at most {MAX_ELEMENTS} "
                      "elements")
    return inputs


def _int(given: dict, key: str, low: int, high: int) -> int:
    value = given.get(key)
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise Refused(f"{key} must be a whole number from {low} to {high}")
    return value


def _with(module: nn.Module, weights: dict[str, torch.Tensor]) -> nn.Module:
    """A fresh module computing with `weights` (by name) in place of its parameters, so
    that gradients reach them: torch.func.functional_call's effect, at a fraction of its
    cost (the module is built for this one call and never restored)."""
    for name, tensor in weights.items():
        owner, _, leaf = name.rpartition(".")
        holder = module.get_submodule(owner) if owner else module
        del holder._parameters[leaf]
        setattr(holder, leaf, tensor)
    return module


def _rms_norm(m, inputs: list, given: dict) -> list[torch.Tensor]:
    x, weight = _floats(inputs, 2, "RMSNorm")
    eps = given.get("eps")
    if not (weight.dim() == 1 and x.dim() >= 1 and x.shape[-1] == weight.shape[0]
            and isinstance(eps, float)):
        raise Refused("RMSNorm's weight [dim], input [..., dim] and eps do not fit")
    norm = build(m.RMSNorm, "RMSNorm", weight.shape[0], eps)
    return [_with(norm, {"weight": weight})(x)]


def _repeat_kv(m, inputs: list, given: dict) -> list[torch.Tensor]:
    (x,) = _floats(inputs, 1, "repeat_kv")
    n_rep = _int(given, "n_rep", 1, 64)
    if x.dim() != 4 or x.numel() * n_rep > MAX_ELEMENTS:
        raise Refused("repeat_kv takes x [B, T, H_kv, D]")
    return [m.repeat_kv(x, n_rep)]


def _mask(given: dict, batch: int, keys: int) -> torch.Tensor | None:
    mask = given.get("attention_mask")
    if mask is not None and not (isinstance(mask, torch.Tensor)
                                 and tuple(mask.shape) == (batch, keys)):
        raise Refused(f"attention_mask must be None or [B, T] = [{batch}, {keys}]")
    return mask


def _mask_scores(m, inputs: list, given: dict) -> list[torch.Tensor]:
    (scores,) = _floats(inputs, 1, "mask_scores")
    if scores.dim() != 4 or scores.shape[-2] > scores.shape[-1]:
        raise Refused("mask_scores takes scores [B, H, S, T] with S <= T")
    return [m.mask_scores(scores.clone(), _mask(given, scores.shape[0], scores.shape[-1]))]


def _attention(m, inputs: list, given: dict) -> list[torch.Tensor]:
    xq, xk, xv = _floats(inputs, 3, "attention")
    if not (xq.dim() == xk.dim() == 4 and xk.shape == xv.shape
            and xq.shape[0] == xk.shape[0] and xq.shape[3] == xk.shape[3]
            and xq.shape[1] <= xk.shape[1] and xq.shape[2] % xk.shape[2] == 0):
        raise Refused("attention takes xq [B, S, H, D], xk and xv [B, T, H_kv, D]")
    return [m.attention(xq, xk, xv, _mask(given, xk.shape[0], xk.shape[1]))]


def _freqs(m, inputs: list, given: dict) -> list[torch.Tensor]:
    dim = _int(given, "dim", 2, 1024)
    end = _int(given, "end", 1, MAX_POSITIONS)
    base, scaling = given.get("rope_base"), given.get("rope_scaling")
    if inputs or dim % 2 or not isinstance(base, float) or not (
            scaling is None or (isinstance(scaling, dict) and all(
                isinstance(v, (int, float)) for v in scaling.values()))):
        raise Refused("precompute_freqs_cis takes an even dim, end, a float rope_base "
                      "and rope_scaling (None or a dict of numbers)")
    return list(m.precompute_freqs_cis(dim, end, base, scaling))


def _rotate(m, inputs: list, given: dict) -> list[torch.Tensor]:
    q, k, cos, sin = _floats(inputs, 4, "apply_rotary_pos_emb")
    dim = _int(given, "unsqueeze_dim", -4, 3)
    if not (q.dim() == k.dim() == 4 and cos.shape == sin.shape and cos.dim() == 2
            and q.shape[-1] == k.shape[-1] == cos.shape[-1]):
        raise Refused("apply_rotary_pos_emb takes q, k [B, S, H, D], cos and sin [S, D]")
    return list(m.apply_rotary_pos_emb(q, k, cos, sin, dim))


def _rows(m, inputs: list, given: dict) -> list[torch.Tensor]:
    cos, sin = _floats(inputs, 2, "rope_position_embeddings")
    seq = _int(given, "seq_length", 1, MAX_POSITIONS)
    past = given.get("past_length")
    if past is not None:
        past = _int(given, "past_length", 0, MAX_POSITIONS)
    if cos.shape != sin.shape or cos.dim() != 2:
        raise Refused("rope_position_embeddings takes two tables [end, dim]")
    cache = None if past is None else (torch.zeros(1, past, 1, 1),)
    return list(m.rope_position_embeddings(cos, sin, seq, cache))


def _ffn(m, inputs: list, given: dict) -> list[torch.Tensor]:
    x, gate, up, down = _floats(inputs, 4, "FeedForward")
    inter, hidden = gate.shape if gate.dim() == 2 else (0, 0)
    if not (inter and up.shape == gate.shape and down.shape == (hidden, inter)
            and x.dim() >= 1 and x.shape[-1] == hidden):
        raise Refused("FeedForward's weights and input do not fit together")
    ffn = build(m.FeedForward, "FeedForward", hidden, inter)
    weights = {"gate_proj.weight": gate, "up_proj.weight": up, "down_proj.weight": down}
    return [_with(ffn, weights)(x)]


def _moe(m, inputs: list, given: dict) -> list[torch.Tensor]:
    experts = (len(inputs) - 2) // 3
    x, gate, *weights = _floats(inputs, 2 + 3 * experts if 0 < experts <= MAX_EXPERTS
                                else -1, "MOEFeedForward")
    inter, hidden = weights[0].shape if weights[0].dim() == 2 else (0, 0)
    k, coef = _int(given, "num_experts_per_tok", 1, experts), given.get("router_aux_loss_coef")
    fits = all(weights[3 * e].shape == weights[3 * e + 1].shape == (inter, hidden)
               and weights[3 * e + 2].shape == (hidden, inter) for e in range(experts))
    if not (inter and fits and x.dim() == 3 and x.shape[-1] == hidden
            and gate.shape == (experts, hidden) and isinstance(coef, float)
            and isinstance(given.get("training"), bool)):
        raise Refused("MOEFeedForward's gate, experts and input do not fit together")
    layer = build(m.MOEFeedForward, "MOEFeedForward", hidden, inter, num_experts=experts,
                  num_experts_per_tok=k, norm_topk_prob=bool(given.get("norm_topk_prob")),
                  router_aux_loss_coef=coef)
    layer.train(given["training"])
    state = {"gate.weight": gate}
    for e in range(experts):
        for j, name in enumerate(("gate_proj", "up_proj", "down_proj")):
            state[f"experts.{e}.{name}.weight"] = weights[3 * e + j]
    y = _with(layer, state)(x)
    return [y, layer.aux_loss]


# the configuration a stand-in for a layer is given: key -> (type, low, high)
LAYER_CONFIG = {"hidden_size": (int, 1, 1024), "num_attention_heads": (int, 1, 64),
                "num_key_value_heads": (int, 1, 64), "intermediate_size": (int, 1, 4096),
                "num_experts": (int, 1, MAX_EXPERTS), "num_experts_per_tok": (int, 1, MAX_EXPERTS),
                "rms_norm_eps": (float, 0.0, 1.0), "router_aux_loss_coef": (float, 0.0, 1e3),
                "use_moe": (bool, 0, 1), "norm_topk_prob": (bool, 0, 1)}


def _layer_config(given: dict) -> types.SimpleNamespace:
    cfg = given.get("config")
    if not (isinstance(cfg, dict) and set(cfg) == set(LAYER_CONFIG) | {"hidden_act"}
            and cfg["hidden_act"] == "silu"
            and all(type(cfg[k]) is kind and low <= cfg[k] <= high
                    for k, (kind, low, high) in LAYER_CONFIG.items())):
        raise Refused(f"a layer's config gives {sorted(LAYER_CONFIG)} and hidden_act "
                      "'silu', each in its range")
    h, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    experts = cfg["num_experts"] if cfg["use_moe"] else 1
    if h % heads or heads % kv or cfg["num_experts_per_tok"] > cfg["num_experts"] \
            or 3 * h * cfg["intermediate_size"] * experts > MAX_ELEMENTS:
        raise Refused("a layer's config does not fit together (heads divide hidden_size, "
                      "kv heads divide heads, the experts' weights at most "
                      f"{MAX_ELEMENTS} elements)")
    return types.SimpleNamespace(**cfg, head_dim=h // heads)


def _layer(name: str):
    """The answer for this lesson's class `name` (NESTED): the reference class built on
    the config given, computing with the weights given (by name) on x, the RoPE rows,
    the cache and the mask: [output, k and v with use_cache, the aux loss of a MoE
    block]."""
    def answer(m, inputs: list, given: dict) -> list[torch.Tensor]:
        cfg = _layer_config(given)
        names, past, use_cache = given.get("names"), given.get("past"), given.get("use_cache")
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
                and isinstance(past, bool) and isinstance(use_cache, bool)
                and isinstance(given.get("training"), bool)):
            raise Refused(f"{name} is given its weights' names, past, use_cache and training")
        layer = build(getattr(m, name), name, *((0,) if name == "MiniMindBlock" else ()), cfg)
        shapes = {n: tuple(p.shape) for n, p in layer.named_parameters()}
        x, cos, sin, *rest = _floats(inputs, 3 + 2 * past + len(names), name)
        cache, weights = rest[:2 * past], dict(zip(names, rest[2 * past:]))
        b, s = (x.shape[0], x.shape[1]) if x.dim() == 3 else (0, 0)
        keys = s + (cache[0].shape[1] if cache else 0)
        if not (len(weights) == len(names) and {n: tuple(t.shape) for n, t in weights.items()}
                == shapes and x.dim() == 3 and x.shape[2] == cfg.hidden_size and s
                and cos.shape == sin.shape == (s, cfg.head_dim)
                and all(t.shape == (b, keys - s, cfg.num_key_value_heads, cfg.head_dim)
                        for t in cache)
                and b * cfg.num_attention_heads * s * keys <= MAX_ELEMENTS):
            raise Refused(f"{name}'s weights (by the reference's names), input [B, S, hidden], "
                          "RoPE rows [S, head_dim] and cache [B, T, kv heads, head_dim] do not "
                          "fit together")
        layer = _with(layer, weights)
        layer.train(given["training"])
        y, present = layer(x, (cos, sin), tuple(cache) or None, use_cache,
                           _mask(given, b, keys))
        aux = [layer.mlp.aux_loss] if name == "MiniMindBlock" and cfg.use_moe else []
        return [y, *(present if use_cache else ()), *aux]
    return answer


ANSWERS = {"Attention": _layer("Attention"), "MiniMindBlock": _layer("MiniMindBlock"),
           "RMSNorm": _rms_norm, "repeat_kv": _repeat_kv, "mask_scores": _mask_scores,
           "attention": _attention, "precompute_freqs_cis": _freqs,
           "apply_rotary_pos_emb": _rotate, "rope_position_embeddings": _rows,
           "FeedForward": _ffn, "MOEFeedForward": _moe}

