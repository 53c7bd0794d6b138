"""Practice case for part "attention" (0 points), built from the other parts: like its
graded tests it compares with `explained` too, so a student whose other parts hold a
known mistake sees it named there, not here. Shipped with its recorded results, so its
seed is one no graded case uses."""
from _attn_common import attention_args, check_attention


def test_practice_output(student, reference, explained, check):
    args = attention_args(10_002, "float32", 1, 4, 2, 4, 2, 8, True)
    check_attention(check, student.call("attention", **args),
                    reference.call("attention", **args),
                    lambda: explained.call("attention", **args))
