"""Part "block": MiniMindBlock.forward, pre-norm and the two residuals, with a dense
FFN and with MOEFeedForward (train and eval), a cache and a padding mask. The block
runs on the reference Attention (probes.py's stand-in): an attention mistake is the
self_attn part's to charge, not this one's."""
import pytest

from _asm_common import check_layer, config, layer_args

# seed, dtype, config, batch, seq, past, use_cache, padded, train
CASES = [(300, "float32", config(), 2, 5, 0, False, False, True),
         (301, "float64", config(moe=True), 2, 4, 2, True, True, True),
         (302, "float32", config(moe=True, k=1), 1, 3, 0, True, False, False)]
IDS = ["dense", "moe-cache-padding", "moe-eval"]
GRADIENT_CASES = [CASES[0], CASES[1]]  # the other skips the backward pass (speed)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_block(student, reference, check, case):
    seed, dtype, cfg, b, s, past, cache, padded, train = case
    args = layer_args(seed, tuple(cfg.items()), dtype, "block", b, s, past, cache, padded,
                      train, grads=case in GRADIENT_CASES)
    check_layer(check, student.call("block_forward", **args),
                reference.call("block_forward", **args))
