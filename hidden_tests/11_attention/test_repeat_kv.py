"""Part "repeat_kv": grouped-query attention's key/value heads repeated in place, with
MiniMind's 8 query and 4 kv heads, multi-query attention (one kv head), n_rep 1 (x
itself: a float64 x stays float64), 2, 3, 4 and 8, bfloat16 (a copy is exact in any
dtype), head dim 96 and one decoding step."""
import pytest

from _attn_common import check_tensor, kv

# (seed, dtype, x shape [B, T, H_kv, D], n_rep)
CASES = [
    (110, "float32", (2, 5, 4, 8), 2),
    (111, "float32", (1, 3, 1, 16), 8),
    (112, "float64", (2, 4, 2, 8), 4),
    (113, "float64", (2, 3, 4, 8), 1),
    (114, "bfloat16", (1, 6, 2, 96), 4),
    (115, "float32", (3, 1, 3, 8), 3),
]
IDS = ["minimind-4-kv-heads", "mqa-one-kv-head", "float64-n_rep4", "n_rep1-unchanged-float64",
       "bfloat16-d96", "decode-step-n_rep3"]


@pytest.mark.parametrize("seed,dtype,shape,n_rep", CASES, ids=IDS)
def test_repeat(student, reference, check, seed, dtype, shape, n_rep):
    args = dict(x=kv(seed, dtype, shape), n_rep=n_rep)
    got, ref = student.call("repeat_kv", **args), reference.call("repeat_kv", **args)
    check_tensor(check, "repeat_kv", got["y"], ref["y"])
