"""Structure: what a failing comparison's difference looks like, claimed only when true.

Each detector takes the student's and the reference's tensors of one failing check
(float64 arrays, on the trusted side) and the check's tolerance, and names a shape of
the difference: NaN or inf (where first), all zeros, the sign flipped, a constant
factor, a constant shift, the last two axes transposed, the rows (tokens) of the
reference in another order, or only some rows wrong (which, and what they share).
A claim is made only when the reference so transformed matches the student's result
within the same tolerance the check used: a claim is a fact, never a guess.

"Structure" is only this: the shape of a check's difference (a `Claim`). A part
built from other parts is a composite part (pages/explain.py), not a structure."""
from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from grader.judge import contrast
from grader.judge.closeness import near

MIN_FIT = 4        # elements needed before a fitted factor or shift means anything
MAX_DENOMINATOR, MAX_NUMERATOR = 8, 64   # a factor is claimed only as such a fraction
FAR_FROM_1 = 0.1   # ... and only this far from ±1
MAX_ROWS = 1024    # rows compared pairwise when looking for a permutation
SHOWN = 8          # rows named in a claim; the count says how many in all

Claim = dict


def within(got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> bool:
    """`got` matches `want` elementwise as `Checks.close` would (finite values only)."""
    if got.shape != want.shape or not np.isfinite(want).all() or not np.isfinite(got).all():
        return False
    return bool(near(got, want, atol, rtol).all())


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1]) if a.ndim >= 2 else a.reshape(-1, 1)


def _row_ok(got: np.ndarray, ref: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    return np.asarray(near(got, ref, atol, rtol).all(axis=-1))


def nonfinite(got, ref, atol, rtol) -> Claim | None:
    bad = ~np.isfinite(got) & np.isfinite(ref)
    if not bad.any():
        return None
    first = int(np.argmax(bad.reshape(-1)))
    value = got.reshape(-1)[first]
    return {"kind": "nonfinite", "value": "NaN" if np.isnan(value) else "inf",
            "where": [int(i) for i in np.unravel_index(first, got.shape)],
            "count": int(bad.sum()), "total": int(bad.size)}


def zeros(got, ref, atol, rtol) -> Claim | None:
    if within(got, np.zeros_like(ref), atol, rtol) and not within(ref, np.zeros_like(ref),
                                                                   atol, rtol):
        return {"kind": "zeros"}
    return None


def sign(got, ref, atol, rtol) -> Claim | None:
    if within(got, -ref, atol, rtol) and not within(ref, -ref, atol, rtol):
        return {"kind": "sign"}
    return None


def factor(got, ref, atol, rtol) -> Claim | None:
    """A constant factor, claimed only when it is a simple fraction (p/q, q <= 8) far
    from 1: a fitted 0.5136 or 0.99999998 is a coincidence of the inputs (an expert
    computing another's tokens, float32 rounding), not a factor in the code, and
    printing it would give the reference's values back from yours."""
    if ref.size < MIN_FIT:
        return None
    norm = float((ref * ref).sum())
    if norm == 0:
        return None
    c = float((got * ref).sum()) / norm
    if any(within(c * ref, k * ref, atol, rtol) for k in (0.0, 1.0, -1.0)):
        return None  # zeros, the reference or its sign: other claims (or none)
    simple = Fraction(c).limit_denominator(MAX_DENOMINATOR)
    value = float(simple)
    if abs(simple.numerator) > MAX_NUMERATOR or abs(abs(value) - 1) < FAR_FROM_1 \
            or not within(got, value * ref, atol, rtol):
        return None
    return {"kind": "factor", "factor": value}


def _shortest(value: float, holds: Callable[[float], bool]) -> float | None:
    """`value` with the fewest significant digits for which the claim still holds: the
    number the page prints is the one that was checked."""
    for digits in (3, 4, 6, 9, 17):
        shown = float(f"{value:.{digits}g}")
        if holds(shown):
            return shown
    return None


def shift(got, ref, atol, rtol) -> Claim | None:
    if ref.size < MIN_FIT:
        return None
    s = float((got - ref).mean())
    if within(ref + s, ref, atol, rtol):
        return None
    shown = _shortest(s, lambda v: within(got, ref + v, atol, rtol))
    return None if shown is None else {"kind": "shift", "shift": shown}


def transpose(got, ref, atol, rtol) -> Claim | None:
    if ref.ndim < 2:
        return None
    flipped = np.swapaxes(ref, -1, -2)
    if flipped.shape == ref.shape and within(ref, flipped, atol, rtol):
        return None  # symmetric: a transpose changes nothing
    if within(got, flipped, atol, rtol):
        return {"kind": "transpose"}
    return None


def permutation(got, ref, atol, rtol) -> Claim | None:
    """Every row of `got` is a distinct row of `ref`, not all in their own place."""
    g, r = _rows(got), _rows(ref)
    n = r.shape[0]
    if n < 2 or n > MAX_ROWS or not np.isfinite(g).all() or not np.isfinite(r).all():
        return None
    order: list[int] = []
    used: set[int] = set()
    for i in range(n):
        close = np.flatnonzero(_row_ok(g[i][None, :], r, atol, rtol))
        mine = [i] if i in close else []
        j = next((int(j) for j in [*mine, *close] if int(j) not in used), None)
        if j is None:
            return None
        order.append(j)
        used.add(j)
    moved = [[i, j] for i, j in enumerate(order) if i != j]
    if not moved:
        return None
    return {"kind": "permutation", "moved": moved[:SHOWN], "count": len(moved), "total": n}


def some_rows(got, ref, atol, rtol, labels: dict[str, list] | None = None) -> Claim | None:
    """Only some rows differ: which, and (given each row's labels) what they share."""
    g, r = _rows(got), _rows(ref)
    n = r.shape[0]
    if n < 2:
        return None
    ok = _row_ok(g, r, atol, rtol)
    wrong = [int(i) for i in np.flatnonzero(~ok)]
    if not wrong or len(wrong) == n:
        return None
    claim = {"kind": "rows", "rows": wrong[:SHOWN], "count": len(wrong), "total": n}
    cases = [({name: values[i] for name, values in (labels or {}).items()
               if len(values) == n}, not ok[i]) for i in range(n)]
    shared = contrast.rules(cases, members=True)
    if shared:
        claim["shared"] = [rule.to_dict() for rule in shared]
    return claim


DETECTORS: list[Callable[..., Claim | None]] = [nonfinite, zeros, sign, factor, shift,
                                                transpose, permutation]


def describe(got: np.ndarray, ref: np.ndarray, atol: float, rtol: float,
             labels: dict[str, list] | None = None) -> Claim | None:
    """The first claim that holds for a failing check, or None (say nothing)."""
    if got.shape != ref.shape:
        return transpose(got, ref, atol, rtol) if got.ndim >= 2 else None
    if not np.isfinite(ref).all():
        return None  # the reference's own NaN/inf: no detector speaks about it
    for detect in DETECTORS:
        claim = detect(got, ref, atol, rtol)
        if claim is not None:
            return claim
    return some_rows(got, ref, atol, rtol, labels)
