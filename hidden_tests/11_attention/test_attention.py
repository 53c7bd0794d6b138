"""Part "attention", built from repeat_kv and mask_scores: multi-head (n_rep 1),
MiniMind's 8 query and 4 kv heads (head dim 96 too), multi-query, after a KV cache,
one decoding step, padding, float64, and the gradients of q, k and v.

It comes after its parts in course.yml and compares with the reference or, else,
with the solution carrying the mistakes found in the student's other parts
(`explained`: trusted code only), so those mistakes cost points there only. A part
mistake that changes a shape the layer can't use makes the student's layer raise
here, and a raising test is never excused (docs/authoring.md, "A composite part")."""
import pytest

from _attn_common import attention_args, check_attention

# (seed, dtype, batch, seq, past, heads, kv_heads, head_dim, padded)
CASES = [
    (130, "float32", 2, 5, 0, 4, 4, 8, False),
    (131, "float32", 2, 6, 0, 8, 4, 16, False),
    (132, "float32", 1, 4, 0, 4, 1, 8, False),
    (133, "float32", 2, 3, 5, 8, 4, 16, False),
    (134, "float64", 2, 5, 0, 4, 2, 8, True),
    (135, "float32", 2, 1, 9, 8, 4, 16, True),
    (136, "float32", 1, 16, 0, 8, 4, 96, False),
]
IDS = ["mha-prompt", "gqa-8-heads-4-kv", "mqa", "gqa-cache-past5", "gqa-padding-float64",
       "decode-step-padding", "minimind-d96"]
GRADIENT_CASES = [(137, "float64", 1, 4, 2, 4, 2, 8, True)]


@pytest.mark.parametrize("seed,dtype,batch,seq,past,heads,kv_heads,head_dim,padded", CASES,
                         ids=IDS)
def test_output(student, reference, explained, check, seed, dtype, batch, seq, past, heads,
                kv_heads, head_dim, padded):
    args = attention_args(seed, dtype, batch, seq, past, heads, kv_heads, head_dim, padded)
    check_attention(check, student.call("attention", **args),
                    reference.call("attention", **args),
                    lambda: explained.call("attention", **args))


@pytest.mark.parametrize("seed,dtype,batch,seq,past,heads,kv_heads,head_dim,padded",
                         GRADIENT_CASES, ids=["gqa-cache-padding-float64"])
def test_gradients(student, reference, explained, check, seed, dtype, batch, seq, past,
                   heads, kv_heads, head_dim, padded):
    args = attention_args(seed, dtype, batch, seq, past, heads, kv_heads, head_dim, padded,
                          grads=True)
    check_attention(check, student.call("attention", **args),
                    reference.call("attention", **args),
                    lambda: explained.call("attention", **args))
