"""Practice case for part "ffn" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses; its id names its
case's fields as the graded tests' ids do."""
import pytest

from _moe_common import FfnCase, check_ffn, ffn_inputs


@pytest.mark.parametrize("case", [FfnCase("float32", 64, 128, 2, 5, 10_001)])
def test_practice_ffn(student, reference, check, case):
    args = ffn_inputs(case.seed, case.dtype, case.H, case.I, case.B, case.S)
    check_ffn(check, student.call("ffn_forward", **args), reference.call("ffn_forward", **args))
