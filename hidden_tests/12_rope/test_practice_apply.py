"""Practice case for part "apply" (0 points): shipped with its recorded reference
result, so its inputs come from a seed no graded case uses."""
from _rope_common import apply_args, check_apply


def test_practice_rotation(student, reference, check):
    args = apply_args(reference, 10_012, "float32", 1, 2, 1, (4, 9),
                      dict(dim=16, end=32, rope_base=1e4))
    check_apply(check, student.call("apply", **args), reference.call("apply", **args))
