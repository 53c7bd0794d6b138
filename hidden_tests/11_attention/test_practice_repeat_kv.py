"""Practice case for part "repeat_kv" (0 points): shipped with its recorded reference
result, so its seed is one no graded case uses."""
from _attn_common import check_tensor, kv


def test_practice_repeat(student, reference, check):
    args = dict(x=kv(10_000, "float32", (1, 4, 2, 8)), n_rep=2)
    got, ref = student.call("repeat_kv", **args), reference.call("repeat_kv", **args)
    check_tensor(check, "repeat_kv", got["y"], ref["y"])
