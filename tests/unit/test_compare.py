"""Numeric checks: tolerances, shapes, NaN, None gradients, the worst element (of a
practice case; a graded case's checks name no element)."""
import numpy as np
import torch

from grader.judge import structure
from grader.judge.divergence import matching
from grader.judge.compare import Checks
from grader.config import Tolerance

TOL = {"float32": Tolerance(atol=1e-5, rtol=1e-4), "float64": Tolerance(atol=1e-10, rtol=0),
       "aux": Tolerance(atol=1e-9, rtol=1e-5)}


def test_within_and_beyond_tolerance():
    c = Checks(TOL, practice=True)
    ref = torch.zeros(2, 3)
    assert c.close("ok", ref + 5e-6, ref)
    bad = ref.clone()
    bad[1, 2] = 1e-3
    assert not c.close("bad", bad, ref)
    check = c.items[-1]
    assert check.where == [1, 2] and abs(check.max_abs_diff - 1e-3) < 1e-9
    assert check.heatmap is not None and check.message.startswith("1 of 6 values beyond")
    assert (check.outside, check.size) == (1, 6)


# what a check may record of one element: a graded case's records none of it
ONE_ELEMENT = {"where", "max_abs_diff", "max_rel_diff", "got_value", "ref_value", "heatmap",
               "axes"}


def test_a_graded_check_records_its_verdict_and_count_and_no_element():
    """A graded case's check (the default) keeps the verdict, shapes, dtypes, the
    tolerance and the count beyond it; no position, value, difference or heatmap,
    passed or failed, and its structure claim names no rows."""
    c = Checks(TOL)
    ref = torch.arange(12.0).reshape(4, 3)
    bad = ref.clone()
    bad[2, 1] += 0.5
    assert not c.close("bad", bad, ref, axes={"rows": "tokens"})
    assert c.close("ok", ref + 1e-6, ref)
    assert c.close("equal", ref.clone(), ref)
    failed, *passed = [check.to_dict() for check in c.items]
    assert not failed.keys() & ONE_ELEMENT and not any(p.keys() & ONE_ELEMENT for p in passed)
    assert (failed["outside"], failed["size"], failed["ref_shape"]) == (1, 12, [4, 3])
    assert failed["message"].startswith("1 of 12 values beyond")
    assert failed["structure"] == {"kind": "rows", "count": 1, "total": 4}
    shown = Checks(TOL, practice=True)
    shown.close("bad", bad, ref)
    assert shown.items[-1].structure["rows"] == [2] and shown.items[-1].where == [2, 1]


def test_a_graded_case_keeps_no_counts_to_draw():
    """Which labels' counts differ from the reference's (tokens per expert) is a fact of
    one element each: a graded case's test draws none, a practice case's both sides."""
    graded, practice = Checks(TOL), Checks(TOL, practice=True)
    for c in (graded, practice):
        c.counts("tokens per expert", ["expert 0", "expert 1"], [3, 1], [2, 2])
    assert graded.pictures == [] and practice.pictures[0]["ref"] == [2.0, 2.0]


def test_dtype_picks_the_tolerance():
    c = Checks(TOL)
    ref = torch.zeros(3, dtype=torch.float64)
    assert not c.close("fp64", ref + 1e-8, ref)
    assert c.close("fp32", torch.zeros(3) + 1e-8, torch.zeros(3))


def test_shape_mismatch_and_wrong_type_fail_with_a_message():
    c = Checks(TOL)
    assert not c.close("shape", torch.zeros(10, 4), torch.zeros(2, 5, 4))
    assert "shape [10, 4], expected [2, 5, 4]" in c.items[-1].message
    assert not c.close("type", [1, 2], torch.zeros(2))
    assert "expected a tensor" in c.items[-1].message


def test_nan_never_passes():
    c = Checks(TOL)
    assert not c.close("nan", torch.tensor([float("nan")]), torch.tensor([0.0]))


def test_a_non_finite_reference_is_matched_only_by_itself():
    """Where the reference is inf, atol + rtol·|ref| was inf, so any finite answer (and
    -inf) passed there. A non-finite reference allows no error: the same inf passes, a
    finite value or the other sign fails; NaN where NaN passes, a number there fails."""
    c = Checks(TOL)
    inf = float("inf")
    ref = torch.tensor([1.0, inf, -inf, float("nan")])
    assert c.close("same", torch.tensor([1.0, inf, -inf, float("nan")]), ref)
    for wrong in ([1.0, 3.0, -inf, float("nan")], [1.0, inf, inf, float("nan")],
                  [1.0, inf, -inf, 0.0], [1.0, 1e38, -inf, float("nan")]):
        assert not c.close("wrong", torch.tensor(wrong), ref), wrong
        assert c.items[-1].outside == 1
    # the structure sentences and the line of divergence read the same rule
    assert not structure.within(np.array([1.0, 3.0]), np.array([1.0, inf]), 1e-5, 1e-4)
    tol = matching.Tolerance(1e-5, 1e-4)
    assert not matching.close(torch.tensor([1.0, 3.0]), torch.tensor([1.0, inf]), tol)
    assert matching.close(torch.tensor([1.0, inf]), torch.tensor([1.0, inf]), tol)


def test_none_gradient_equals_zeros():
    c = Checks(TOL)
    assert c.grad("both none", None, None)
    assert c.grad("none vs zeros", None, torch.zeros(3))
    assert not c.grad("none vs ones", None, torch.ones(3))


def test_alternative_reference_is_recorded():
    c = Checks(TOL)
    ref, alt = torch.zeros(2), torch.ones(2)
    assert c.close("alt", torch.ones(2), ref, alt=alt, alt_note="matches your own parts")
    assert c.items[-1].message == "matches your own parts"


def test_zero_dim_results_pass_and_fail_with_numbers():
    """0-dim tensors (an aux loss) go through the same numbers as any other."""
    c = Checks(TOL, practice=True)
    assert c.close("aux ok", torch.tensor(0.25, dtype=torch.float64),
                   torch.tensor(0.25, dtype=torch.float64), tol="aux")
    assert not c.close("aux bad", torch.tensor(0.5), torch.tensor(0.25), tol="aux")
    check = c.items[-1]
    assert check.where == [] and check.got_value == 0.5 and check.ref_value == 0.25
    assert abs(check.max_abs_diff - 0.25) < 1e-12 and "0.25" not in check.message
    assert not c.close("aux nan", torch.tensor(float("nan")), torch.tensor(0.0), tol="aux")
    assert c.items[-1].max_abs_diff is None


def test_reference_conversion_is_kept_and_never_changed():
    c = Checks(TOL)
    ref = torch.tensor([1.0, float("nan")], dtype=torch.float64)
    assert c.close("both nan", torch.tensor([1.0, float("nan")]), ref)
    assert not c.close("one nan", torch.tensor([float("nan"), 1.0]), ref)
    assert torch.equal(torch.from_numpy(ref._grader_f64.copy()).isnan(), ref.isnan())


def test_a_reference_kept_allowance_is_its_tolerance_own():
    """The allowance kept on a reference is per tolerance: the same reference checked
    under a looser one and then a tighter one gets each verdict right."""
    c = Checks(TOL)
    ref = torch.ones(4, dtype=torch.float64)
    got = ref + 1e-6
    assert c.close("aux", got, ref, tol="aux")
    assert not c.close("float64", got, ref)
    assert c.close("aux again", got, ref, tol="aux")
    assert not ref._grader_allowed[1e-10, 0].flags.writeable


def test_a_non_finite_error_is_written_as_the_sentinel_the_pages_read():
    """compare writes NaN and inf cells of a heatmap as shown.NON_FINITE (JSON has
    neither), and the pages show that as inf, the chart's dark cell."""
    from grader.pages import charts
    from grader.judge.compare import _heatmap
    from grader.text.shown import NON_FINITE, num

    grid = _heatmap(torch.tensor([[0.0, float("nan")], [float("inf"), 1.0]]))
    assert grid == [[0.0, NON_FINITE], [NON_FINITE, 1.0]]
    assert num(grid[0][1]) == "inf" and num(grid[1][1]) == "1"
    assert charts._heat_colour(grid[0][1], 1e-6, 6.0) == "#1a1a1a"


def test_the_tolerance_advisor_measures_errors_by_the_checks_own_rule():
    """One rule for errors: `grader tolerance` records the error the check measured,
    both NaN agreeing and one NaN infinite, and a NaN in the reference leaves the
    relative error of the other elements a number."""
    from grader.author.tolerance.measured import Measuring

    rec = Measuring(TOL, "test_x", "case")
    ref = torch.tensor([2.0, float("nan")], dtype=torch.float64)
    assert not rec.close("out", torch.tensor([2.5, float("nan")], dtype=torch.float64), ref)
    check, seen = rec.items[-1], rec.compared[-1]
    assert seen.max_abs == check.max_abs_diff == 0.5
    assert seen.max_rel == check.max_rel_diff == 0.25
    rec.close("one nan", torch.tensor([float("nan"), 1.0], dtype=torch.float64), ref)
    assert rec.compared[-1].max_abs == float("inf") and rec.items[-1].max_abs_diff is None


def test_a_later_heatmap_is_the_one_drawn_at_once_and_only_shown_ones_are_drawn():
    """The grading path's checks keep each failing check's heatmap for later
    (`compare.Later`); drawn, it is the heatmap a check draws at once. The record then
    draws the heatmaps its page shows, in the checks, and drops the others."""
    from grader.judge.compare import Later
    from grader.record import TestRecord
    from grader.judge.runner import draw_shown

    g = torch.Generator().manual_seed(3)
    ref = torch.randn(5, 40, 70, generator=g)
    got = ref.clone()
    got[..., :35] += torch.rand(5, 40, 35, generator=g) ** 4  # (a map red everywhere: not drawn)
    now, later = Checks(TOL, practice=True), Checks(TOL, later=True, practice=True)
    for c in (now, later):
        c.close("output", got, ref)
        c.close("again", got, ref)
    assert isinstance(later.items[0].heatmap, Later)
    assert later.items[0].heatmap.value() == now.items[0].heatmap
    checks = [c.to_dict() for c in later.items]
    tests = [TestRecord(name="test_x[0]", part="ffn", practice=True, outcome="failed",
                        checks=checks)]
    draw_shown(tests, "")
    assert checks[0]["heatmap"] == now.items[0].heatmap  # the first failing check's: drawn
    assert "heatmap" not in checks[1]  # a page draws one a card


def test_equal_tensors_are_recorded_as_the_full_comparison_records_them(monkeypatch):
    """Tensors equal element for element pass at once with 0 as their largest
    difference: the record is the one the full comparison makes of them, field for
    field (infinities, an empty tensor, a 0-dim one, float64 included)."""
    inf = float("inf")
    cases = [torch.randn(3, 7, 48), torch.tensor([1.0, inf, -inf, -0.0]), torch.zeros(0, 4),
             torch.tensor(2.5), torch.randn(5, dtype=torch.float64)]

    def records(practice: bool = True) -> list[dict]:
        c = Checks(TOL, practice=practice)
        for i, ref in enumerate(cases):
            assert c.close(f"c{i}", ref.clone(), ref)
        return [check.to_dict() for check in c.items]

    quick, graded = records(), records(practice=False)
    assert all(r["max_abs_diff"] == 0.0 for r in quick)
    with monkeypatch.context() as m:  # every pair through the full comparison
        m.setattr(torch, "equal", lambda a, b: False)
        assert records() == quick and records(practice=False) == graded


def test_a_nan_or_another_dtype_takes_the_full_comparison():
    """A NaN equals no NaN for torch.equal, and a float64 answer is not a float32
    reference: both are compared by closeness's rule (two NaNs agree; the tolerance is
    the reference's dtype's)."""
    c = Checks(TOL, practice=True)
    ref = torch.tensor([1.0, float("nan")])
    assert c.close("nan", ref.clone(), ref) and c.items[-1].max_abs_diff == 0.0
    assert not c.close("float64", ref.double() + 1e-3, ref)
    assert c.items[-1].got_dtype == "float64" and c.items[-1].where == [0]


def test_a_passed_check_keeps_its_largest_difference():
    """A practice test's largest difference (scores.json's `max_abs_diff`) counts a
    passed check's too; where it is, and how far relative, a pass does not say."""
    c = Checks(TOL, practice=True)
    ref = torch.zeros(2, 3)
    got = ref.clone()
    got[0, 1] = 4e-6
    assert c.close("ok", got, ref)
    check = c.items[-1]
    assert abs(check.max_abs_diff - 4e-6) < 1e-9
    assert check.to_dict().keys() == {"name", "passed", "max_abs_diff", "atol", "rtol",
                                      "got_shape", "ref_shape", "got_dtype", "ref_dtype"}


def test_a_float64_result_off_by_float32_precision_only_is_flagged_as_such():
    """Issue 54: a float32 softmax inside float64 code fails the float64 cases by about
    float32's precision; its check says so (one verdict over the result, graded cases too), and a
    formula mistake's does not."""
    ref = torch.softmax(torch.randn(6, 8, dtype=torch.float64,
                                    generator=torch.Generator().manual_seed(3)), -1)
    rounded = torch.softmax(ref.log().float(), -1).double()
    for practice in (True, False):
        c = Checks(TOL, practice=practice)
        assert not c.close("scores", rounded, ref)
        assert c.items[-1].precision is True and "precision" in c.items[-1].to_dict()
        assert not c.close("scores", ref * 1.01, ref)
        assert c.items[-1].precision is False
    c = Checks(TOL, practice=False)
    c.close("scores", ref.float() * 1.01, ref.float())
    assert c.items[-1].precision is None  # float32: not a precision matter
