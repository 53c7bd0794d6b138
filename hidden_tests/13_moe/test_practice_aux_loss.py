"""Practice case for part "aux_loss" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses; its id names its
case's fields as the graded tests' ids do."""
import pytest

from _moe_common import AuxCase, aux_args, check_aux


@pytest.mark.parametrize("case", [AuxCase(4, 2, "float32", 1.0, 10, 10_004)])
def test_practice_aux(student, reference, check, case):
    args = aux_args(case.seed, case.dtype, case.N, case.E, case.K, case.coef)
    check_aux(check, student.call("aux_loss", **args), reference.call("aux_loss", **args))
