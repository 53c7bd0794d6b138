"""A heatmap draws a run of alike cells as one rect whose title names its span: every
cell keeps its colour and the value its title shows (what a reader hovers for), and a
map of a few runs is a few rects (a page's maps were 1,480 rects, 132 KB of one page)."""
import math
import re

from grader.pages import charts
from grader.pages.feedback import STRINGS
from grader.text.shown import NON_FINITE, num

RECT = re.compile(r'<rect x="(\d+)" y="(\d+)" width="(\d+)" height="\d+" fill="([^"]+)">'
                  r'<title>\[(\d+), (\d+)(?:–(\d+))?\]\s*([^<]*)</title></rect>')


def cells(svg: str) -> dict[tuple[int, int], tuple[str, str]]:
    """Each cell's (colour, shown value) as the SVG's rects draw them, checking that a
    rect spans exactly the cells its title names."""
    found: dict[tuple[int, int], tuple[str, str]] = {}
    widths = set()
    for x, _, width, fill, i, j0, j1, shown in RECT.findall(svg):
        first, last = int(j0), int(j1 or j0)
        cell = (int(width) + 1) // (last - first + 1)
        widths.add(cell)
        assert int(x) == 4 + first * cell  # drawn where its first cell is
        for j in range(first, last + 1):
            assert (int(i), j) not in found
            found[int(i), j] = (fill, shown)
    assert len(widths) == 1  # every rect is its cells' width, no more, no less
    return found


def test_each_cell_keeps_its_colour_and_value_and_runs_are_one_rect():
    atol = 1e-5
    grid = [[0.0] * 12 + [0.3] * 20,
            [1e-7, 2e-3, 2e-3, 5.0, NON_FINITE, NON_FINITE, 0.0, 0.3] + [0.0] * 24]
    svg = str(charts.heatmap_svg(grid, atol, STRINGS["en"], "tokens", "hidden units"))
    floor, top = atol, 5.0
    span = math.log10(top / floor)
    want = {(i, j): (charts._heat_colour(v, floor, span), num(v))
            for i, row in enumerate(grid) for j, v in enumerate(row)}
    assert cells(svg) == want
    # row 0: two runs; row 1: 1e-7, 2e-3 twice, 5, NaN twice, 0, 0.3, then 0 to the end
    assert len(RECT.findall(svg)) == 2 + 7


def test_a_graded_cases_check_draws_no_map_and_a_practice_cases_does():
    """Issue 52: a yes/no map of a graded case was per element for a small output
    (topk_weight [10, 2]), and resubmissions could bisect its values from it. Only a
    practice case's failing check (the grading path's `Checks`) has a map to draw."""
    import torch

    from grader.judge.compare import Checks
    from grader.config import Tolerance
    from grader.pages.feedback import _check_view
    from grader.judge import disclosed

    tol = {"float32": Tolerance(atol=1e-5, rtol=1e-4)}
    ref = torch.rand(10, 2, generator=torch.Generator().manual_seed(0))
    got = ref.clone()
    got[7, 1] += 0.25
    views = {}
    for practice in (False, True):
        c = Checks(tol, practice=practice)
        assert not c.close("topk_weight", got, ref)
        check = disclosed.check(c.items[-1].to_dict(), practice)
        views[practice] = _check_view(check, STRINGS["en"], "en", picture=True)
    assert views[False]["heatmap_svg"] is None
    drawn = cells(str(views[True]["heatmap_svg"]))
    assert [at for at, (colour, _) in drawn.items() if colour != "#e8ecf1"] == [(7, 1)]
