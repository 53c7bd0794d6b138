"""Part "self_attn": Attention.forward around the stood-in pieces: projections, heads
and grouped-query kv heads, the q/k norms, RoPE on q and k, the KV cache (after the
cached keys, with the positions' offset given), the causal and padding masks; outputs,
caches and (in two cases) gradients. Sizes not powers of two, one token, MHA and GQA."""
import pytest

from _asm_common import check_layer, config, layer_args

# seed, dtype, config, batch, seq, past, use_cache, padded
CASES = [(200, "float32", config(), 2, 5, 0, False, False),
         (201, "float32", config(), 2, 4, 3, True, True),
         (202, "float64", config(hidden=24, heads=3, kv_heads=1), 1, 6, 2, True, False),
         (203, "float32", config(heads=4, kv_heads=4), 3, 1, 4, True, True),
         (204, "float64", config(hidden=48, heads=6, kv_heads=2), 2, 7, 0, True, True)]
IDS = ["plain", "cache-padding", "mqa-cache", "mha-one-token", "gqa-padding"]
GRADIENT_CASES = [CASES[1], CASES[4]]  # the others skip the backward pass (speed)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_self_attn(student, reference, check, case):
    seed, dtype, cfg, b, s, past, cache, padded = case
    args = layer_args(seed, tuple(cfg.items()), dtype, "attention", b, s, past, cache, padded,
                      grads=case in GRADIENT_CASES)
    check_layer(check, student.call("attention_forward", **args),
                reference.call("attention_forward", **args))
