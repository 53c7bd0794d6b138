"""Part "ffn": the dense SwiGLU FeedForward."""
from functools import lru_cache

import pytest
import torch

from _inputs import B, DTYPES, H, I, S, ffn_state, gen, randn


@lru_cache(maxsize=None)  # the same inputs for every student: build them once
def _inputs(seed, dtype):
    g = gen(seed)
    return dict(hidden=H, inter=I, state=ffn_state(g, dtype),
                x=randn(g, B, S, H, dtype=dtype), gy=randn(g, B, S, H, dtype=dtype))


@pytest.mark.public
def test_layout(student, reference, check):
    got = student.call("ffn_layout", hidden=H, inter=I)
    ref = reference.call("ffn_layout", hidden=H, inter=I)
    for name in ("gate_proj", "up_proj", "down_proj"):
        check.true(f"{name} is nn.Linear", bool(got["linear"].get(name, torch.tensor(False))),
                   f"self.{name} should be an nn.Linear")
    names, want = sorted(got["params"]), sorted(ref["params"])
    check.equal("parameters", names, want,
                f"parameters {names}, expected {want} (bias=False on all three projections)")
    for name in want:
        if name in got["params"]:
            check.equal(f"{name} shape", got["params"][name].tolist(),
                        ref["params"][name].tolist())


CASES = [("float32", 0), ("float32", 1), ("float64", 2)]


@pytest.mark.parametrize("dtype,seed", CASES)
def test_output(student, reference, check, dtype, seed):
    args = _inputs(seed, DTYPES[dtype])
    got, ref = student.call("ffn_forward", **args), reference.call("ffn_forward", **args)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"])


@pytest.mark.public
def test_output_public(student, reference, check):
    """The public copy of a hidden case: students can run it, graders pay for it once."""
    test_output(student, reference, check, "float32", 0)


@pytest.mark.parametrize("dtype,seed", CASES)
def test_gradients(student, reference, check, dtype, seed):
    args = _inputs(seed, DTYPES[dtype])
    got, ref = student.call("ffn_forward", **args), reference.call("ffn_forward", **args)
    check.grad("input gradient", got["x_grad"], ref["x_grad"])
    check.grads("parameter gradient", got["grads"], ref["grads"])
