"""The SVG pictures on the pages: a check's error heatmap, counts side by side, bar
charts and the class's score histogram. Every label is untrusted text, cleaned and
escaped here; the SVG is then marked safe for the templates."""
from __future__ import annotations

import itertools
import math

from markupsafe import Markup, escape

from grader.text.shown import NON_FINITE, clean, num

HIST_BINS = 10
HEAT_MIN_W = 420         # room for the heatmap's legend under a narrow grid
CHART_W = 880


def heatmap_svg(grid: list[list[float]], atol: float | None, t: dict[str, str],
                rows_axis: str, cols_axis: str) -> Markup:
    """A practice case's error over the leading dims (flattened) x the last dim as an
    SVG grid (log colour above tolerance), its axes named `rows_axis` and `cols_axis`."""
    rows, cols = len(grid), max((len(r) for r in grid), default=0)
    if not rows or not cols:
        return Markup("")
    cell = max(12, min(28, 448 // cols, 240 // rows))
    left, top = 4, 18
    floor = atol if atol and atol > 0 else 1e-12
    finite = [v for r in grid for v in r if v < NON_FINITE]
    top_err = max(finite, default=floor)
    span = math.log10(top_err / floor) if top_err > floor else 1.0
    base = top + rows * cell
    caption = t["heatmap_caption"].format(rows=rows_axis, cols=cols_axis)
    w, h = max(left + cols * cell, HEAT_MIN_W) + 4, base + 40
    out = [f'<svg class="heat" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" role="img" aria-label="{escape(caption)}">',
           f'<text x="{left}" y="12" class="ax">↓ {escape(clean(rows_axis, 60))}</text>']
    for i, row in enumerate(grid):
        # a run of cells alike (colour, and the value a title shows) is one rect whose
        # title names its span: a page's maps drew 1,480 rects, 132 KB of grace's page
        cells = [(_heat_colour(v, floor, span), num(v)) for v in row]
        for (colour, shown), run in itertools.groupby(enumerate(cells), key=lambda c: c[1]):
            js = [j for j, _ in run]
            at = f"[{i}, {js[0]}]" if len(js) == 1 else f"[{i}, {js[0]}–{js[-1]}]"
            title = f"{at} {shown}".rstrip()
            out.append(f'<rect x="{left + js[0] * cell}" y="{top + i * cell}" '
                       f'width="{len(js) * cell - 1}" height="{cell - 1}" fill="{colour}">'
                       f'<title>{escape(title)}</title></rect>')
    out.append(f'<text x="{left}" y="{base + 12}" class="ax">{escape(clean(cols_axis, 60))} →'
               '</text>')
    has_nan = any(v >= NON_FINITE for r in grid for v in r)
    out.append(_heat_legend(left, base + 24, floor, top_err, has_nan, t))
    out.append("</svg>")
    return Markup("".join(out))


def _heat_colour(v: float, floor: float, span: float) -> str:
    if v >= NON_FINITE:
        return "#1a1a1a"
    if v <= floor:
        return "#e8ecf1"
    frac = min(1.0, max(0.0, math.log10(v / floor) / span))
    light, dark = (253, 212, 158), (165, 15, 21)
    r, g, b = (round(a + (c - a) * frac) for a, c in zip(light, dark, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def _heat_legend(x: int, y: int, floor: float, top_err: float, has_nan: bool,
                 t: dict[str, str]) -> str:
    """Swatches: within tolerance, just beyond, the largest error (and NaN/inf if any)."""
    items = [("#e8ecf1", f"≤ {num(floor)} ({t['within_tol']})"),
             ("#fdd49e", f"> {num(floor)}"), ("#a50f15", num(top_err))] \
        + ([("#1a1a1a", t["nan"])] if has_nan else [])
    parts, cx = [], x
    for colour, label in items:
        parts.append(f'<rect x="{cx}" y="{y}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{cx + 14}" y="{y + 9}" class="lg">{escape(label)}</text>')
        cx += 24 + _text_width(label)
    return "".join(parts)


def _text_width(text: str, size: float = 10) -> int:
    """Rough SVG text width: CJK glyphs are about twice as wide as Latin ones."""
    return round(sum(size if ord(c) >= 0x2E80 else size * 0.58 for c in text))


def pair_bars_svg(picture: dict, t: dict[str, str]) -> Markup:
    """A practice case's counts side by side, yours against the reference's (e.g.
    tokens per expert)."""
    labels = [clean(x, 24) for x in picture.get("labels", [])][:16]
    got, ref = picture.get("got", []), picture.get("ref", [])
    top = max([*got, *ref, 1.0])
    label_w, row, bar_w = 90, 30, 220
    h = row * len(labels) + 26
    out = [_bars_head(picture, label_w + bar_w + 60, h, t,
                      f'<tspan fill="#c0392b">■</tspan> {escape(t["got"])} '
                      f'<tspan fill="#3b6ea8">■</tspan> {escape(t["ref"])}')]
    for i, label in enumerate(labels):
        y = 20 + i * row
        for j, (values, colour) in enumerate(((got, "#c0392b"), (ref, "#3b6ea8"))):
            v = float(values[i]) if i < len(values) else 0.0
            out.append(f'<rect x="{label_w}" y="{y + j * 12}" width="{v / top * bar_w:.1f}" '
                       f'height="10" fill="{colour}"/><text x="{label_w + v / top * bar_w + 4:.1f}"'
                       f' y="{y + j * 12 + 9}" class="lb">{escape(num(v))}</text>')
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" class="lb" text-anchor="end">'
                   f'{escape(label)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


# ---------------------------------------------------------------- class report


def bar_chart_svg(bars: list[tuple[str, float]], maximum: float, unit: str = "",
                  width: int = CHART_W) -> Markup:
    """Horizontal bars with labels: one row per item, value printed at the bar's end."""
    label_w, row, bar_w = 220, 22, width - 220 - 70
    h = row * len(bars) + 6
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{h}" viewBox="0 0 {width} {h}" role="img">']
    for i, (label, value) in enumerate(bars):
        y = 3 + i * row
        length = 0 if maximum <= 0 else max(0.0, min(1.0, value / maximum)) * bar_w
        out.append(f'<text x="{label_w - 6}" y="{y + 14}" class="lb" text-anchor="end">'
                   f'{escape(clean(label, 32))}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="15" fill="#eef1f5"/>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{length:.1f}" height="15" '
                   f'fill="#3b6ea8"/><text x="{label_w + bar_w + 6}" y="{y + 14}" class="lb">'
                   f'{escape(num(round(value, 3)))}{escape(unit)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def histogram_svg(scores: list[float], max_score: float, bins: int = HIST_BINS) -> Markup:
    """Score distribution: counts per equal-width bin over [0, max_score]."""
    counts = [0] * bins
    for s in scores:
        i = bins - 1 if max_score <= 0 else min(bins - 1, int(s / max_score * bins))
        counts[max(0, i)] += 1
    width, height, left, bottom, top = CHART_W, 200, 30, 30, 16
    col = (width - left - 10) / bins
    peak = max(counts, default=0) or 1
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img">',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" '
           f'y2="{height - bottom}" stroke="#8895a7"/>']
    plot_h = height - bottom - top
    for i, c in enumerate(counts):
        bh = c / peak * plot_h
        x = left + i * col
        lo = max_score * i / bins
        out.append(f'<rect x="{x + 2:.1f}" y="{height - bottom - bh:.1f}" width="{col - 4:.1f}" '
                   f'height="{bh:.1f}" fill="#3b6ea8"><title>{escape(num(lo))}–'
                   f'{escape(num(max_score * (i + 1) / bins))}: {c}</title></rect>')
        if c:
            out.append(f'<text x="{x + col / 2:.1f}" y="{height - bottom - bh - 3:.1f}" '
                       f'class="lb" text-anchor="middle">{c}</text>')
        out.append(f'<text x="{x:.1f}" y="{height - bottom + 14}" class="lb" '
                   f'text-anchor="middle">{escape(num(round(lo, 2)))}</text>')
    out.append(f'<text x="{width - 10}" y="{height - bottom + 14}" class="lb" '
               f'text-anchor="end">{escape(num(max_score))}</text></svg>')
    return Markup("".join(out))


def _bars_head(picture: dict, width: int, height: int, t: dict[str, str], legend: str) -> str:
    """A bar chart's opening tag and title line: its name, then `legend` (escaped
    already), as the counts chart draws them."""
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}"'
            f' height="{height}" role="img"><text x="0" y="12" class="lb">'
            f'{escape(clean(picture.get("name", ""), 60))}{escape(t["colon"])}{legend}</text>')
