"""Part "ffn": the dense SwiGLU FeedForward, at several sizes (H and I not powers of
two, one token), its layout, outputs and gradients."""
import pytest

from _moe_common import FfnCase as Case, HIDDEN, check_ffn, ffn_inputs


CASES = [Case("float32", 64, 128, 2, 5, 0), Case("float32", 48, 136, 3, 7, 1),
         Case("float64", 24, 72, 2, 5, 2), Case("float32", 40, 104, 1, 1, 3)]
GRADIENT_CASES = [CASES[1], CASES[2]]


def _call(student, reference, case):
    args = ffn_inputs(case[5], *case[:5])
    return student.call("ffn_forward", **args), reference.call("ffn_forward", **args)


@pytest.mark.parametrize("case", [CASES[1]])  # one case, named like the others
def test_layout(student, reference, check, case):
    """Earned by behaviour only: with the reference's weights loaded by name (and any
    parameter the reference lacks set to non-zero values) the layer computes the
    reference's function. The names the layer reports can only cost points."""
    got, ref = _call(student, reference, case)
    layout, want = got["layout"], ref["layout"]
    for name, ok in want["linear"].items():
        check.true(f"{name} is nn.Linear", bool(layout["linear"].get(name)) == ok,
                   f"self.{name} should be an nn.Linear")
    extra = [str(n)[:80] for n in layout["extra"]]
    check.true("no parameters beyond gate_proj, up_proj, down_proj weights",
               extra == want["extra"],
               f"parameters the reference does not have: {', '.join(extra[:5])} "
               "(bias=False on all three projections)")
    check_ffn(check, got, ref)


@pytest.mark.parametrize("case", CASES)
def test_output(student, reference, check, case):
    got, ref = _call(student, reference, case)
    check_ffn(check, got, ref)


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradients(student, reference, check, case):
    got, ref = _call(student, reference, case)
    check.grad("input gradient", got["x_grad"], ref["x_grad"], axes=HIDDEN)
    check.grads("parameter gradient", got["grads"], ref["grads"])
