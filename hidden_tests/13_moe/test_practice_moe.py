"""Practice case for part "moe" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses; its id names its
case's fields as the graded tests' ids do."""
import pytest

from _moe_common import MoeCase, check_moe, moe_args


@pytest.mark.parametrize("case", [MoeCase(4, 2, True, "float32", 5e-4, 2, 5, 64, 128, 10_005)])
def test_practice_moe(student, reference, explained, check, case):
    args = moe_args(case.seed, case.dtype, case.B, case.S, case.E, case.H, case.I, case.K,
                    case.norm_topk_prob, case.coef, True, False)
    check_moe(check, student.call("moe", **args), reference.call("moe", **args),
              lambda: explained.call("moe", **args))
