"""Practice case for part "ffn" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses."""
from _moe_common import check_ffn, ffn_inputs


def test_practice_ffn(student, reference, check):
    args = ffn_inputs(10_001, "float32", 64, 128, 2, 5)
    check_ffn(check, student.call("ffn_forward", **args), reference.call("ffn_forward", **args))
