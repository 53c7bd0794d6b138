"""Part "moe": MOEFeedForward end to end, train and eval, against the reference.

The layer is graded on its wiring: where its results differ from the reference
but equal the composition of the student's own route, dispatch and
load_balancing_loss, the bug was already counted in those parts.
"""
import pytest

from _inputs import DTYPES, E, H, I, moe_inputs

OWN = "matches your own route → dispatch → load_balancing_loss (their bugs are graded there)"


def _run(student, reference, k, norm, dtype, coef, seed, train):
    """(student's results, reference's, the student's composed parts when asked for).
    Gradients are computed only for the cases test_gradients checks (the same call
    serves both tests); the other cases skip the backward pass."""
    state, x, gy = moe_inputs(seed + 100, DTYPES[dtype], k)
    args = dict(hidden=H, inter=I, num_experts=E, k=k, norm=norm, coef=coef, state=state,
                x=x, gy=gy, train=train,
                grads=train and (k, norm, dtype, coef, seed) in GRADIENT_CASES)

    def own(key: str):
        return lambda: student.call("moe_composed", **args).get(key)

    return student.call("moe", **args), reference.call("moe", **args), own


CASES = [(1, True, "float32", 5e-4, 0), (2, True, "float32", 5e-4, 1),
         (2, False, "float32", 0.1, 2), (1, True, "float64", 1.0, 3),
         (2, True, "float64", 1.0, 4)]
GRADIENT_CASES = CASES[3:]


@pytest.mark.parametrize("k,norm,dtype,coef,seed", CASES)
def test_train(student, reference, check, k, norm, dtype, coef, seed):
    got, ref, own = _run(student, reference, k, norm, dtype, coef, seed, train=True)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"], alt=own("comp_y"), alt_note=OWN)
    check.shape("aux_loss shape (0-dim)", got["aux"], tuple(ref["aux"].shape))
    check.close("aux_loss", got["aux"], ref["aux"], tol="aux", alt=own("comp_aux"), alt_note=OWN)


@pytest.mark.parametrize("k,norm,dtype,coef,seed", CASES[:3])
def test_eval(student, reference, check, k, norm, dtype, coef, seed):
    got, ref, own = _run(student, reference, k, norm, dtype, coef, seed, train=False)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"], alt=own("comp_y"), alt_note=OWN)
    check.shape("eval aux_loss shape (0-dim)", got["aux"], tuple(ref["aux"].shape))
    check.close("eval aux_loss (a 0-dim zero)", got["aux"], ref["aux"], tol="aux")


@pytest.mark.public
def test_train_public(student, reference, check):
    """The public copy of a hidden case: students can run it, graders pay for it once."""
    test_train(student, reference, check, 2, True, "float32", 5e-4, 1)


@pytest.mark.parametrize("k,norm,dtype,coef,seed", GRADIENT_CASES)
def test_gradients(student, reference, check, k, norm, dtype, coef, seed):
    got, ref, own = _run(student, reference, k, norm, dtype, coef, seed, train=True)
    check.grad("input gradient", got["x_grad"], ref["x_grad"], alt=own("comp_x_grad"),
               alt_note=OWN)
    check.grads("parameter gradient", got["grads"], ref["grads"], alt=own("comp_grads"),
                alt_note=OWN)
