"""Practice case for part "mask" (0 points): shipped with its recorded reference
result, so its seed is one no graded case uses. Its parameters and id are named as the
graded tests' are."""
import pytest

from _attn_common import scores_args


@pytest.mark.parametrize("seed,dtype,batch,heads,seq,past,padded",
                         [(10_001, "float32", 1, 2, 3, 2, True)], ids=["cache-past2-padding"])
def test_practice_masked(student, reference, check, seed, dtype, batch, heads, seq, past,
                         padded):
    args = scores_args(seed, dtype, batch, heads, seq, past, padded)
    got, ref = student.call("mask", **args), reference.call("mask", **args)
    check.shape("scores shape", got["scores"], tuple(ref["scores"].shape))
    check.close("masked scores", got["scores"], ref["scores"])
