"""Part "own": the student's model on their own lessons 10-13 (grader/judge/earlier.py):
each piece whose parts got full marks in its lesson runs as the student's own; any
other is stood in for, its lesson's mistake charged there and not again here. Known
wiring mistakes of the other parts are accepted too (the `explained` fixture, asked for
the model on the solution's own blocks: own_model there): this part asks whether the
student's pieces work together, not the wiring again."""
import pytest

from _asm_common import check_model, config, model_args

# seed, dtype, config, batch, seq, past, use_cache, padded, train
CASES = [(500, "float32", config(moe=True), 2, 4, 2, True, True, True)]


@pytest.mark.parametrize("case", CASES, ids=["moe-cache-padding"])
def test_own(student, reference, explained, check, case):
    seed, dtype, cfg, b, s, past, cache, padded, train = case
    args = model_args(seed, tuple(cfg.items()), dtype, b, s, past, cache, padded, train,
                      grads=False)  # the pieces' gradients were graded in their lessons
    found = getattr(student, "earlier", None)  # none: every piece stood in for
    own, sources = (found.own(), found.sources) if found else ({}, {})
    check_model(check, student.call("own_model", own=own, sources=sources, **args),
                reference.call("model_forward", **args),
                lambda: explained.call("own_model", own={}, sources={}, **args))
