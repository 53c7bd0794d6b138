"""Part "aux_loss": the load-balancing loss, a 0-dim tensor."""
from functools import lru_cache

import pytest

from _inputs import DTYPES, E, routing


@lru_cache(maxsize=None)  # the same inputs for every student: build them once
def _inputs(k, dtype, coef, seed):
    idx, _, scores = routing(seed + 80, DTYPES[dtype], k)
    return dict(scores=scores, topk_idx=idx, num_experts=E, coef=coef)


def _check_aux(student, reference, check, k, dtype, coef, seed):
    args = _inputs(k, dtype, coef, seed)
    got, ref = student.call("aux_loss", **args), reference.call("aux_loss", **args)
    check.shape("aux shape (0-dim)", got["aux"], tuple(ref["aux"].shape))
    check.close("aux value", got["aux"].reshape(()) if got["aux"].numel() == 1 else got["aux"],
                ref["aux"], tol="aux")
    return got, ref


@pytest.mark.parametrize("k,dtype,coef,seed", [
    (1, "float32", 5e-4, 0), (2, "float32", 5e-4, 1), (1, "float32", 1.0, 2),
    (2, "float32", 1.0, 3), (2, "float64", 0.1, 4), (3, "float64", 1.0, 5)])
def test_aux(student, reference, check, k, dtype, coef, seed):
    _check_aux(student, reference, check, k, dtype, coef, seed)


@pytest.mark.public
def test_aux_public(student, reference, check):
    """The public copy of a hidden case: students can run it, graders pay for it once."""
    _check_aux(student, reference, check, 2, "float32", 1.0, 3)


@pytest.mark.parametrize("k,dtype,coef,seed", [(2, "float64", 0.1, 4), (3, "float64", 1.0, 5)])
def test_gradient(student, reference, check, k, dtype, coef, seed):
    got, ref = _check_aux(student, reference, check, k, dtype, coef, seed)
    check.grad("scores gradient", got["scores_grad"], ref["scores_grad"], tol="aux")
