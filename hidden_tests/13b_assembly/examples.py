"""Lesson 13b's smallest failing examples (grader/judge/smallest.py): which fresh inputs each
wiring part is tried on, smallest first, how two outputs are compared, and the lines of
the snippet that build the student's Attention, MiniMindBlock or model and run it.

The grader runs them with its own pieces of lessons 10-13 (probes.py's stand-ins), the
block with its own Attention and the model with its own blocks (stand_ins.py's NESTED).
A student has none of these: the snippet makes `model_parts` of the student's own
lessons 10-13 files, saved next to it (`PRELUDE`), and says so in its comments, which
the page shows in its language. Fresh inputs only: a student bundle may ship it."""
from __future__ import annotations

from collections.abc import Callable

import torch

from grader.judge.smallest import LOAD as LAYER_LOAD
from grader.judge.smallest import Example, generator, literal, rounded

MODULE = "13b_assembly"  # what the snippet imports: the student's file, next to it
LOADS = {"self_attn", "block", "model"}  # every part loads weights into a module
# probes.py keeps a module's buffers (the model's RoPE tables) as its __init__ built
# them, and loads parameters only
LOAD = [line.replace("[*module.named_parameters(), *module.named_buffers()]",
                     "module.named_parameters()") for line in LAYER_LOAD]
# course.yml's float64 tolerance for 13b: MiniMind's softmax and RMSNorm run in float32
# whatever the inputs' dtype, so correct wiring kept in float64 differs by ~1e-7
FLOAT64 = {"float64": (1.0e-5, 1.0e-4)}
OUTPUTS = {"self_attn": ["y", "cache"], "block": ["y", "cache"],
           "model": ["logits", "aux", "cache"]}
TOLERANCES = {(part, o): FLOAT64 for part, outputs in OUTPUTS.items() for o in outputs}

# course.yml's builds_on: each earlier lesson's file (its exercise) and the pieces the
# stub imports from it (tests/unit/test_smallest.py holds the two equal)
PIECES = [("10_rmsnorm", ["RMSNorm"]),
          ("11_attention", ["repeat_kv", "mask_scores", "attention"]),
          ("12_rope", ["precompute_freqs_cis", "apply_rotary_pos_emb",
                       "rope_position_embeddings"]),
          ("13_moe", ["FeedForward", "MOEFeedForward"])]
# what the snippet needs before it imports the student's file: model_parts, made of the
# student's own earlier files (the comment line is one of the page's strings)
IMPORTS = ("sys", "types")
PRELUDE = ["# model_parts: your own lessons 10-13 files, saved next to this one (the grader "
           "ran its own pieces)",
           'model_parts = types.ModuleType("model_parts")',
           "for file, names in [",
           *(f"        ({file!r}, {names!r})," for file, names in PIECES),
           "]:",
           "    lesson = importlib.import_module(file)",
           "    for name in names:",
           "        setattr(model_parts, name, getattr(lesson, name))",
           'sys.modules["model_parts"] = model_parts']

D = 2  # head_dim: RoPE rotates pairs
# block and model: two query heads sharing one kv head (grouped-query attention)
HEADS, KV = 2, 1


def _config(heads: int, kv: int, layers: int = 1, moe: bool = False) -> dict:
    """The probes' configuration: every field the stub's AssemblyConfig has. A MoE layer
    chooses both of its two experts (k = E): no near-tie in top-k can flip a token's
    expert between two correct programs."""
    return {"hidden_size": heads * D, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": 5,
            "max_position_embeddings": 8, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
            "intermediate_size": 3, "hidden_act": "silu", "use_moe": bool(moe),
            "num_experts": 2, "num_experts_per_tok": 2, "norm_topk_prob": True,
            "router_aux_loss_coef": 0.1}


def _norm(g: torch.Generator, n: int) -> torch.Tensor:
    """A norm's weight near 1, two decimals."""
    return torch.round(100 + 20 * torch.randn(n, generator=g, dtype=torch.float64)) / 100


def _layer_state(g: torch.Generator, cfg: dict, prefix: str = "",
                 attention_only: bool = False) -> dict:
    """One layer's weights by the reference's names (the attention's alone, or the
    block's), two decimals each."""
    h, heads, kv, i = (cfg["hidden_size"], cfg["num_attention_heads"],
                       cfg["num_key_value_heads"], cfg["intermediate_size"])
    a = "" if attention_only else "self_attn."
    state = {f"{a}q_proj.weight": rounded(g, heads * D, h),
             f"{a}k_proj.weight": rounded(g, kv * D, h),
             f"{a}v_proj.weight": rounded(g, kv * D, h),
             f"{a}o_proj.weight": rounded(g, h, heads * D),
             f"{a}q_norm.weight": _norm(g, D), f"{a}k_norm.weight": _norm(g, D)}
    if not attention_only:
        state.update({"input_layernorm.weight": _norm(g, h),
                      "post_attention_layernorm.weight": _norm(g, h)})
        ffn = {"gate_proj.weight": (i, h), "up_proj.weight": (i, h),
               "down_proj.weight": (h, i)}
        if cfg["use_moe"]:
            state["mlp.gate.weight"] = rounded(g, cfg["num_experts"], h)
            for e in range(cfg["num_experts"]):
                state.update({f"mlp.experts.{e}.{n}": rounded(g, *s) for n, s in ffn.items()})
        else:
            state.update({f"mlp.{n}": rounded(g, *s) for n, s in ffn.items()})
    return {prefix + n: t for n, t in state.items()}


def _rope(start: int, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin rows [seq, D] of positions start.. (D = 2: one frequency, 1)."""
    angles = torch.arange(start, start + seq, dtype=torch.float64)[:, None].repeat(1, D)
    return angles.cos(), angles.sin()


def _padding(s: dict) -> torch.Tensor | None:
    """[B, past + S], 1 for a token: the first sequence's last key is padding (only the
    last query sees it; it sees other keys too); None where there is no room."""
    keys = s["P"] + s["S"]
    if keys < 2:
        return None
    mask = torch.ones(s["B"], keys, dtype=torch.long)
    mask[0, -1] = 0
    return mask


def _cache(g: torch.Generator, s: dict, kv: int) -> list[torch.Tensor] | None:
    return [rounded(g, s["B"], s["P"], kv, D) for _ in "kv"] if s["P"] else None


def _layer(s: dict, cfg: dict, g: torch.Generator, attention_only: bool) -> dict | None:
    mask = _padding(s) if s["pad"] else None
    if s["pad"] and mask is None:
        return None
    x = rounded(g, s["B"], s["S"], cfg["hidden_size"])
    cos, sin = _rope(s["P"], s["S"])
    return dict(cfg=cfg, state=_layer_state(g, cfg, attention_only=attention_only), x=x,
                cos=cos, sin=sin, past=_cache(g, s, cfg["num_key_value_heads"]),
                use_cache=bool(s["cache"]), mask=mask, gy=torch.zeros_like(x), grads=False)


def _attention(s: dict) -> dict | None:
    g = generator(1, s["S"], s["P"], s["rep"], s["kv"], s["pad"], s["cache"], s["B"])
    return _layer(s, _config(s["rep"] * s["kv"], s["kv"]), g, attention_only=True)


def _block(s: dict) -> dict | None:
    g = generator(2, s["S"], s["P"], s["moe"], s["pad"], s["cache"], s["B"])
    args = _layer(s, _config(HEADS, KV, moe=bool(s["moe"])), g, attention_only=False)
    return None if args is None else {**args, "train": True}


def _model(s: dict) -> dict | None:
    g = generator(3, s["S"], s["P"], s["L"], s["moe"], s["pad"], s["cache"], s["B"])
    mask = _padding(s) if s["pad"] else None
    if s["pad"] and mask is None:
        return None
    cfg = _config(HEADS, KV, layers=s["L"], moe=bool(s["moe"]))
    state = {"embed_tokens.weight": rounded(g, cfg["vocab_size"], cfg["hidden_size"])}
    for layer in range(s["L"]):
        state.update(_layer_state(g, cfg, f"layers.{layer}."))
    state.update({"norm.weight": _norm(g, cfg["hidden_size"]),
                  "lm_head.weight": rounded(g, cfg["vocab_size"], cfg["hidden_size"])})
    ids = torch.randint(0, cfg["vocab_size"], (s["B"], s["S"]), generator=g)
    past = [_cache(g, s, KV) for _ in range(s["L"])] if s["P"] else None
    return dict(cfg=cfg, state=state, input_ids=ids, mask=mask, past=past,
                use_cache=bool(s["cache"]), train=True, grads=False,
                gy=torch.zeros(s["B"], s["S"], cfg["vocab_size"], dtype=torch.float64))


# S: new tokens, P: cached ones, rep: query heads per kv head, kv: kv heads, L: layers;
# flags (a padding mask, use_cache, MoE layers) count as one more "size"; B: sequences
ONE = dict(S=1, P=0, rep=1, kv=1, pad=0, cache=0, B=1, moe=0, L=1)
HIGH = dict(S=3, P=2, rep=2, kv=2, pad=1, cache=1, B=2, moe=1, L=2)
PARTS: dict[str, tuple[str, tuple[str, ...], Callable[[dict], dict | None], list[str]]] = {
    "self_attn": ("attention_forward", ("S", "P", "rep", "kv", "pad", "cache", "B"),
                  _attention, OUTPUTS["self_attn"]),
    "block": ("block_forward", ("S", "P", "moe", "pad", "cache", "B"), _block,
              OUTPUTS["block"]),
    "model": ("model_forward", ("S", "P", "L", "moe", "pad", "cache", "B"), _model,
              OUTPUTS["model"]),
}


def _stacked(cache: object) -> object:
    """A layer's cache, (k, v) or a tensor stacking them, as one tensor [2, B, T, kv
    heads, D]; None stays None; what cannot be stacked is said as text (it differs)."""
    if cache is None or isinstance(cache, str):
        return cache
    try:
        return torch.stack([torch.as_tensor(t) for t in cache])
    except (RuntimeError, TypeError, ValueError):
        return "k and v of different shapes"


def canonical(out: dict) -> dict:
    """Each layer's cache as one tensor (`cache`): the model's every layer's stacked
    on a first axis, None without use_cache."""
    if "caches" in out:
        caches = [_stacked(c) for c in out["caches"]]
        if all(c is None for c in caches):
            return {**out, "cache": None}
        if all(isinstance(c, torch.Tensor) for c in caches):
            try:
                return {**out, "cache": torch.stack(caches)}
            except RuntimeError:
                pass
        return {**out, "cache": "layers' caches of different shapes"}
    if "cache" in out:
        return {**out, "cache": _stacked(out["cache"])}
    return out


def _config_line(cfg: dict) -> str:
    return (f"config = types.SimpleNamespace(**{cfg!r}, "
            f"head_dim={cfg['hidden_size'] // cfg['num_attention_heads']})")


def _past(past: list | None) -> str:
    return "None" if past is None else f"({literal(past[0])}, {literal(past[1])})"


def _mask(mask: torch.Tensor | None) -> str:
    return "None" if mask is None else literal(mask)


# stacks a cache as the comments show it: (k, v) or a tensor stacking them, or None
STACK = "def stacked(cache):", "    return None if cache is None else torch.stack(tuple(cache))"


def lines(example: Example) -> list[str]:
    """The snippet's lines that build the part's module and run it (`m`, their module;
    `state` and `load` already defined)."""
    a = example.args
    out = ["", *STACK, "", _config_line(a["cfg"])]
    if example.part in ("self_attn", "block"):
        if example.part == "self_attn":
            out += ["layer = m.Attention(config).double()"]
        else:
            out += ["# the grader ran this with its own Attention in your MiniMindBlock",
                    "layer = m.MiniMindBlock(0, config).double()",
                    f"layer.train({a['train']})"]
        out += ["load(layer, state)", f"x = {literal(a['x'])}",
                f"cos = {literal(a['cos'])}", f"sin = {literal(a['sin'])}",
                f"past_key_value = {_past(a['past'])}",
                f"attention_mask = {_mask(a['mask'])}",
                f"y, cache = layer(x, (cos, sin), past_key_value, {a['use_cache']}, "
                "attention_mask)",
                "print(y)", "print(stacked(cache))"]
        return out
    past = "None" if a["past"] is None else \
        "[\n" + "".join(f"    {_past(p)},\n" for p in a["past"]) + "]"
    return out + ["# the grader ran this with its own MiniMindBlock layers in your model",
                  "model = m.CourseMiniMindForCausalLM(config).double()",
                  "load(model, state)", f"model.train({a['train']})",
                  f"input_ids = {literal(a['input_ids'])}",
                  f"attention_mask = {_mask(a['mask'])}",
                  f"past_key_values = {past}",
                  "logits, caches, aux_loss = model(input_ids, attention_mask, "
                  f"past_key_values, {a['use_cache']})",
                  "print(logits)", "print(aux_loss)",
                  "print(None if caches[0] is None else "
                  "torch.stack([stacked(c) for c in caches]))"]
