"""Part "mask": the causal and the padding mask on scores [B, H, S, T]: a prompt
(T = S), after a KV cache (T = past + S: the causal mask covers the last S keys),
one decoding step (nothing masked but padding), padding with and without a cache,
float64. Masked places read as the dtype's lowest value (probes.py says why)."""
import pytest

from _attn_common import scores_args

# (seed, dtype, batch, heads, seq, past, padded)
CASES = [
    (120, "float32", 2, 2, 5, 0, False),
    (121, "float32", 2, 2, 4, 3, False),
    (122, "float32", 2, 3, 6, 0, True),
    (123, "float64", 2, 2, 3, 5, True),
    (124, "float32", 3, 2, 1, 7, False),
    (125, "float32", 1, 2, 1, 7, True),
]
IDS = ["prompt", "cache-past3", "prompt-padding", "cache-padding-float64", "decode-step",
       "decode-step-padding"]


@pytest.mark.parametrize("seed,dtype,batch,heads,seq,past,padded", CASES, ids=IDS)
def test_masked(student, reference, check, seed, dtype, batch, heads, seq, past, padded):
    args = scores_args(seed, dtype, batch, heads, seq, past, padded)
    got, ref = student.call("mask", **args), reference.call("mask", **args)
    check.shape("scores shape", got["scores"], tuple(ref["scores"].shape))
    check.equal("scores dtype", str(got["scores"].dtype), str(ref["scores"].dtype),
                "the masked scores keep the scores' dtype")
    check.close("masked scores", got["scores"], ref["scores"])
