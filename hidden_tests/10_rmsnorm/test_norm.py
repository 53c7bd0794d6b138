"""Part "norm": RMSNorm's output and gradients, several shapes, eps and dtypes."""
import pytest
import torch

CASES = [("float32", 64, 1e-5, 0), ("float32", 48, 1e-6, 1), ("float64", 64, 1e-5, 2),
         ("float32", 64, 0.5, 3)]  # a large eps makes a missing eps plainly visible
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _inputs(dtype, dim, eps, seed):
    g = torch.Generator().manual_seed(seed)
    d = DTYPES[dtype]
    return dict(dim=dim, eps=eps,
                weight=(torch.rand(dim, generator=g, dtype=torch.float64) + 0.5).to(d),
                x=(torch.randn(2, 5, dim, generator=g, dtype=torch.float64) * 3).to(d),
                gy=torch.randn(2, 5, dim, generator=g, dtype=torch.float64).to(d))


@pytest.mark.parametrize("dtype,dim,eps,seed", CASES)
def test_output(student, reference, check, dtype, dim, eps, seed):
    args = _inputs(dtype, dim, eps, seed)
    got, ref = student.call("rmsnorm", **args), reference.call("rmsnorm", **args)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"])


@pytest.mark.public
def test_output_public(student, reference, check):
    test_output(student, reference, check, "float32", 32, 1e-5, 9)


@pytest.mark.parametrize("dtype,dim,eps,seed", CASES[2:])
def test_gradients(student, reference, check, dtype, dim, eps, seed):
    args = _inputs(dtype, dim, eps, seed)
    got, ref = student.call("rmsnorm", **args), reference.call("rmsnorm", **args)
    check.grad("input gradient", got["x_grad"], ref["x_grad"])
    check.grad("weight gradient", got["weight_grad"], ref["weight_grad"])
