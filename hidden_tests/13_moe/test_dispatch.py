"""Part "dispatch": tokens to their experts and back, weighted and accumulated."""
from functools import lru_cache

import pytest

from _inputs import B, DTYPES, H, S, expert_weights, gen, randn, routing


GRADIENT_CASES = [(2, "float64", 3), (1, "float64", 4)]


@lru_cache(maxsize=None)  # the same inputs for every student: build them once
def _inputs(k, dtype, seed):
    """Gradients only for the cases test_gradients checks (one call serves both)."""
    idx, weight, _ = routing(seed + 60, DTYPES[dtype], k)
    g = gen(seed + 61)
    n = B * S
    return dict(expert_weights=expert_weights(seed, DTYPES[dtype]),
                x_flat=randn(g, n, H, dtype=DTYPES[dtype]), topk_weight=weight,
                topk_idx=idx, gy=randn(g, n, H, dtype=DTYPES[dtype]),
                grads=(k, dtype, seed) in GRADIENT_CASES)


@pytest.mark.parametrize("k,dtype,seed", [(1, "float32", 0), (2, "float32", 1),
                                          (3, "float32", 2), *GRADIENT_CASES])
def test_dispatch(student, reference, check, k, dtype, seed):
    args = _inputs(k, dtype, seed)
    got, ref = student.call("dispatch", **args), reference.call("dispatch", **args)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"])


@pytest.mark.public
def test_dispatch_public(student, reference, check):
    """The public copy of a hidden case: students can run it, graders pay for it once."""
    test_dispatch(student, reference, check, 2, "float32", 1)


@pytest.mark.parametrize("k,dtype,seed", GRADIENT_CASES)
def test_gradients(student, reference, check, k, dtype, seed):
    args = _inputs(k, dtype, seed)
    got, ref = student.call("dispatch", **args), reference.call("dispatch", **args)
    check.grad("input gradient", got["x_grad"], ref["x_grad"])
    check.grad("weight gradient", got["weight_grad"], ref["weight_grad"])
    check.grads("expert gradient", got["grads"], ref["grads"])
