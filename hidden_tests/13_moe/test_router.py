"""Part "router": softmax scores, top-k experts (compared as sets) and their weights."""
from functools import lru_cache

import pytest
import torch

from _inputs import DTYPES, E, gen, randn, router_inputs

CASES = [(k, norm, dtype, seed) for seed, (k, norm, dtype) in enumerate(
    [(1, True, "float32"), (2, True, "float32"), (1, False, "float32"), (2, False, "float32"),
     (2, True, "float64"), (1, True, "float64"), (2, False, "float64")])]


@lru_cache(maxsize=None)  # the same inputs for every student: build them once
def _inputs(k, norm, dtype, seed):
    w, x = router_inputs(seed + 20, DTYPES[dtype], k)
    g = gen(seed + 40)
    return dict(gate_weight=w, x_flat=x, k=k, norm=norm,
                g_scores=randn(g, x.shape[0], E, dtype=DTYPES[dtype]),
                g_weight=randn(g, x.shape[0], E, dtype=DTYPES[dtype]))


def _by_expert(weight, idx):
    """Sort each token's slots by expert id: top-k is compared as a set."""
    order = idx.argsort(dim=-1)
    return weight.gather(-1, order), idx.gather(-1, order)


def _check_route(student, reference, check, k, norm, dtype, seed):
    args = _inputs(k, norm, dtype, seed)
    got, ref = student.call("route", **args), reference.call("route", **args)
    n = args["x_flat"].shape[0]
    check.close("scores", got["scores"], ref["scores"])
    idx = got["topk_idx"]
    check.equal("topk_idx dtype", str(idx.dtype), "torch.int64")
    if check.shape("topk_idx shape", idx, tuple(ref["topk_idx"].shape)) and idx.dtype == torch.int64:
        gw, gi = _by_expert(got["topk_weight"], idx) if got["topk_weight"].shape == idx.shape \
            else (got["topk_weight"], idx)
        rw, ri = _by_expert(ref["topk_weight"], ref["topk_idx"])
        check.counts("tokens per expert", [f"expert {e}" for e in range(E)],
                     torch.bincount(gi.flatten().clamp(0, E - 1), minlength=E).tolist(),
                     torch.bincount(ri.flatten(), minlength=E).tolist())
        same = gi.eq(ri).all(dim=-1)
        check.true("chosen experts", bool(same.all()),
                   f"{int((~same).sum())} of {n} tokens chose other experts than the "
                   "reference's top-k (compared as sets)")
        check.close("topk_weight", gw, rw)
    return args, got, ref


@pytest.mark.parametrize("k,norm,dtype,seed", CASES)
def test_route(student, reference, check, k, norm, dtype, seed):
    _check_route(student, reference, check, k, norm, dtype, seed)


@pytest.mark.public
def test_route_public(student, reference, check):
    """The public copy of a hidden case: students can run it, graders pay for it once."""
    _check_route(student, reference, check, 2, True, "float32", 1)


@pytest.mark.parametrize("k,norm,dtype,seed", [c for c in CASES if c[2] == "float64"])
def test_gradients(student, reference, check, k, norm, dtype, seed):
    args, got, ref = _check_route(student, reference, check, k, norm, dtype, seed)
    check.grad("input gradient", got["x_grad"], ref["x_grad"])
    check.grad("gate gradient", got["gate_grad"], ref["gate_grad"])
