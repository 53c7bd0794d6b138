"""Structure detectors: each speaks when its shape of difference holds to the
tolerance, and stays silent on a near miss, on noise, and where another shape fits."""
import numpy as np
import pytest

from grader.judge import structure

ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture
def ref() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(6, 8))


def _noise(a: np.ndarray, scale: float, seed: int = 1) -> np.ndarray:
    return a + np.random.default_rng(seed).normal(scale=scale, size=a.shape)


def test_nan_and_inf_are_named_where_they_first_are(ref):
    got = ref.copy()
    got[2, 5] = np.nan
    got[4, 0] = np.inf
    claim = structure.describe(got, ref, ATOL, RTOL)
    assert claim == {"kind": "nonfinite", "value": "NaN", "where": [2, 5], "count": 2,
                     "total": 48}
    assert structure.nonfinite(ref, ref, ATOL, RTOL) is None


def test_zeros(ref):
    assert structure.describe(np.zeros_like(ref), ref, ATOL, RTOL) == {"kind": "zeros"}
    assert structure.zeros(np.full_like(ref, 1e-3), ref, ATOL, RTOL) is None


def test_sign(ref):
    assert structure.describe(-ref, ref, ATOL, RTOL) == {"kind": "sign"}
    assert structure.sign(-ref * 1.01, ref, ATOL, RTOL) is None


def test_a_constant_factor_is_named_and_a_varying_one_is_not(ref):
    assert structure.describe(ref * 0.5, ref, ATOL, RTOL) == {"kind": "factor", "factor": 0.5}
    assert structure.describe(_noise(ref, 1e-7) * 3, ref, ATOL, RTOL)["factor"] == 3.0
    rows = ref * np.arange(1, 7)[:, None]  # a factor per row: not a constant one
    assert structure.factor(rows, ref, ATOL, RTOL) is None
    assert structure.factor(ref[:1, :2] * 2, ref[:1, :2], ATOL, RTOL) is None  # too few


def test_a_constant_shift(ref):
    assert structure.describe(ref + 0.25, ref, ATOL, RTOL) == {"kind": "shift", "shift": 0.25}
    assert structure.shift(_noise(ref, 0.1) + 0.25, ref, ATOL, RTOL) is None
    assert structure.shift(ref + 1e-9, ref, ATOL, RTOL) is None  # within tolerance: none


def test_transpose_same_shape_and_other_shape():
    square = np.random.default_rng(2).normal(size=(2, 5, 5))
    assert structure.describe(np.swapaxes(square, -1, -2), square, ATOL, RTOL) == {
        "kind": "transpose"}
    wide = np.random.default_rng(3).normal(size=(4, 7))
    assert structure.describe(wide.T.copy(), wide, ATOL, RTOL) == {"kind": "transpose"}
    sym = square + np.swapaxes(square, -1, -2)  # a symmetric reference: nothing to say
    assert structure.transpose(sym * 2, sym, ATOL, RTOL) is None
    assert structure.describe(wide.T[:, :3].copy(), wide, ATOL, RTOL) is None


def test_rows_in_another_order(ref):
    got = ref[[0, 2, 1, 3, 5, 4]]
    claim = structure.describe(got, ref, ATOL, RTOL)
    assert claim == {"kind": "permutation", "moved": [[1, 2], [2, 1], [4, 5], [5, 4]],
                     "count": 4, "total": 6}
    got[3] += 1.0  # one row is no row of the reference: no permutation
    assert structure.permutation(got, ref, ATOL, RTOL) is None
    assert structure.permutation(ref.copy(), ref, ATOL, RTOL) is None


def test_only_some_rows_wrong_and_what_they_share(ref):
    got = ref.copy()
    got[[1, 4]] += 0.3 * np.random.default_rng(4).normal(size=(2, 8))
    experts = [[0, 2], [3, 1], [0, 1], [2, 0], [3, 2], [1, 2]]
    claim = structure.describe(got, ref, ATOL, RTOL, {"expert": experts})
    assert claim["kind"] == "rows" and claim["rows"] == [1, 4] and claim["count"] == 2
    assert claim["shared"] == [{"field": "expert", "op": "has", "value": 3}]
    no_pattern = [[0, 2], [1, 0], [3, 1], [2, 0], [1, 2], [3, 2]]
    assert "shared" not in structure.describe(got, ref, ATOL, RTOL, {"expert": no_pattern})
    assert structure.some_rows(_noise(ref, 0.1), ref, ATOL, RTOL) is None  # every row


def test_silent_on_noise_and_on_a_reference_with_nan(ref):
    assert structure.describe(_noise(ref, 0.05), ref, ATOL, RTOL) is None
    bad = ref.copy()
    bad[0, 0] = np.nan
    assert structure.describe(ref * 2, bad, ATOL, RTOL) is None


def test_a_scalar_gets_only_the_claims_one_number_can_support():
    one, ref = np.array(0.2), np.array(0.1)
    assert structure.describe(one, ref, ATOL, RTOL) is None  # "2x" would be a fit
    assert structure.describe(-ref, ref, ATOL, RTOL) == {"kind": "sign"}
