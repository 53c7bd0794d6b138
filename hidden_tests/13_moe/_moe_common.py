"""Lesson 13's test helpers: input makers and per-call checks (trusted side).

Shared by the graded tests and the practice tests, and shipped to students with
the practice tests, so it holds no case and no seed: every graded case, its seed
and what it checks beyond these helpers live in the graded `test_<part>.py` files.

Inputs are drawn from seeded generators and cached (the same for every student;
probes clone what they are given, so cached tensors are never modified). Router
inputs are redrawn until no token has a near-tie between its K-th and (K+1)-th
expert: CPU top-k breaks ties arbitrarily and a fair test must not depend on that.
"""
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64}
MIN_GAP = 1e-3

# What a heatmap's rows (the leading dims, flattened) and columns (the last dim) are,
# for each kind of tensor these checks compare: the pages name the axes so.
TOKENS = {"en": "tokens", "zh": "token"}
HIDDEN = {"rows": TOKENS, "cols": {"en": "hidden units", "zh": "隐藏单元"}}
EXPERTS = {"rows": TOKENS, "cols": {"en": "experts", "zh": "专家"}}
SLOTS = {"rows": TOKENS, "cols": {"en": "the K chosen slots", "zh": "选中的 K 个位置"}}
GATE = {"rows": {"en": "experts", "zh": "专家"}, "cols": HIDDEN["cols"]}


# Each part's case, as its tests' ids name it (`E=4 K=2 float32 ...`, never the seed):
# the graded tests' cases and the practice test's one are records of the same type.
class FfnCase(NamedTuple):
    dtype: str
    H: int
    I: int  # noqa: E741 - the lesson's name for the intermediate size
    B: int
    S: int
    seed: int


class RouteCase(NamedTuple):
    E: int
    K: int
    norm_topk_prob: bool
    dtype: str
    N: int
    H: int
    seed: int


class DispatchCase(NamedTuple):
    E: int
    K: int
    dtype: str
    N: int
    H: int
    I: int  # noqa: E741 - the lesson's name for the intermediate size
    seed: int


class AuxCase(NamedTuple):
    E: int
    K: int
    dtype: str
    coef: float
    N: int
    seed: int


class MoeCase(NamedTuple):
    E: int
    K: int
    norm_topk_prob: bool
    dtype: str
    coef: float
    B: int
    S: int
    H: int
    I: int  # noqa: E741 - the lesson's name for the intermediate size
    seed: int


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, dtype=torch.float64, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def ffn_state(g, dtype, hidden: int, inter: int, prefix: str = "") -> dict:
    return {f"{prefix}gate_proj.weight": randn(g, inter, hidden, dtype=dtype, scale=hidden ** -0.5),
            f"{prefix}up_proj.weight": randn(g, inter, hidden, dtype=dtype, scale=hidden ** -0.5),
            f"{prefix}down_proj.weight": randn(g, hidden, inter, dtype=dtype, scale=inter ** -0.5)}


def no_ties(probs: torch.Tensor, k: int) -> bool:
    if k >= probs.shape[-1]:
        return True
    top = probs.sort(dim=-1, descending=True).values
    return bool(((top[:, k - 1] - top[:, k]) > MIN_GAP).all())


@lru_cache(maxsize=None)
def ffn_inputs(seed: int, dtype: str, hidden: int, inter: int, b: int, s: int) -> dict:
    g = gen(seed)
    d = DTYPES[dtype]
    return dict(hidden=hidden, inter=inter, state=ffn_state(g, d, hidden, inter),
                x=randn(g, b, s, hidden, dtype=d), gy=randn(g, b, s, hidden, dtype=d))


@lru_cache(maxsize=None)
def router_inputs(seed: int, dtype: str, n: int, e: int, hidden: int, k: int):
    """(gate weight [E, H], x_flat [N, H]) with a clear top-k for every token."""
    d = DTYPES[dtype]
    for attempt in range(200):
        g = gen(seed * 1000 + attempt)
        w = randn(g, e, hidden, dtype=d, scale=hidden ** -0.5 * 3)
        x = randn(g, n, hidden, dtype=d)
        if no_ties(torch.softmax(x.double() @ w.double().T, -1), k):
            return w, x
    raise RuntimeError("no tie-free router inputs found")


@lru_cache(maxsize=None)
def route_args(seed: int, dtype: str, n: int, e: int, hidden: int, k: int, norm: bool) -> dict:
    w, x = router_inputs(seed, dtype, n, e, hidden, k)
    g = gen(seed + 40)
    d = DTYPES[dtype]
    return dict(gate_weight=w, x_flat=x, k=k, norm=norm,
                g_scores=randn(g, n, e, dtype=d), g_weight=randn(g, n, e, dtype=d))


@lru_cache(maxsize=None)
def routing(seed: int, dtype: str, n: int, e: int, k: int):
    """Reference-free routing for dispatch and aux: K distinct experts per token."""
    g = gen(seed)
    d = DTYPES[dtype]
    idx = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(n)])
    weight = (torch.rand(n, k, generator=g, dtype=torch.float64) + 0.1).to(d)
    scores = torch.softmax(randn(g, n, e) * 2, -1).to(d)
    return idx, weight, scores


@lru_cache(maxsize=None)
def dispatch_args(seed: int, dtype: str, n: int, e: int, hidden: int, inter: int, k: int,
                  grads: bool) -> dict:
    """`grads` only for the cases whose gradients are checked (one call serves both)."""
    idx, weight, _ = routing(seed, dtype, n, e, k)
    g = gen(seed + 7)
    d = DTYPES[dtype]
    experts = [tuple(ffn_state(g, d, hidden, inter).values()) for _ in range(e)]
    return dict(expert_weights=experts, x_flat=randn(g, n, hidden, dtype=d), topk_weight=weight,
                topk_idx=idx, gy=randn(g, n, hidden, dtype=d), grads=grads)


@lru_cache(maxsize=None)
def aux_args(seed: int, dtype: str, n: int, e: int, k: int, coef: float) -> dict:
    idx, _, scores = routing(seed, dtype, n, e, k)
    return dict(scores=scores, topk_idx=idx, num_experts=e, coef=coef)


@lru_cache(maxsize=None)
def moe_args(seed: int, dtype: str, b: int, s: int, e: int, hidden: int, inter: int, k: int,
             norm: bool, coef: float, train: bool, grads: bool) -> dict:
    """A whole layer's weights (gate + E experts) and x [B, S, H], tie-free routing."""
    w, x_flat = router_inputs(seed, dtype, b * s, e, hidden, k)
    g = gen(seed + 99)
    d = DTYPES[dtype]
    state = {"gate.weight": w}
    for i in range(e):
        state.update(ffn_state(g, d, hidden, inter, prefix=f"experts.{i}."))
    return dict(hidden=hidden, inter=inter, num_experts=e, k=k, norm=norm, coef=coef,
                state=state, x=x_flat.reshape(b, s, hidden),
                gy=randn(g, b, s, hidden, dtype=d), train=train, grads=grads)


# ---- checks of one call's results, shared by graded and practice tests -------------

def check_dtype(check, name: str, got, ref: torch.Tensor) -> None:
    """Outputs keep the inputs' dtype, as the reference's do: a float64 layer that
    returns float32 (or the reverse) changes what the model trains in."""
    if isinstance(got, torch.Tensor):
        check.equal(f"{name} dtype", str(got.dtype).removeprefix("torch."),
                    str(ref.dtype).removeprefix("torch."))


def check_ffn(check, got: dict, ref: dict) -> None:
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check_dtype(check, "output", got["y"], ref["y"])
    check.close("output", got["y"], ref["y"], axes=HIDDEN)


def _by_expert(weight: torch.Tensor, idx: torch.Tensor):
    """Sort each token's slots by expert id: top-k is compared as a set."""
    order = idx.argsort(dim=-1)
    return weight.gather(-1, order), idx.gather(-1, order)


def check_route(check, got: dict, ref: dict, e: int) -> None:
    check.close("scores", got["scores"], ref["scores"], axes=EXPERTS)
    check_dtype(check, "scores", got["scores"], ref["scores"])
    check_dtype(check, "topk_weight", got["topk_weight"], ref["topk_weight"])
    idx = got["topk_idx"]
    check.equal("topk_idx dtype", str(idx.dtype), "torch.int64")
    if not (check.shape("topk_idx shape", idx, tuple(ref["topk_idx"].shape))
            and idx.dtype == torch.int64):
        return
    gw, gi = (_by_expert(got["topk_weight"], idx) if got["topk_weight"].shape == idx.shape
              else (got["topk_weight"], idx))
    rw, ri = _by_expert(ref["topk_weight"], ref["topk_idx"])
    check.counts({"en": "tokens per expert", "zh": "每个专家分到的 token 数"},
                 [{"en": f"expert {i}", "zh": f"专家 {i}"} for i in range(e)],
                 torch.bincount(gi.flatten().clamp(0, e - 1), minlength=e).tolist(),
                 torch.bincount(ri.flatten(), minlength=e).tolist())
    same = gi.eq(ri).all(dim=-1)
    wrong = int((~same).sum())
    check.true("chosen experts", bool(same.all()),
               {"en": f"{wrong} of {idx.shape[0]} tokens chose other experts than the "
                      "reference's top-k (compared as sets)",
                "zh": f"{idx.shape[0]} 个 token 中有 {wrong} 个选中的专家与参考实现的 top-k "
                      "不同（按集合比较）"})
    check.close("topk_weight", gw, rw, axes=SLOTS)


def check_dispatch(check, got: dict, ref: dict, topk_idx: torch.Tensor | None = None) -> None:
    """`topk_idx`: each token's experts, so that the page can say what wrong rows share."""
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check_dtype(check, "output", got["y"], ref["y"])
    check.close("output", got["y"], ref["y"], axes=HIDDEN,
                rows=None if topk_idx is None else {"expert": topk_idx})


def check_aux(check, got: dict, ref: dict) -> None:
    aux = got["aux"]
    check.shape("aux shape (0-dim)", aux, tuple(ref["aux"].shape))
    check_dtype(check, "aux", aux, ref["aux"])
    check.close("aux value", aux.reshape(()) if aux.numel() == 1 else aux, ref["aux"], tol="aux")


EXPLAINED = ("matches the reference layer with the mistakes found in your other parts: "
             "your layer is wired right, and those mistakes cost points in their parts only")


def check_moe(check, got: dict, ref: dict, explained: Callable[[], list[dict]]) -> None:
    """The layer against the reference, or else against the reference with the
    mistakes the grader established in the student's other parts (`explained()`:
    trusted code's results, never the student's; asked for only on a mismatch)."""
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check_dtype(check, "output", got["y"], ref["y"])
    check_dtype(check, "aux_loss", got["aux"], ref["aux"])
    check.close("output", got["y"], ref["y"], alt=lambda: [r["y"] for r in explained()],
                alt_note=EXPLAINED, axes=HIDDEN)
    check.shape("aux_loss shape (0-dim)", got["aux"], tuple(ref["aux"].shape))
    check.close("aux_loss", got["aux"], ref["aux"], tol="aux",
                alt=lambda: [r["aux"] for r in explained()], alt_note=EXPLAINED)
