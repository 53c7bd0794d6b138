"""Practice case for part "apply" (0 points): shipped with its recorded reference
result, so its inputs come from a seed no graded case uses. Its parameters and id are
named as the graded tests' are."""
import pytest

from _rope_common import apply_args, check_apply


@pytest.mark.parametrize("seed,dtype,batch,heads,kv_heads,positions,freqs,layout",
                         [(10_012, "float32", 1, 2, 1, (4, 9),
                           dict(dim=16, end=32, rope_base=1e4), "bshd")],
                         ids=["d16-pos4-float32"])
def test_practice_rotation(student, reference, check, seed, dtype, batch, heads, kv_heads,
                           positions, freqs, layout):
    args = apply_args(reference, seed, dtype, batch, heads, kv_heads, positions, freqs, layout)
    check_apply(check, student.call("apply", **args), reference.call("apply", **args))
