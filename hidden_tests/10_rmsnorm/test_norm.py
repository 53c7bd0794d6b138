"""Part "norm": RMSNorm's output (values and dtype) and gradients, several shapes, eps
and dtypes, and float16 activations large enough that squaring them overflows unless
they are first cast to float32 (why MiniMind's RMSNorm upcasts)."""
from typing import NamedTuple

import pytest
import torch


class Case(NamedTuple):
    dtype: str
    dim: int
    eps: float
    seed: int


class Half(NamedTuple):  # float16 activations large enough to overflow x²
    dim: int
    seed: int



CASES = [Case("float32", 64, 1e-5, 0), Case("float32", 48, 1e-6, 1), Case("float64", 64, 1e-5, 2),
         Case("float32", 64, 0.5, 3)]  # a large eps makes a missing eps plainly visible
DTYPES = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64}
# float16 has 11 significant bits and course.yml tolerances only for float32/64: allow
# ~4 of its ulps (a correct layer may round once or twice); an overflow is off by O(1).
HALF_ATOL, HALF_RTOL = 1e-3, 4e-3


def _inputs(dtype, dim, eps, seed, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    d = DTYPES[dtype]
    return dict(dim=dim, eps=eps,
                weight=(torch.rand(dim, generator=g, dtype=torch.float64) + 0.5).to(d),
                x=(torch.randn(2, 5, dim, generator=g, dtype=torch.float64) * scale).to(d),
                gy=torch.randn(2, 5, dim, generator=g, dtype=torch.float64).to(d))


@pytest.mark.parametrize("case", CASES)
def test_output(student, reference, check, case):
    args = _inputs(*case)
    got, ref = student.call("rmsnorm", **args), reference.call("rmsnorm", **args)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.equal("output dtype", str(got["y"].dtype), str(ref["y"].dtype),
                "the output must have the input's dtype (cast back after computing)")
    check.close("output", got["y"], ref["y"])


@pytest.mark.parametrize("case", [Half(64, 4), Half(40, 5)])
def test_float16_overflow(student, reference, check, case):
    """|x| up to ~1000: x² overflows float16 (max 65504) but not float32."""
    args = _inputs("float16", case.dim, 1e-5, case.seed, scale=300.0)
    got, ref = student.call("rmsnorm", **args), reference.call("rmsnorm", **args)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.equal("output dtype", str(got["y"].dtype), str(ref["y"].dtype),
                "a float16 input gives a float16 output (compute in float32, cast back)")
    if got["y"].shape == ref["y"].shape:
        g, r = got["y"].double(), ref["y"].double()
        err = (g - r).abs().nan_to_num(float("inf"))
        beyond = int((~(err <= HALF_ATOL + HALF_RTOL * r.abs())).sum())
        check.true("output (float16)", beyond == 0,  # no value of the reference's shown
                   f"{beyond} of {err.numel()} values beyond the tolerance ({HALF_ATOL:g} + "
                   f"{HALF_RTOL:g}·|ref|): x² overflows float16; compute in float32")


@pytest.mark.parametrize("case", CASES[2:])
def test_gradients(student, reference, check, case):
    args = _inputs(*case)
    got, ref = student.call("rmsnorm", **args), reference.call("rmsnorm", **args)
    check.grad("input gradient", got["x_grad"], ref["x_grad"])
    check.grad("weight gradient", got["weight_grad"], ref["weight_grad"])
