"""What of a check a student may see: every surface a student reads (the page, its top
on Gradescope, Gradescope's per-test output, `grader check`) shows a check through here.

A practice case ships with the reference's results for its own inputs, so its check is
shown whole (your value and the expected one, the largest difference, where, a
heatmap). A graded case's check says what its verdict needs and no more: pass or fail,
the check's name, shapes and dtypes, the tolerance and how many values are beyond it.
It names no element and gives no figure of one: not a position, not a map of which
values are beyond the tolerance, not the largest difference or relative error. With an
answer right but for one value (or far off but for one), each of these gives that
value's reference back, and Gradescope's unlimited resubmissions would bisect a graded
case's outputs one by one. Where a student's values go wrong is shown where the inputs
are fresh: the practice cases, the smallest failing example, the line the values first
differ on. `Checks` records none of these for a graded case (compare.py); this filter
holds for a record stored before it did.

Whether a fact may be shown; how it is then written (cleaned, bounded, rounded) is
text/shown.py's."""
from __future__ import annotations

# Fields of a graded check that name an element or give back one's value.
HIDDEN = ("got_value", "ref_value", "max_abs_diff", "max_rel_diff", "where", "heatmap",
          "axes")
# What a structure claim (grader/structure.py) names of single elements or rows, by kind.
POSITIONS: dict[object, tuple[str, ...]] = {"nonfinite": ("where",), "permutation": ("moved",), "rows": ("rows",)}


def claim(found: dict | None) -> dict | None:
    """A structure claim as a graded case keeps it: its kind and counts, not the rows
    or elements it names."""
    if not isinstance(found, dict):
        return found
    named = POSITIONS.get(found.get("kind"), ())
    return {k: v for k, v in found.items() if k not in named}


def check(check: dict, practice: bool) -> dict:
    """A check as a student may see it (a copy; the record is not changed)."""
    if practice:
        return dict(check)
    shown = {k: v for k, v in check.items() if k not in HIDDEN}
    if "structure" in shown:
        shown["structure"] = claim(shown["structure"])
    return shown


def test_difference(practice: bool, max_abs: float | None) -> str:
    """One line on how far a practice test's worst check is off, for plain-text
    outputs; none for a graded test."""
    if practice and max_abs is not None:
        return f"max |difference| from the reference: {max_abs:.3g}"
    return ""
