"""Practice case for part "dispatch" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses."""
from _moe_common import check_dispatch, dispatch_args


def test_practice_dispatch(student, reference, check):
    args = dispatch_args(10_003, "float32", 10, 4, 64, 128, 2, False)
    check_dispatch(check, student.call("dispatch", **args),
                   reference.call("dispatch", **args), args["topk_idx"])
