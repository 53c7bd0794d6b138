"""Part "model": the forward over N blocks: embeddings, the RoPE rows of the new tokens
after a cache, every layer's cache, the final norm, lm_head, and the sum of every MoE
layer's aux loss (train and eval); logits, caches and (in one case) gradients. The
model runs on the reference MiniMindBlock (probes.py's stand-in): a block or attention
mistake is charged in its own part, not here."""
import pytest

from _asm_common import check_model, config, model_args

# seed, dtype, config, batch, seq, past, use_cache, padded, train
CASES = [(400, "float32", config(), 2, 5, 0, True, False, True),
         (401, "float64", config(moe=True, layers=3), 2, 4, 3, True, True, True),
         (402, "float32", config(moe=True), 1, 1, 5, True, True, False),
         (403, "float32", config(layers=1), 2, 3, 0, False, True, True)]
IDS = ["dense", "moe-3-layers-cache-padding", "moe-eval-one-token", "one-layer-no-cache"]
GRADIENT_CASES = [CASES[1]]  # the others skip the backward pass (speed)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_model(student, reference, check, case):
    seed, dtype, cfg, b, s, past, cache, padded, train = case
    args = model_args(seed, tuple(cfg.items()), dtype, b, s, past, cache, padded, train,
                      grads=case in GRADIENT_CASES)
    check_model(check, student.call("model_forward", **args),
                reference.call("model_forward", **args))
