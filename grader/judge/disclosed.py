"""What of a check a student may see: every surface a student reads (the page, its top
on Gradescope, Gradescope's per-test output, `grader check`) shows a check through here.

A practice case ships with the reference's results for its own inputs, so its check is
shown whole (your value and the expected one, the largest difference). A graded case's
check never shows a number of the reference's output, nor one it can be read back
from: a "yours / expected" pair, the largest absolute difference (for an answer of
zeros, the reference's own magnitude) and a heatmap's error values would let a
resubmission answer from a table. Instead it says how far off and where: how many
elements are beyond the tolerance, the largest relative error as a decade (an answer
of zeros is off by exactly 1 whatever the reference), the worst element's position,
shapes and dtypes. The record itself keeps every number, for the TAs.
"""
from __future__ import annotations

import math

# Fields of a graded check that hold, or give back, the reference's values.
HIDDEN = ("got_value", "ref_value", "max_abs_diff", "max_rel_diff")
FLOOR, CEILING = -6, 3   # decades named; beyond them "below 1e-6" and "1e3 or more"


def decade(rel: float | None) -> int | None:
    """The decade of a relative error, clamped: k for 10^k <= rel < 10^(k+1)."""
    if rel is None or not math.isfinite(rel):
        return None if rel is None or math.isnan(rel) else CEILING
    if rel <= 0:
        return FLOOR - 1
    return max(FLOOR - 1, min(CEILING, math.floor(math.log10(rel))))


def band_text(k: int | None) -> str:
    """A decade as the pages print it: `1e-3 – 1e-2` (language-neutral notation)."""
    if k is None:
        return "—"
    if k < FLOOR:
        return f"< 1e{FLOOR}"
    if k >= CEILING:
        return f"≥ 1e{CEILING}"
    return f"1e{k} – 1e{k + 1}"


def check(check: dict, practice: bool) -> dict:
    """A check as a student may see it (a copy; the record is not changed)."""
    if practice:
        return dict(check)
    shown = {k: v for k, v in check.items() if k not in HIDDEN}
    if check.get("max_rel_diff") is not None:
        shown["rel_band"] = band_text(decade(check["max_rel_diff"]))
    elif check.get("max_abs_diff") is not None and not check.get("passed"):
        shown["rel_band"] = band_text(CEILING)  # non-finite somewhere: beyond any decade
    heat, floor = shown.get("heatmap"), check.get("atol") or 0.0
    if isinstance(heat, list) and heat:  # beyond the tolerance or not: no magnitudes
        shown["heatmap"] = [[1.0 if not isinstance(v, (int, float)) or v > floor else 0.0
                             for v in row] for row in heat if isinstance(row, list)]
        shown["heatmap_binary"] = True
    return shown


def picture(picture: dict, practice: bool) -> dict:
    """Counts side by side (e.g. tokens per expert). A graded case's reference counts
    are the reference's routing: only yours are drawn, with the labels where they
    differ marked."""
    if practice:
        return dict(picture)
    got, ref = list(picture.get("got") or []), list(picture.get("ref") or [])
    return {"name": picture.get("name", ""), "labels": list(picture.get("labels") or []),
            "got": got, "differs": [i < len(ref) and g != ref[i] for i, g in enumerate(got)]}


def test_difference(test_max_rel: float | None, practice: bool,
                    max_abs: float | None) -> str:
    """One line on how far a test's worst check is off, for plain-text outputs."""
    if practice and max_abs is not None:
        return f"max |difference| from the reference: {max_abs:.3g}"
    if test_max_rel is not None:
        return f"largest relative error: {band_text(decade(test_max_rel))}"
    return ""


def max_rel(checks: list) -> float | None:
    """The largest relative error among a test's failing checks."""
    values = [c["max_rel_diff"] for c in checks if isinstance(c, dict) and not c.get("passed")
              and c.get("max_rel_diff") is not None]
    return max(values) if values else None
