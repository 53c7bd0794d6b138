"""Part "router": softmax scores, top-k experts (compared as sets) and their weights,
for E of 3, 4 and 8 and K from 1 up to E, with and without renormalisation."""
import pytest

from _moe_common import GATE, HIDDEN, RouteCase as Case, check_route, route_args


CASES = [Case(3, 1, True, "float32", 10, 64, 20), Case(3, 3, True, "float64", 7, 48, 21),
         Case(4, 2, True, "float32", 10, 64, 22), Case(4, 2, False, "float32", 10, 48, 23),
         Case(4, 1, False, "float64", 10, 64, 24), Case(8, 2, True, "float64", 12, 40, 25),
         Case(8, 5, False, "float32", 12, 64, 26), Case(8, 1, True, "float32", 1, 24, 27)]
GRADIENT_CASES = [c for c in CASES if c.dtype == "float64"]


def _check(student, reference, check, e, k, norm, dtype, n, hidden, seed):
    args = route_args(seed, dtype, n, e, hidden, k, norm)
    got, ref = student.call("route", **args), reference.call("route", **args)
    check_route(check, got, ref, e)
    return got, ref


@pytest.mark.parametrize("case", CASES)
def test_route(student, reference, check, case):
    _check(student, reference, check, *case)


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradients(student, reference, check, case):
    got, ref = _check(student, reference, check, *case)
    check.grad("input gradient", got["x_grad"], ref["x_grad"], axes=HIDDEN)
    check.grad("gate gradient", got["gate_grad"], ref["gate_grad"], axes=GATE)
