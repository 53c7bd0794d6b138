"""Part "dispatch": tokens to their experts and back, weighted and accumulated; E of 3,
4 and 8, K up to E, one token, and experts that get no token."""
import pytest

from _moe_common import DispatchCase as Case, HIDDEN, SLOTS, check_dispatch, dispatch_args


CASES = [Case(4, 1, "float32", 10, 64, 128, 40), Case(4, 2, "float32", 10, 48, 80, 41),
         Case(3, 3, "float32", 10, 48, 80, 42), Case(8, 2, "float64", 3, 40, 104, 43),
         Case(8, 1, "float64", 1, 24, 72, 44), Case(3, 2, "float64", 12, 24, 72, 45)]
GRADIENT_CASES = [CASES[3], CASES[5]]


def _call(student, reference, e, k, dtype, n, hidden, inter, seed):
    grads = (e, k, dtype, n, hidden, inter, seed) in GRADIENT_CASES
    args = dispatch_args(seed, dtype, n, e, hidden, inter, k, grads)
    return student.call("dispatch", **args), reference.call("dispatch", **args), args


@pytest.mark.parametrize("case", CASES)
def test_dispatch(student, reference, check, case):
    got, ref, args = _call(student, reference, *case)
    check_dispatch(check, got, ref, args["topk_idx"])


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradients(student, reference, check, case):
    got, ref, args = _call(student, reference, *case)
    check.grad("input gradient", got["x_grad"], ref["x_grad"], rows={"expert": args["topk_idx"]},
               axes=HIDDEN)
    check.grad("weight gradient", got["weight_grad"], ref["weight_grad"], axes=SLOTS)
    check.grads("expert gradient", got["grads"], ref["grads"])
