"""Part "aux_loss": the load-balancing loss, a 0-dim tensor, for E of 3, 4 and 8."""
import pytest

from _moe_common import AuxCase as Case, EXPERTS, aux_args, check_aux


CASES = [Case(4, 1, "float32", 5e-4, 10, 60), Case(4, 2, "float32", 1.0, 10, 61),
         Case(3, 1, "float32", 1.0, 10, 62), Case(3, 2, "float64", 0.1, 9, 63),
         Case(8, 3, "float64", 1.0, 16, 64), Case(8, 1, "float32", 1.0, 1, 65),
         Case(8, 2, "float64", 0.5, 5, 66)]
GRADIENT_CASES = [CASES[3], CASES[4]]


def _check(student, reference, check, e, k, dtype, coef, n, seed):
    args = aux_args(seed, dtype, n, e, k, coef)
    got, ref = student.call("aux_loss", **args), reference.call("aux_loss", **args)
    check_aux(check, got, ref)
    return got, ref


@pytest.mark.parametrize("case", CASES)
def test_aux(student, reference, check, case):
    _check(student, reference, check, *case)


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradient(student, reference, check, case):
    got, ref = _check(student, reference, check, *case)
    check.grad("scores gradient", got["scores_grad"], ref["scores_grad"], tol="aux",
               axes=EXPERTS)
