"""Part "moe": MOEFeedForward end to end against the reference: its layout, train and
eval outputs, aux_loss in both modes, gradients; E of 3, 4 and 8, K up to E, sizes
that are not powers of two, one token, experts that get no token.

The layer is graded on its wiring. Where it differs from the reference, it may still
match the reference with the mistakes the grader established in the student's other
parts (the `explained` fixture: trusted code only, never the student's own parts run
again), and then those mistakes cost points in their parts only.
"""
import itertools

import pytest

from _moe_common import HIDDEN, MoeCase as Case, check_moe, moe_args


CASES = [Case(4, 1, True, "float32", 5e-4, 2, 5, 64, 128, 100),
         Case(4, 2, True, "float32", 5e-4, 2, 5, 64, 128, 101),
         Case(4, 2, False, "float32", 0.1, 2, 5, 64, 128, 102),
         Case(3, 2, True, "float32", 1.0, 2, 7, 48, 80, 103),
         Case(8, 2, True, "float64", 1.0, 3, 4, 40, 104, 104),
         Case(8, 1, True, "float64", 1.0, 1, 3, 24, 72, 105),   # most experts get no token
         Case(3, 3, True, "float64", 0.1, 1, 1, 48, 80, 106)]   # one token, K = E
EVAL_CASES = [CASES[1], CASES[3], CASES[5]]
GRADIENT_CASES = [CASES[4], CASES[6]]


def _call(student, reference, explained, case, train):
    e, k, norm, dtype, coef, b, s, hidden, inter, seed = case
    args = moe_args(seed, dtype, b, s, e, hidden, inter, k, norm, coef, train,
                    train and case in GRADIENT_CASES)
    got, ref = student.call("moe", **args), reference.call("moe", **args)
    return got, ref, lambda: explained.call("moe", **args)


@pytest.mark.parametrize("case", [CASES[3]])  # one case, named like the others
def test_layout(student, reference, explained, check, case):
    """Earned by behaviour only (the layer computes the reference's function with the
    reference's weights loaded by name); what the layer reports can only cost points."""
    got, ref, also = _call(student, reference, explained, case, train=True)
    layout, want = got["layout"], ref["layout"]

    def same(*keys: str) -> bool:  # as the reference, or as the explained mistakes' layer
        return any(all(layout[k] == w[k] for k in keys)
                   for w in itertools.chain([want], (r["layout"] for r in also())))

    check.true("gate is nn.Linear without bias", same("gate_linear", "gate_bias"),
               "self.gate should be nn.Linear(hidden_size, num_experts, bias=False)")
    found = (f"{layout['experts']} experts" if layout["experts_list"]
             else "no nn.ModuleList")
    check.true("experts", same("experts_list", "experts"),
               f"self.experts should be an nn.ModuleList of {want['experts']} experts "
               f"(num_experts={want['experts']}); found {found[:40]}")
    extra = [str(n)[:80] for n in layout["extra"]]
    check.true("no parameters beyond the gate and the experts", same("extra"),
               f"parameters the reference does not have: {', '.join(extra[:5])} "
               "(a shared expert or a gate bias changes the layer)")
    check_moe(check, got, ref, also)


@pytest.mark.parametrize("case", CASES)
def test_train(student, reference, explained, check, case):
    check_moe(check, *_call(student, reference, explained, case, train=True))


@pytest.mark.parametrize("case", EVAL_CASES)
def test_eval(student, reference, explained, check, case):
    """In eval the aux loss is a 0-dim zero, whatever the other parts do."""
    got, ref, also = _call(student, reference, explained, case, train=False)
    check_moe(check, got, ref, also)


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradients(student, reference, explained, check, case):
    got, ref, also = _call(student, reference, explained, case, train=True)
    tol = "moe_gradient64" if case.dtype == "float64" else None  # why: course.yml
    check.grad("input gradient", got["x_grad"], ref["x_grad"], tol,
               alt=lambda: [r["x_grad"] for r in also()], axes=HIDDEN)
    check.grads("parameter gradient", got["grads"], ref["grads"], tol,
                alt=lambda: [r["grads"] for r in also()])
