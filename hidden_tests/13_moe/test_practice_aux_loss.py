"""Practice case for part "aux_loss" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses."""
from _moe_common import aux_args, check_aux


def test_practice_aux(student, reference, check):
    args = aux_args(10_004, "float32", 10, 4, 2, 1.0)
    check_aux(check, student.call("aux_loss", **args), reference.call("aux_loss", **args))
