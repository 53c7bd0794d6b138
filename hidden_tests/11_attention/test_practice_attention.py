"""Practice case for part "attention" (0 points), built from the other parts: like its
graded tests it compares with `explained` too, so a student whose other parts hold a
known mistake sees it named there, not here. Shipped with its recorded results, so its
seed is one no graded case uses. Its parameters and id are named as the graded tests' are."""
import pytest

from _attn_common import attention_args, check_attention


@pytest.mark.parametrize("seed,dtype,batch,seq,past,heads,kv_heads,head_dim,padded",
                         [(10_002, "float32", 1, 4, 2, 4, 2, 8, True)],
                         ids=["gqa-cache-past2-padding"])
def test_practice_output(student, reference, explained, check, seed, dtype, batch, seq, past,
                         heads, kv_heads, head_dim, padded):
    args = attention_args(seed, dtype, batch, seq, past, heads, kv_heads, head_dim, padded)
    check_attention(check, student.call("attention", **args),
                    reference.call("attention", **args),
                    lambda: explained.call("attention", **args))
