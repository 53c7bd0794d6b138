"""Practice case for part "mask" (0 points): shipped with its recorded reference
result, so its seed is one no graded case uses."""
from _attn_common import scores_args


def test_practice_masked(student, reference, check):
    args = scores_args(10_001, "float32", 1, 2, 3, 2, True)
    got, ref = student.call("mask", **args), reference.call("mask", **args)
    check.shape("scores shape", got["scores"], tuple(ref["scores"].shape))
    check.close("masked scores", got["scores"], ref["scores"])
