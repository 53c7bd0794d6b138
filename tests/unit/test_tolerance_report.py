"""`grader tolerance`'s text says what a suggested margin is measured from."""
from grader.author.tolerance.advise import Row, Worst
from grader.author.tolerance.report import _block


def row(correct: float, floor: float, suggest: tuple[float, float, float]) -> Row:
    return Row("test_x", "output", "float32", 1e-5, 1e-4, Worst(correct, "v", "c1"),
               mistake=Worst(0.2, "m", "c2"), suggest=suggest, floor=floor)


def test_bit_identical_correct_variants_are_not_called_a_margin_over_zero():
    text = "\n".join(_block(row(0.0, 1.2e-7, (1.2e-7 * 14, 0.0, 14.0))))
    assert "largest correct   0  (every variant gives the reference's bits)" in text
    assert "above the largest correct" not in text
    assert "×14 above 1.2e-07, one ulp at the reference's scale: the correct variants give" \
        in text


def test_differences_within_rtol_are_measured_from_one_ulp_too():
    text = "\n".join(_block(row(2e-7, 3e-16, (3e-16 * 1e7, 1e-5, 1e7))))
    assert "one ulp at the reference's scale: rtol 1e-05 covers every correct difference" \
        in text


def test_a_margin_over_a_real_difference_says_so():
    text = "\n".join(_block(row(1e-6, 1.2e-7, (1e-5, 0.0, 10.0))))
    assert "×10 above the largest correct, ×10 below the smallest mistake" in text
