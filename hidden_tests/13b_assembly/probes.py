"""Lesson 13b probes: build the student's Attention, MiniMindBlock or model from given
weights, run it, return tensors.

The same functions run on the student's module inside the sandbox and on the
solution (or a known-mistake variant) on the trusted side. This file is visible
inside the sandbox: it holds no answers. The pieces the stub imports from
`model_parts` (lessons 10–13) are the stand-ins below, answered by the trusted side
with the earlier lessons' references (hidden_tests/13b_assembly/stand_ins.py), so
only the wiring is the student's. On the trusted side `TRUSTED` answers them
in-process with the same code.
"""
import contextlib
import functools
import sys
import types
from collections.abc import Iterator

import torch
from torch import nn

from grader.inside import probekit
from grader.inside.probekit import ContractError, backward, build, grad, load, plain, stand_in
from grader.inside.probekit import grads as parameter_grads

TRUSTED = None  # the trusted side's (grader/judge/context.py): a fresh answerer per call


# ---- model_parts: the earlier lessons' pieces, stood in for ----------------------------

class RMSNorm(nn.Module):
    """Lesson 10's RMSNorm: the layout (`weight`, `eps`), the trusted side's forward."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return stand_in("RMSNorm", [x, self.weight], eps=float(self.eps))[0]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    return stand_in("repeat_kv", [x], n_rep=int(n_rep))[0]


def mask_scores(scores: torch.Tensor, attention_mask: torch.Tensor = None) -> torch.Tensor:
    """Lesson 11's mask_scores; use what it returns (the stand-in's result is new)."""
    return stand_in("mask_scores", [scores], attention_mask=attention_mask)[0]


def attention(xq: torch.Tensor, xk: torch.Tensor, xv: torch.Tensor,
              attention_mask: torch.Tensor = None) -> torch.Tensor:
    return stand_in("attention", [xq, xk, xv], attention_mask=attention_mask)[0]


def precompute_freqs_cis(dim: int, end: int = int(32 * 1024), rope_base: float = 1e6,
                         rope_scaling: dict = None) -> tuple:
    return tuple(stand_in("precompute_freqs_cis", [], dim=int(dim), end=int(end),
                          rope_base=float(rope_base), rope_scaling=rope_scaling))


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                         sin: torch.Tensor, unsqueeze_dim: int = 1) -> tuple:
    return tuple(stand_in("apply_rotary_pos_emb", [q, k, cos, sin],
                          unsqueeze_dim=int(unsqueeze_dim)))


def rope_position_embeddings(freqs_cos: torch.Tensor, freqs_sin: torch.Tensor,
                             seq_length: int, past_key_value: tuple = None) -> tuple:
    past = None if past_key_value is None else int(past_key_value[0].shape[1])
    return tuple(stand_in("rope_position_embeddings", [freqs_cos, freqs_sin],
                          seq_length=int(seq_length), past_length=past))


def _bare(n_in: int, n_out: int) -> nn.Linear:
    return nn.Linear(n_in, n_out, bias=False)


class FeedForward(nn.Module):
    """Lesson 13's FeedForward: the layout (weights load by name), the trusted side's
    forward on these weights."""

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str = "silu"):
        super().__init__()
        self.gate_proj, self.up_proj = (_bare(hidden_size, intermediate_size) for _ in "gu")
        self.down_proj = _bare(intermediate_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return stand_in("FeedForward", [x, self.gate_proj.weight, self.up_proj.weight,
                                        self.down_proj.weight])[0]


class MOEFeedForward(nn.Module):
    """Lesson 13's MOEFeedForward: gate and experts by name; forward sets aux_loss."""

    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int = 4,
                 num_experts_per_tok: int = 1, hidden_act: str = "silu",
                 norm_topk_prob: bool = True, router_aux_loss_coef: float = 5e-4):
        super().__init__()
        self.num_experts_per_tok, self.norm_topk_prob = num_experts_per_tok, norm_topk_prob
        self.router_aux_loss_coef = router_aux_loss_coef
        self.gate = _bare(hidden_size, num_experts)
        self.experts = nn.ModuleList([FeedForward(hidden_size, intermediate_size)
                                      for _ in range(num_experts)])
        self.aux_loss = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = [p for e in self.experts for p in (e.gate_proj.weight, e.up_proj.weight,
                                                     e.down_proj.weight)]
        y, self.aux_loss = stand_in(
            "MOEFeedForward", [x, self.gate.weight, *weights],
            num_experts_per_tok=int(self.num_experts_per_tok),
            norm_topk_prob=bool(self.norm_topk_prob),
            router_aux_loss_coef=float(self.router_aux_loss_coef), training=self.training)
        return y


# ---- this lesson's own parts, stood in for in the part that holds them ---------------
# The block part is graded with this Attention in place of the student's, the model part
# with this MiniMindBlock in place of theirs (stand_ins.py's NESTED): the same layout
# (weights load by the reference's names), the trusted side's reference forward on
# these weights, gradients included. Each answers in its one part's requests only.

LAYER_CONFIG = ("hidden_size", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "hidden_act", "use_moe", "num_experts",
                "num_experts_per_tok", "norm_topk_prob", "router_aux_loss_coef", "rms_norm_eps")


def _layer(name: str, module: nn.Module, x: torch.Tensor, position_embeddings: tuple,
           past: tuple | None, use_cache: bool, mask: torch.Tensor | None) -> tuple:
    """(output, (k, v) or None, [aux loss] of a MoE block) of the stand-in `name` for
    `module`'s weights."""
    past = [] if past is None else list(past)
    weights = dict(module.named_parameters())
    outputs = stand_in(name, [x, *position_embeddings, *past, *weights.values()],
                       config=module.layer_config, names=list(weights),
                       past=bool(past), use_cache=bool(use_cache),
                       attention_mask=mask, training=module.training)
    cache = tuple(outputs[1:3]) if use_cache else None
    return outputs[0], cache, outputs[3 if use_cache else 1:]


def _layer_config(config: object) -> dict:
    cfg = {key: getattr(config, key) for key in LAYER_CONFIG}
    for key, kind in (("hidden_size", int), ("num_attention_heads", int),
                      ("num_key_value_heads", int), ("intermediate_size", int),
                      ("num_experts", int), ("num_experts_per_tok", int),
                      ("rms_norm_eps", float), ("router_aux_loss_coef", float),
                      ("use_moe", bool), ("norm_topk_prob", bool)):
        cfg[key] = kind(cfg[key])
    return cfg


class Attention(nn.Module):
    """The reference Attention, stood in for the student's in the block part."""

    def __init__(self, config: object):
        super().__init__()
        self.layer_config = _layer_config(config)
        h, heads, kv = (config.hidden_size, config.num_attention_heads,
                        config.num_key_value_heads)
        d = h // heads
        self.q_proj, self.k_proj = _bare(h, heads * d), _bare(h, kv * d)
        self.v_proj, self.o_proj = _bare(h, kv * d), _bare(heads * d, h)
        self.q_norm = model_parts.RMSNorm(d, config.rms_norm_eps)
        self.k_norm = model_parts.RMSNorm(d, config.rms_norm_eps)

    def forward(self, x: torch.Tensor, position_embeddings: tuple,
                past_key_value: tuple = None, use_cache: bool = False,
                attention_mask: torch.Tensor = None) -> tuple:
        y, cache, _ = _layer("Attention", self, x, position_embeddings, past=past_key_value,
                             use_cache=use_cache, mask=attention_mask)
        return y, cache


class MiniMindBlock(nn.Module):
    """The reference MiniMindBlock, stood in for the student's in the model part; its
    forward sets mlp.aux_loss, as the reference's MoE layer does."""

    def __init__(self, layer_id: int, config: object):
        super().__init__()
        self.layer_config = _layer_config(config)
        self.self_attn = Attention(config)
        self.input_layernorm = model_parts.RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = model_parts.RMSNorm(config.hidden_size,
                                                            config.rms_norm_eps)
        self.mlp = (model_parts.MOEFeedForward(config.hidden_size, config.intermediate_size,
                                               config.num_experts, config.num_experts_per_tok)
                    if config.use_moe else
                    model_parts.FeedForward(config.hidden_size, config.intermediate_size))

    def forward(self, hidden_states: torch.Tensor, position_embeddings: tuple,
                past_key_value: tuple = None, use_cache: bool = False,
                attention_mask: torch.Tensor = None) -> tuple:
        y, cache, aux = _layer("MiniMindBlock", self, hidden_states, position_embeddings,
                               past=past_key_value, use_cache=use_cache, mask=attention_mask)
        if aux:
            self.mlp.aux_loss = aux[0]
        return y, cache


@contextlib.contextmanager
def _stood_in(m, name: str, cls: type) -> Iterator[None]:
    """The student's module with `cls` under `name` while the block runs (their code
    builds it by that name), as it was after."""
    missing = object()
    before = vars(m).get(name, missing)
    setattr(m, name, cls)
    try:
        yield
    finally:
        if before is missing:
            delattr(m, name)
        else:
            setattr(m, name, before)


PIECES = ("RMSNorm", "repeat_kv", "mask_scores", "attention", "precompute_freqs_cis",
          "apply_rotary_pos_emb", "rope_position_embeddings", "FeedForward", "MOEFeedForward")
model_parts = types.ModuleType("model_parts", "Lessons 10–13's pieces, stood in for.")
for _name in PIECES:
    setattr(model_parts, _name, globals()[_name])
# (a second load of this file in one process, a second lesson context, keeps the first
# one's: the stand-ins below build their pieces of the classes the solution imported)
model_parts = sys.modules.setdefault("model_parts", model_parts)


# ---- the probes ----------------------------------------------------------------------

def _answered(probe):
    """On the trusted side, the stand-ins answered in-process (`TRUSTED`)."""
    @functools.wraps(probe)
    def run(m, **args):
        if TRUSTED is None:
            return probe(m, **args)
        with probekit.answered_by(functools.partial(TRUSTED(), request=probe.__name__)):
            return probe(m, **args)
    return run


def _config(cfg: dict) -> types.SimpleNamespace:
    return types.SimpleNamespace(**cfg, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"])


def _two(out: object, what: str) -> tuple:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ContractError(f"{what} must return a pair (output, cache), got "
                            f"{type(out).__name__}")
    return tuple(out)


def _cache(cache: object, what: str) -> list | None:
    """A layer's cache as [k, v]: a pair, or one tensor stacking them on dim 0."""
    if cache is None:
        return None
    if isinstance(cache, torch.Tensor) and cache.dim() >= 1 and cache.shape[0] == 2:
        return [plain(cache[0], what), plain(cache[1], what)]
    if isinstance(cache, (tuple, list)) and len(cache) == 2:
        return [plain(cache[0], f"{what}'s k"), plain(cache[1], f"{what}'s v")]
    raise ContractError(f"{what} must be None, a pair (k, v) or a tensor stacking them, "
                        f"got {type(cache).__name__}")


def _past(past: list | None) -> tuple | None:
    return None if past is None else tuple(t.clone() for t in past)


def _mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    return None if mask is None else mask.clone()


def _built(cls: object, what: str, state: dict, dtype: torch.dtype, *args) -> tuple:
    """The module with the reference's weights by name; its buffers (the RoPE tables
    __init__ computed) kept as built, not filled like a parameter the reference lacks."""
    module = build(cls, what, *args).to(dtype)
    buffers = {n: b.clone() for n, b in module.named_buffers()}
    extra = load(module, state, what)
    with torch.no_grad():
        for name, b in module.named_buffers():
            if name in buffers:
                b.copy_(buffers[name])
    return module, [n for n in extra if n not in buffers]


@_answered
def attention_forward(m, cfg: dict, state: dict, x: torch.Tensor, cos: torch.Tensor,
                      sin: torch.Tensor, past: list | None, use_cache: bool,
                      mask: torch.Tensor | None, gy: torch.Tensor, grads: bool = True,
                      pieces: dict | None = None) -> dict:
    with _own_pieces(m, pieces):
        return _attention(m, cfg, state, x, cos, sin, past, use_cache, mask, gy, grads)


def _attention(m, cfg: dict, state: dict, x: torch.Tensor, cos: torch.Tensor,
               sin: torch.Tensor, past: list | None, use_cache: bool,
               mask: torch.Tensor | None, gy: torch.Tensor, grads: bool) -> dict:
    attn, extra = _built(m.Attention, "Attention", state, x.dtype, _config(cfg))
    xs = x.clone().requires_grad_(True)
    y, cache = _two(attn(xs, (cos, sin), _past(past), use_cache, _mask(mask)),
                    "Attention.forward")
    out = {"y": plain(y, "Attention.forward's output"), "cache": _cache(cache, "the cache"),
           "extra": extra}
    if grads:
        backward(y, gy)
        out.update(x_grad=grad(xs), grads=parameter_grads(attn))
    return out


@_answered
def block_forward(m, cfg: dict, state: dict, x: torch.Tensor, cos: torch.Tensor,
                  sin: torch.Tensor, past: list | None, use_cache: bool,
                  mask: torch.Tensor | None, gy: torch.Tensor, train: bool,
                  grads: bool = True, pieces: dict | None = None) -> dict:
    with _own_pieces(m, pieces) as own:
        return _block(m, own, cfg, state, x, cos, sin, past, use_cache, mask, gy, train,
                      grads)


def _block(m, own: bool, cfg: dict, state: dict, x: torch.Tensor, cos: torch.Tensor,
           sin: torch.Tensor, past: list | None, use_cache: bool,
           mask: torch.Tensor | None, gy: torch.Tensor, train: bool, grads: bool) -> dict:
    # the reference's Attention (stand_ins.py's NESTED), but on the student's own pieces,
    # where nothing answers a stand-in: then their own
    with contextlib.nullcontext() if own else _stood_in(m, "Attention", Attention):
        block, extra = _built(m.MiniMindBlock, "MiniMindBlock", state, x.dtype, 0,
                              _config(cfg))
    block.train(train)
    xs = x.clone().requires_grad_(True)
    y, cache = _two(block(xs, (cos, sin), _past(past), use_cache, _mask(mask)),
                    "MiniMindBlock.forward")
    out = {"y": plain(y, "MiniMindBlock.forward's output"),
           "cache": _cache(cache, "the cache"), "extra": extra}
    if grads:
        backward(y, gy)
        out.update(x_grad=grad(xs), grads=parameter_grads(block))
    return out


@_answered
def model_forward(m, pieces: dict | None = None, **args) -> dict:
    """The model on the reference's blocks (stand_ins.py's NESTED): its own wiring; on
    the student's own blocks and pieces where nothing answers a stand-in (`pieces`)."""
    with _own_pieces(m, pieces) as own:
        with contextlib.nullcontext() if own else _stood_in(m, "MiniMindBlock",
                                                            MiniMindBlock):
            return _model(m, **args)


def _model(m, cfg: dict, state: dict, input_ids: torch.Tensor, mask: torch.Tensor | None,
           past: list | None, use_cache: bool, gy: torch.Tensor, train: bool,
           grads: bool = True) -> dict:
    """Logits, each layer's cache and the aux loss, in the weights' dtype; with
    `grads`, the gradients of (logits·gy).sum() + aux."""
    model, extra = _built(m.CourseMiniMindForCausalLM, "CourseMiniMindForCausalLM", state,
                          gy.dtype, _config(cfg))
    model.train(train)
    result = model(input_ids.clone(), _mask(mask),
                   None if past is None else [_past(p) for p in past], use_cache)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise ContractError("CourseMiniMindForCausalLM.forward must return (logits, caches, "
                            f"aux_loss), got {type(result).__name__}")
    logits, caches, aux = result
    if not isinstance(caches, (tuple, list)):
        raise ContractError("the caches must be a list with one entry per layer, got "
                            f"{type(caches).__name__}")
    out = {"logits": plain(logits, "the logits"), "aux": plain(aux, "aux_loss"),
           "caches": [_cache(c, f"layer {i}'s cache") for i, c in enumerate(caches)],
           "extra": extra}
    if grads:
        if logits.shape == gy.shape and logits.requires_grad:
            loss = (logits * gy).sum()
            if aux.numel() == 1 and aux.requires_grad:
                loss = loss + aux.sum()
            loss.backward()
        out["grads"] = parameter_grads(model)
    return out


# ---- the student's own earlier pieces ------------------------------------------------

def _earlier(lesson: str, source: str) -> types.ModuleType:
    """The student's own file of an earlier lesson, as a module of its own; one that
    raises as it is imported is said to be that file's."""
    module = types.ModuleType(f"lesson_{lesson}")
    try:
        exec(compile(source, f"your lesson {lesson} file", "exec"), module.__dict__)
    except Exception as exc:  # noqa: BLE001 - the student's file: said, not raised as theirs
        raise ContractError(f"your lesson {lesson} file raised {type(exc).__name__} as it "
                            f"was imported: {str(exc)[:200]}") from None
    return module


def _missing(name: str, lesson: str):
    """A piece with no file of the student's, where nothing stands in for it."""
    def missing(*args, **kwargs):
        raise ContractError(f"{name} comes from your lesson {lesson} file, and none was "
                            "found beside this one")
    return missing


@contextlib.contextmanager
def _own_pieces(m, pieces: dict | None) -> Iterator[bool]:
    """The student's module with the pieces it got from model_parts taken from their own
    earlier files while a probe runs: `pieces` is {"own": piece -> lesson, "sources":
    lesson -> text, "missing": piece -> lesson} (grader/judge/earlier.py's
    `Earlier.practice`: `grader check` where no solution answers a stand-in, a student
    bundle). Yields whether it did: never on the trusted side (the reference, its
    variants), so no earlier file is ever run there, only in the student's own sandbox
    (the harness names their module "submission")."""
    if pieces is None or TRUSTED is not None or m.__name__ != "submission":
        yield False
        return
    modules = {lesson: _earlier(lesson, text) for lesson, text in pieces["sources"].items()}
    chosen = {name: _missing(name, lesson) for name, lesson in pieces.get("missing", {}).items()}
    for name, lesson in pieces["own"].items():
        piece = getattr(modules.get(lesson), name, None)
        if name not in PIECES or piece is None:
            raise ContractError(f"your lesson {lesson} file has no {name}")
        chosen[name] = piece
    swapped = {n: v for n, v in vars(m).items()
               if n in chosen and v is getattr(model_parts, n)}
    try:
        for name in swapped:
            setattr(m, name, chosen[name])
        yield True
    finally:
        for name, value in swapped.items():
            setattr(m, name, value)


# ---- part "own": the model on the student's own earlier pieces -----------------------

@_answered
def own_model(m, own: dict, sources: dict, **args) -> dict:
    """model_forward with the pieces `own` names (piece -> lesson) taken from the
    student's own earlier files (`sources`: lesson -> text) in place of the stand-ins,
    wherever the student's module got them from model_parts; any other piece stays
    stood in for. On the trusted side (the reference, its variants) it is
    model_forward: no earlier file is ever run there."""
    with _own_pieces(m, {"own": own, "sources": sources}):
        return _model(m, **args)
