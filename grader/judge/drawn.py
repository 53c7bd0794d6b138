"""Which of a student's checks and tests their page draws a picture for: the first
failing check with a heatmap, as `disclosed.check` shows it, in each part's first
OPEN_FAILURES cards, and those cards' first tests. One rule for two stages: the judge
draws only those heatmaps (`runner.draw_shown`) and the page (pages/feedback.py)
places them, so a page rendered again from a stored record draws the same.
"""
from __future__ import annotations

from collections import defaultdict

from grader.judge import disclosed
from grader.record import TestRecord
from grader.text.shown import clean

OPEN_FAILURES = 2        # failing tests shown in full per part; the rest fold away


def error_key(test: TestRecord) -> tuple:
    err = test.error or {}
    return (err.get("kind"), err.get("message"), err.get("traceback"))


def blocked_by(test: TestRecord, problem: str) -> bool:
    problem = clean(problem)
    return bool(problem and not test.passed and test.error
                and clean(test.error.get("message")) == problem)


def cards(failing: list[TestRecord], blocked: list[TestRecord]) -> list[list[TestRecord]]:
    """The part's failing tests (but the blocked) as cards: one per distinct error (a
    stub fails 40 tests alike), one per numeric failure; the first test of each is the
    one shown. Only the first OPEN_FAILURES cards get a picture: a page stays small
    and readable."""
    groups: dict[tuple, list[TestRecord]] = {}
    for test in failing:
        if any(test is b for b in blocked):
            continue
        key = error_key(test) if test.error else ("test", id(test))
        groups.setdefault(key, []).append(test)
    return list(groups.values())


def drawn_heatmap(shown: list[dict]) -> int | None:
    """Which of a card's failing checks (as `disclosed.check` shows them) has its
    heatmap drawn: the first that has one that is not beyond the tolerance in every
    cell (`all_beyond`)."""
    return next((i for i, c in enumerate(shown) if c.get("heatmap") and not all_beyond(c)),
                None)


def all_beyond(check: dict) -> bool:
    """A heatmap red in every cell (each beyond the check's atol, as the picture colours
    it): it adds a page's length and says nothing the counts do not. A heatmap not drawn
    yet (`compare.Later`) is drawn to tell."""
    heat = check.get("heatmap")
    draw = getattr(heat, "value", None)
    grid = draw() if callable(draw) else heat
    if not isinstance(grid, list) or not grid:
        return False
    atol = check.get("atol")
    floor = atol if isinstance(atol, (int, float)) and atol > 0 else 1e-12
    return all(isinstance(row, list) and row and all(v > floor for v in row) for row in grid)


def failing_checks(test: TestRecord) -> list[dict]:
    return [c for c in test.checks if isinstance(c, dict) and not c.get("passed")]


def shown_pictures(tests: list[TestRecord], problem: str) -> tuple[set[int], set[int]]:
    """What a page draws, as id()s: the checks whose heatmap it draws (the first
    failing check with one, in each part's first OPEN_FAILURES cards) and the tests
    whose first picture it draws (those cards' first tests, of practice cases).
    `problem`: the record's."""
    by_part: dict[str, list[TestRecord]] = defaultdict(list)
    for test in tests:
        by_part[test.part].append(test)
    maps: set[int] = set()
    pictured: set[int] = set()
    for mine in by_part.values():
        failing = [x for x in mine if not x.passed]
        blocked = [x for x in failing if blocked_by(x, problem)]
        for group in cards(failing, blocked)[:OPEN_FAILURES]:
            if group[0].practice:  # a graded case's counts are not drawn (`disclosed`)
                pictured.add(id(group[0]))
            checks = failing_checks(group[0])
            drawn = drawn_heatmap([disclosed.check(c, group[0].practice) for c in checks])
            if drawn is not None:
                maps.add(id(checks[drawn]))
    return maps, pictured
