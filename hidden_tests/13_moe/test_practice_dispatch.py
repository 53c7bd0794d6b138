"""Practice case for part "dispatch" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses; its id names its
case's fields as the graded tests' ids do."""
import pytest

from _moe_common import DispatchCase, check_dispatch, dispatch_args


@pytest.mark.parametrize("case", [DispatchCase(4, 2, "float32", 10, 64, 128, 10_003)])
def test_practice_dispatch(student, reference, check, case):
    args = dispatch_args(case.seed, case.dtype, case.N, case.E, case.H, case.I, case.K, False)
    check_dispatch(check, student.call("dispatch", **args),
                   reference.call("dispatch", **args), args["topk_idx"])
