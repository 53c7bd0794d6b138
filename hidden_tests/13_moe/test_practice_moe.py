"""Practice case for part "moe" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses."""
from _moe_common import check_moe, moe_args


def test_practice_moe(student, reference, explained, check):
    args = moe_args(10_005, "float32", 2, 5, 4, 64, 128, 2, True, 5e-4, True, False)
    check_moe(check, student.call("moe", **args), reference.call("moe", **args),
              lambda: explained.call("moe", **args))
