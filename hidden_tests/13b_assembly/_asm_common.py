"""Lesson 13b's test helpers: configs, weights and inputs (trusted side).

Shared by the graded and the practice tests and shipped with the practice tests, so
it holds no case and no seed. Weights are drawn per name from a seeded generator, at
scales where every piece matters (norm weights near 1, projections ~1/sqrt(fan-in)).
"""
from functools import lru_cache

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64}
TOKENS = {"en": "tokens", "zh": "token"}
HIDDEN = {"rows": TOKENS, "cols": {"en": "hidden units", "zh": "隐藏单元"}}
VOCAB = {"rows": TOKENS, "cols": {"en": "vocabulary", "zh": "词表"}}


def config(hidden=32, layers=2, heads=4, kv_heads=2, vocab=48, inter=64, moe=False,
           experts=4, k=2, coef=0.1) -> dict:
    return {"hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "vocab_size": vocab,
            "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
            "intermediate_size": inter, "hidden_act": "silu", "use_moe": moe,
            "num_experts": experts, "num_experts_per_tok": k, "norm_topk_prob": True,
            "router_aux_loss_coef": coef}


def _shapes(cfg: dict, prefix: str) -> dict:
    h, d = cfg["hidden_size"], cfg["hidden_size"] // cfg["num_attention_heads"]
    q, kv, i = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d, \
        cfg["intermediate_size"]
    shapes = {"self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (kv, h),
              "self_attn.v_proj.weight": (kv, h), "self_attn.o_proj.weight": (h, q),
              "self_attn.q_norm.weight": (d,), "self_attn.k_norm.weight": (d,),
              "input_layernorm.weight": (h,), "post_attention_layernorm.weight": (h,)}
    ffn = {"gate_proj.weight": (i, h), "up_proj.weight": (i, h), "down_proj.weight": (h, i)}
    if cfg["use_moe"]:
        shapes["mlp.gate.weight"] = (cfg["num_experts"], h)
        for e in range(cfg["num_experts"]):
            shapes.update({f"mlp.experts.{e}.{n}": s for n, s in ffn.items()})
    else:
        shapes.update({f"mlp.{n}": s for n, s in ffn.items()})
    return {prefix + n: s for n, s in shapes.items()}


def _draw(g: torch.Generator, name: str, shape: tuple, dtype) -> torch.Tensor:
    if name.endswith("norm.weight"):
        return (1 + 0.2 * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
    scale = 1.0 if "embed" in name else shape[-1] ** -0.5
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def state(seed: int, cfg: dict, dtype: str, what: str) -> dict:
    """Weights of `what` (attention, block or model), by the reference's names."""
    g = torch.Generator().manual_seed(seed)
    if what == "model":
        shapes = {"embed_tokens.weight": (cfg["vocab_size"], cfg["hidden_size"])}
        for layer in range(cfg["num_hidden_layers"]):
            shapes.update(_shapes(cfg, f"layers.{layer}."))
        shapes.update({"norm.weight": (cfg["hidden_size"],),
                       "lm_head.weight": (cfg["vocab_size"], cfg["hidden_size"])})
    else:
        shapes = _shapes(cfg, "")
        if what == "attention":
            shapes = {n.removeprefix("self_attn."): s for n, s in shapes.items()
                      if n.startswith("self_attn.")}
    return {n: _draw(g, n, s, DTYPES[dtype]) for n, s in shapes.items()}


def rope(cfg: dict, start: int, seq: int, dtype) -> tuple:
    """cos and sin rows [seq, head_dim] of positions start.. (MiniMind's half-split)."""
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.outer(torch.arange(start, start + seq, dtype=torch.float64), freqs)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(torch.float32).to(dtype), angles.sin().to(torch.float32).to(dtype)


def padding(g: torch.Generator, batch: int, keys: int) -> torch.Tensor:
    """1 for a real token, 0 for padding: the first row's last third is padding, so
    every query sees at least one real key (a row of padding alone is ill-defined:
    -1e9 drowns its scores in float32)."""
    mask = torch.ones(batch, keys, dtype=torch.long)
    mask[0, keys - max(1, keys // 3):] = 0
    return mask


@lru_cache(maxsize=None)
def layer_args(seed: int, cfg_items: tuple, dtype: str, what: str, batch: int, seq: int,
               past: int, use_cache: bool, padded: bool, train: bool = True,
               grads: bool = True) -> dict:
    """Arguments of attention_forward (what="attention") or block_forward ("block");
    without `grads` the backward pass (half of the stand-ins' calls) is skipped."""
    cfg = dict(cfg_items)
    g = torch.Generator().manual_seed(seed + 1)
    t = DTYPES[dtype]
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"]
    x = torch.randn(batch, seq, cfg["hidden_size"], generator=g, dtype=torch.float64).to(t)
    cos, sin = rope(cfg, past, seq, t)
    cache = None if not past else [
        torch.randn(batch, past, kv, d, generator=g, dtype=torch.float64).to(t) for _ in "kv"]
    args = {"cfg": cfg, "state": state(seed, cfg, dtype, what), "x": x, "cos": cos,
            "sin": sin, "past": cache, "use_cache": use_cache,
            "mask": padding(g, batch, past + seq) if padded else None,
            "gy": torch.randn(x.shape, generator=g, dtype=torch.float64).to(t),
            "grads": grads}
    if what == "block":
        args["train"] = train
    return args


@lru_cache(maxsize=None)
def model_args(seed: int, cfg_items: tuple, dtype: str, batch: int, seq: int, past: int,
               use_cache: bool, padded: bool, train: bool = True, grads: bool = True) -> dict:
    cfg = dict(cfg_items)
    g = torch.Generator().manual_seed(seed + 1)
    t = DTYPES[dtype]
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"]
    ids = torch.randint(0, cfg["vocab_size"], (batch, seq), generator=g)
    caches = None if not past else [
        [torch.randn(batch, past, kv, d, generator=g, dtype=torch.float64).to(t)
         for _ in "kv"] for _ in range(cfg["num_hidden_layers"])]
    return {"cfg": cfg, "state": state(seed, cfg, dtype, "model"), "input_ids": ids,
            "mask": padding(g, batch, past + seq) if padded else None, "past": caches,
            "use_cache": use_cache, "train": train, "grads": grads,
            "gy": torch.randn(batch, seq, cfg["vocab_size"], generator=g,
                              dtype=torch.float64).to(t)}


def pieces(student) -> dict:
    """A practice request's own pieces, where nothing answers a stand-in (`grader
    check` in a student bundle): the student's earlier files, which probes.py runs in
    place of model_parts' stand-ins; {} anywhere else (the reference's request is the
    same without them)."""
    found = getattr(student, "earlier", None)
    return {"pieces": found.practice()} if found is not None and found.alone else {}


def _none() -> list:
    return []


def check_dtype(check, name: str, got, ref: torch.Tensor) -> None:
    """The result keeps the model's dtype (a float64 model returns float64)."""
    if isinstance(got, torch.Tensor):
        check.equal(f"{name} dtype", str(got.dtype).removeprefix("torch."),
                    str(ref.dtype).removeprefix("torch."),
                    f"{name} should be {str(ref.dtype).removeprefix('torch.')}, like the "
                    "model's weights and inputs")


def check_cache(check, got, ref, alt=_none) -> None:
    if ref is None:
        check.true("no cache without use_cache", got is None,
                   "with use_cache=False the cache returned must be None")
        return
    if got is None:
        check.true("cache", False, "with use_cache=True return the cache (k, v)")
        return
    for i, (name, g, r) in enumerate(zip("kv", got, ref)):  # (close checks the shape)
        check.close(f"cache {name}", g, r, alt=lambda i=i: [c[i] for c in alt() if c])


def check_layer(check, got: dict, ref: dict, also=_none) -> None:
    """`also`: the results of the solution carrying the student's known mistakes in the
    other parts (the `explained` fixture), accepted as well: a block that is right but
    for its attention's known mistake loses points in the attention only."""
    if check.shape("output shape", got["y"], tuple(ref["y"].shape)):
        check.close("output", got["y"], ref["y"], axes=HIDDEN,
                    alt=lambda: [r["y"] for r in also()])
    check_dtype(check, "the output", got["y"], ref["y"])
    check_cache(check, got["cache"], ref["cache"], lambda: [r["cache"] for r in also()])
    if "x_grad" in ref:
        check.grad("input gradient", got["x_grad"], ref["x_grad"], axes=HIDDEN,
                   alt=lambda: [r["x_grad"] for r in also()])
        check.grads("parameter gradient", got["grads"], ref["grads"],
                    alt=lambda: [r["grads"] for r in also()])


def check_model(check, got: dict, ref: dict, also=_none) -> None:
    if check.shape("logits shape", got["logits"], tuple(ref["logits"].shape)):
        check.close("logits", got["logits"], ref["logits"], axes=VOCAB,
                    alt=lambda: [r["logits"] for r in also()])
    check_dtype(check, "the logits", got["logits"], ref["logits"])
    if check.shape("aux_loss shape (0-dim)", got["aux"], tuple(ref["aux"].shape)):
        check.close("aux_loss", got["aux"], ref["aux"], tol="aux",
                    alt=lambda: [r["aux"] for r in also()])
    check_dtype(check, "aux_loss", got["aux"], ref["aux"])
    check.true("one cache per layer", len(got["caches"]) == len(ref["caches"]),
               f"return one cache per layer ({len(ref['caches'])})")
    for i, (g, r) in enumerate(zip(got["caches"], ref["caches"])):
        check_cache(check, g, r, lambda i=i: [a["caches"][i] for a in also()])
    if "grads" in ref:
        check.grads("parameter gradient", got["grads"], ref["grads"],
                    alt=lambda: [r["grads"] for r in also()])
