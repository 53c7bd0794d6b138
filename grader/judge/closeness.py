"""The one elementwise rule for "close": each element's error, the error it is allowed,
and its error relative to the reference. Checks (compare.py), the structure sentences
(structure.py) and the tolerance advisor read it here.

A value that is not a number is matched only by itself: where the reference is inf,
-inf or NaN, the allowance is 0 and only the same value (an inf of the same sign, a
NaN) has error 0. Before, an inf reference allowed atol + rtol·inf = inf, so any
finite answer passed there.
"""
from __future__ import annotations

import numpy as np


def abs_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| per element. Equal values, equal infinities included, and two NaNs
    agree (0); any other pair with a NaN or an infinity is an infinite error."""
    with np.errstate(invalid="ignore"):
        err = np.asarray(np.abs(got - ref), dtype=np.float64)  # an array even for 0-dim
    if not np.isfinite(err).all():
        err[np.asarray((got == ref) | (np.isnan(got) & np.isnan(ref)))] = 0.0
        err[np.isnan(err)] = np.inf
    return err


def allowance(ref: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """The error each element may have: atol + rtol·|ref| where the reference is finite,
    0 where it is not (so only the same non-finite value passes there)."""
    r = np.abs(np.asarray(ref, dtype=np.float64))
    finite = np.isfinite(r)
    return np.where(finite, atol + rtol * np.where(finite, r, 0.0), 0.0)


def near(got: np.ndarray, ref: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Per element: is `got` close to `ref` by this rule?"""
    return abs_error(got, ref) <= allowance(ref, atol, rtol)


def rel_error(err: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """`err` relative to |ref|; a zero or NaN reference counts as 1e-30 (a huge finite
    ratio, not a division by zero; 0 where both are NaN). An infinite error is
    infinitely wrong, an infinite reference's too."""
    with np.errstate(invalid="ignore"):
        rel = np.asarray(err / np.fmax(np.abs(ref), 1e-30))
    rel[np.isnan(rel)] = np.inf
    return rel
