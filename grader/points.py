"""Points that add up exactly: every export's sum of per-test scores is the total.

Each part's points are split over its graded tests in whole UNITs (1/1024 of a
point), as equally as whole units allow (largest remainder: the first `units % n`
tests get one unit more). A test's score is k·UNIT, a dyadic rational with a small
numerator, so every sum of such scores, in any order and grouping, is exactly a
float64: Python's `sum`, SQLite's `SUM` (nbgrader) or a spreadsheet's all give the
same number, and full marks are exactly the lesson's maximum. Decimal units (0.0001)
could not promise that: 0.1 + 0.2 != 0.3 in binary floating point.

Practice tests (testfile.is_practice) are recorded but worth 0 of 0,
and take no share of their part's points.
"""
from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Protocol

from grader.record import PartRecord, TestRecord



class Worth(Protocol):
    """What `award` reads of a part (a `config.Part`): its points. Config validates
    points with this module's rule (`problem`), so this module does not import it."""

    @property
    def points(self) -> float: ...

UNIT = Fraction(1, 1024)
# Totals stay below 2**53 units, so every partial sum is a float64 integer multiple
# of UNIT and float addition never rounds.
MAX_UNITS = 2 ** 53


def problem(points: float) -> str | None:
    """Why `points` can't be split exactly (with the nearest value that can), or None:
    course.yml's validation says it at load, before anything is graded."""
    exact = Fraction(points) / UNIT
    if exact.denominator == 1 and 0 <= exact < MAX_UNITS:
        return None
    if not 0 <= exact < MAX_UNITS:
        return (f"{points} is not a multiple of 1/{UNIT.denominator} from 0 up to "
                f"{float(MAX_UNITS * UNIT):g}")
    nearest = max(round(exact), 1) * UNIT
    return (f"{points} is not a multiple of 1/{UNIT.denominator}, so its tests' shares "
            f"could not add up to it exactly; the nearest value that is: {float(nearest)!r}")


def units(points: float, where: str) -> int:
    """Points as a whole number of UNITs; refuses points a float sum can't keep exact."""
    why = problem(points)
    if why is not None:
        raise ValueError(f"{where}: {why}")
    return int(Fraction(points) / UNIT)


def shares(total: int, n: int) -> list[int]:
    """`total` units over n tests as equally as whole units allow, summing to `total`."""
    if n == 0:
        return []
    each, extra = divmod(total, n)
    return [each + (i < extra) for i in range(n)]


def as_points(n_units: int) -> float:
    """A unit count as a float, exactly (k·2**-10 with k < 2**53 is a float64)."""
    return float(n_units * UNIT)


def credited(n_units: int, percent: float) -> int:
    """`percent` % of a score in units, rounded once to the nearest unit (half up): the
    one place late credit is rounded, so every export carries the same final score."""
    return int(Fraction(n_units) * Fraction(percent) / 100 + Fraction(1, 2))


def award(parts: Mapping[str, Worth], tests: list[TestRecord]) -> dict[str, PartRecord]:
    """Set each test's `score` and `max_score`; return the parts' scores and counters.

    `tests` are in the report's order. A part's `tests`/`passed` count its graded
    tests. A part with no graded test in this run is worth 0 only when no part has one
    (a run of practice tests alone); otherwise it is a lesson error, not something to
    grade around."""
    graded = {name: [t for t in tests if t.part == name and not t.practice]
              for name in parts}
    empty = sorted(name for name, g in graded.items() if not g)
    if empty and len(empty) < len(parts):
        raise RuntimeError(f"parts without graded tests: {empty} (each part's points "
                           "need at least one hidden test)")
    for t in tests:
        if t.practice:
            t.score = t.max_score = 0.0
    summary = {}
    for name, part in parts.items():
        worth = shares(units(part.points, f"part {name!r}"), len(graded[name]))
        got = [w if t.passed else 0 for t, w in zip(graded[name], worth)]
        for t, w, g in zip(graded[name], worth, got):
            t.score, t.max_score = as_points(g), as_points(w)
        summary[name] = PartRecord(score=as_points(sum(got)), max_score=as_points(sum(worth)),
                                   passed=sum(t.passed for t in graded[name]),
                                   tests=len(graded[name]))
    return summary


def total(summary: Mapping[str, PartRecord], key: str = "score") -> float:
    """The sum of the parts' `key`, exactly (each is a whole number of UNITs)."""
    return as_points(sum(units(getattr(p, key), "a part total") for p in summary.values()))
