"""HTML feedback: one page per student, and a class report for the TAs.

Everything a student wrote (ids, messages, tracebacks, printed output) is untrusted:
Jinja2 autoescapes it, `clean` strips control and bidi characters and caps its size,
and the pages carry a CSP that forbids scripts and remote loads, so they work
offline and nothing a student prints can run. Plots are inline SVG built here.
"""
from __future__ import annotations

import ast
import math
import re
import statistics
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

import grader
from grader import explain
from grader.config import Course
from grader.record import GRADED, GradeRecord, PartRecord, TestRecord
from grader.store import Store

TEMPLATES = Path(grader.__file__).parent.parent / "templates"
TEXT_LIMIT = 20_000      # characters of one untrusted text shown on a page
SLOWEST = 10             # submissions listed as slowest in the class report
OPEN_FAILURES = 2        # failing tests shown in full per part; the rest fold away
HIST_BINS = 10
INF_MARK = 1e29          # compare.py writes 1e30 for NaN/inf cells of a heatmap
HEAT_MIN_W = 420         # room for the heatmap's legend under a narrow grid
CHART_W = 880

# How a probe or the student's own code reports a function the file lacks.
_MISSING = re.compile(r"module '[\w.]+' has no attribute '(\w+)'|name '(\w+)' is not defined")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")

def _load_strings(path: Path) -> dict[str, dict[str, str]]:
    """templates/i18n.yml (key -> {en, zh}) turned into language -> key -> text."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    languages = {lang for entry in data.values() for lang in entry}
    missing = [f"{k}.{lang}" for k, entry in data.items()
               for lang in languages if lang not in entry]
    if missing:
        raise ValueError(f"{path}: missing translations: {', '.join(missing)}")
    return {lang: {k: entry[lang] for k, entry in data.items()} for lang in sorted(languages)}


STRINGS = _load_strings(TEMPLATES / "i18n.yml")


def clean(value: object, limit: int = TEXT_LIMIT) -> str:
    """Untrusted text made safe to show: no control/bidi characters, bounded size."""
    text = _UNSAFE.sub("", _ANSI.sub("", "" if value is None else str(value)))
    if len(text) > limit:
        cut = len(text) - limit
        text = text[:limit] + ("…" if limit < 1000 else f"\n… [{cut} more characters cut]")
    return text


def num(value: object) -> str:
    """A measured number, short but exact enough to compare with the tolerance."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return clean(value, 200)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value) or abs(value) >= INF_MARK:
        return "inf" if not math.isnan(value) else "nan"
    return f"{value:.6g}" if value == 0 or 1e-3 <= abs(value) < 1e5 else f"{value:.4g}"


def points(value: object) -> str:
    """Points as a student reads them: at most two decimals (scores.json and the
    exports keep the exact value, a whole number of 1/1024 points)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return num(value)
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _local(value: object, language: str) -> str:
    """A diagnosis title or hint: a {en, zh} dict, or one string for all languages."""
    if isinstance(value, dict):
        return clean(value.get(language) or value.get("en") or next(iter(value.values()), ""))
    return clean(value or "")


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(clean=clean, num=num, points=points)
    return env


def _language(course: Course, language: str | None) -> str:
    lang = language or course.language
    if lang not in STRINGS:
        raise ValueError(f"no feedback strings for language {lang!r} (have: {', '.join(STRINGS)})")
    return lang


def _part_titles(course: Course, lesson_key: str, lang: str) -> dict[str, str]:
    parts = course.lesson(lesson_key).parts
    return {k: (p.title_zh if lang == "zh" and p.title_zh else p.title) or k
            for k, p in parts.items()}


def _lesson_title(course: Course, lesson_key: str, lang: str) -> str:
    lesson = course.lesson(lesson_key)
    return lesson.title_zh if lang == "zh" and lesson.title_zh else lesson.title


# ---------------------------------------------------------------- student page

def heatmap_svg(grid: list[list[float]], atol: float | None, t: dict[str, str]) -> Markup:
    """The error over tokens x hidden units as an SVG grid (log colour above tolerance)."""
    rows, cols = len(grid), max((len(r) for r in grid), default=0)
    if not rows or not cols:
        return Markup("")
    cell = max(12, min(28, 448 // cols, 240 // rows))
    left, top = 4, 18
    floor = atol if atol and atol > 0 else 1e-12
    finite = [v for r in grid for v in r if v < INF_MARK]
    top_err = max(finite, default=floor)
    span = math.log10(top_err / floor) if top_err > floor else 1.0
    base = top + rows * cell
    w, h = max(left + cols * cell, HEAT_MIN_W) + 4, base + 40
    out = [f'<svg class="heat" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" role="img" aria-label="{escape(t["heatmap_caption"])}">',
           f'<text x="{left}" y="12" class="ax">↓ {escape(t["rows"])}</text>']
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            out.append(f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 1}" '
                       f'height="{cell - 1}" fill="{_heat_colour(v, floor, span)}">'
                       f'<title>[{i}, {j}] {escape(num(v))}</title></rect>')
    out.append(f'<text x="{left}" y="{base + 12}" class="ax">{escape(t["cols"])} →</text>')
    has_nan = any(v >= INF_MARK for r in grid for v in r)
    out.append(_heat_legend(left, base + 24, floor, top_err, has_nan, t))
    out.append("</svg>")
    return Markup("".join(out))


def _heat_colour(v: float, floor: float, span: float) -> str:
    if v >= INF_MARK:
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
    items = [("#e8ecf1", f"≤ {num(floor)} ({t['within_tol']})"), ("#fdd49e", f"> {num(floor)}"),
             ("#a50f15", num(top_err))] + ([("#1a1a1a", t["nan"])] if has_nan else [])
    parts, cx = [], x
    for colour, label in items:
        parts.append(f'<rect x="{cx}" y="{y}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{cx + 14}" y="{y + 9}" class="lg">{escape(label)}</text>')
        cx += 24 + _text_width(label)
    return "".join(parts)


def _text_width(text: str, size: float = 10) -> int:
    """Rough SVG text width: CJK glyphs are about twice as wide as Latin ones."""
    return round(sum(size if ord(c) >= 0x2E80 else size * 0.58 for c in text))


def _error_key(test: TestRecord) -> tuple:
    err = test.error or {}
    return (err.get("kind"), err.get("message"), err.get("traceback"))


def _part_view(part: str, title: str, summary: PartRecord | None, tests: list[TestRecord],
               record: GradeRecord, lang: str, t: dict[str, str], stub: Stub | None = None,
               failed_before: list[str] | None = None) -> dict:
    """One part: its score, what its results show, failing tests grouped by identical
    error, and diagnoses. `failed_before`: the earlier parts that failed.

    Tests that failed for the record's own problem (no file, import error) are only
    counted: the banner at the top already says why.
    """
    failing = [x for x in tests if not x.passed]
    problem = clean(record.problem)
    blocked = [x for x in failing if problem and x.error
               and clean(x.error.get("message")) == problem]
    cards = _group_failures([x for x in failing if not any(x is b for b in blocked)], t,
                            pictures=OPEN_FAILURES)
    return {"key": part, "title": title, "score": summary.score if summary else 0.0,
            "max_score": summary.max_score if summary else 0.0,
            "passed": summary.passed if summary else len(tests) - len(failing),
            "tests": summary.tests if summary else len(tests),
            "groups": cards[:OPEN_FAILURES], "folded": cards[OPEN_FAILURES:],
            "folded_tests": sum(1 + len(g["same"]) for g in cards[OPEN_FAILURES:]),
            "blocked": len(blocked),
            "passing": [x.name for x in tests if x.passed],
            "diagnoses": _part_diagnoses(failing, lang),
            "findings": [x for x in [explain.composite_sentence(tests, failed_before or [], t),
                                     *explain.contrast_sentences(tests, t),
                                     *explain.structure_at_top(failing, t)] if x],
            "missing": missing_from_stub(failing, stub)}


class Stub:
    """The lesson's stub (`exercises/<lesson>.py`) as students are pointed to it: the
    grader's stub may define functions the course's own skeleton lacks (helpers each
    part is graded through), and a student who started from that skeleton should be
    told where they are, not only that they are missing."""

    def __init__(self, shown_as: str, path: Path):
        self.shown_as = shown_as
        self.lines = _top_level(path)


def _top_level(path: Path) -> dict[str, int]:
    """Top-level functions and classes of a file, with their line numbers (read each
    time: a stub edited between two runs of a warm worker must not point to old lines;
    parsing it is a millisecond a page)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    return {node.name: node.lineno for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def missing_from_stub(failing: list[TestRecord], stub: Stub | None) -> list[dict]:
    """What the failing tests found missing that the stub defines, and where it is."""
    if stub is None:
        return []
    names: dict[str, None] = {}
    for test in failing:
        message = str((test.error or {}).get("message") or "")
        for found in _MISSING.finditer(message):
            names[found.group(1) or found.group(2)] = None
    return [{"name": n, "file": stub.shown_as, "line": stub.lines[n]}
            for n in names if n in stub.lines]


def lesson_stub(course: Course, lesson_key: str) -> Stub:
    lesson = course.lesson(lesson_key)
    return Stub(str(lesson.stub), course.path(lesson.stub))


def _group_failures(failing: list[TestRecord], t: dict[str, str], pictures: int) -> list[dict]:
    """One card per distinct error (a stub fails 40 tests alike), one per numeric failure.
    Only the first `pictures` cards get a heatmap: a page stays small and readable."""
    groups: dict[tuple, dict] = {}
    for test in failing:
        key = _error_key(test) if test.error else ("test", id(test))
        if key in groups:
            groups[key]["same"].append(test.name)
        else:
            groups[key] = {"test": _test_view(test, t, len(groups) < pictures), "same": []}
    return list(groups.values())


def _part_diagnoses(failing: list[TestRecord], lang: str) -> list[dict]:
    """Distinct diagnoses of a part's failing tests, most frequent first."""
    seen: dict[object, dict] = {}
    for test in failing:
        d = test.diagnosis
        if d is None:
            continue
        entry = seen.setdefault(d.id, {"id": d.id, "count": 0,
                                       "title": _local(d.title, lang),
                                       "hint": _local(d.hint, lang)})
        entry["count"] += 1
    return sorted(seen.values(), key=lambda e: (e["id"] is None, -e["count"]))


def _test_view(test: TestRecord, t: dict[str, str], picture: bool) -> dict:
    """A failing test's checks; at most its first heatmap is drawn."""
    checks = [c for c in test.checks if isinstance(c, dict)]
    failing = [c for c in checks if not c.get("passed")]
    first_map = next((i for i, c in enumerate(failing) if c.get("heatmap")), None)
    return {"name": test.name, "message": test.message, "error": test.error,
            "checks": [_check_view(c, t, picture and i == first_map)
                       for i, c in enumerate(failing)],
            "pictures": [pair_bars_svg(p, t) for p in test.pictures
                         if isinstance(p, dict)][:1] if picture else [],
            "passed_checks": len(checks) - len(failing)}


def _check_view(check: dict, t: dict[str, str], picture: bool) -> dict:
    heat = check.get("heatmap") if picture else None
    svg = heatmap_svg(heat, check.get("atol"), t) if isinstance(heat, list) and heat else None
    claim = check.get("structure")
    return {**check, "heatmap_svg": svg,
            "structure_text": explain.structure_text(claim, t) if isinstance(claim, dict)
            else "",
            "tolerance": (f"{num(check['atol'])} + {num(check.get('rtol') or 0.0)}·|ref|"
                          if check.get("atol") is not None else None)}


def student_context(record: GradeRecord, course: Course, lesson_key: str, lang: str) -> dict:
    """Everything the student template shows, with raw_report left out on purpose."""
    t = STRINGS[lang]
    titles = _part_titles(course, lesson_key, lang)
    by_part: dict[str, list[TestRecord]] = defaultdict(list)
    for test in record.tests:
        by_part[test.part].append(test)
    summaries = record.parts
    order = list(titles) + [p for p in summaries if p not in titles]
    stub = lesson_stub(course, lesson_key)
    parts = [_part_view(p, titles.get(p, p), summaries.get(p), by_part.get(p, []),
                        record, lang, t, stub,
                        [q for q in order[:i] if any(not x.passed for x in by_part.get(q, []))])
             for i, p in enumerate(order)]
    return {"t": t, "lang": lang, "course_title": course.title,
            "lesson_key": lesson_key, "lesson_title": _lesson_title(course, lesson_key, lang),
            "student_id": record.student_id, "status": record.status,
            "problem": record.problem, "sandboxed": record.sandboxed,
            "import_traceback": record.import_traceback,
            "output": record.output, "score": record.score,
            "max_score": record.max_score, "parts": parts}


def render_student(record: GradeRecord, course: Course, lesson_key: str,
                   language: str | None = None) -> str:
    """One student's HTML page; `language` overrides course.yml's."""
    lang = _language(course, language)
    return _env().get_template("feedback.html.j2").render(
        **student_context(record, course, lesson_key, lang))


def pair_bars_svg(picture: dict, t: dict[str, str]) -> Markup:
    """Counts side by side, yours against the reference's (e.g. tokens per expert)."""
    labels = [clean(x, 24) for x in picture.get("labels", [])][:16]
    got, ref = picture.get("got", []), picture.get("ref", [])
    top = max([*got, *ref, 1.0])
    label_w, row, bar_w = 90, 30, 220
    h = row * len(labels) + 26
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 60}"'
           f' height="{h}" role="img"><text x="0" y="12" class="lb">'
           f'{escape(clean(picture.get("name", ""), 60))}: '
           f'<tspan fill="#c0392b">■</tspan> {escape(t["got"])} '
           f'<tspan fill="#3b6ea8">■</tspan> {escape(t["ref"])}</text>']
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


def _test_rates(records: list[GradeRecord]) -> list[dict]:
    """Pass rate per test, in part then name order, over students who have that test."""
    rates: dict[tuple[str, str], list[int]] = {}
    for r in records:
        for test in r.tests:
            key = (test.part, test.name)
            rates.setdefault(key, [0, 0])
            rates[key][0] += test.passed
            rates[key][1] += 1
    return [{"part": p, "name": n, "passed": ok, "total": tot, "rate": ok / tot if tot else 0.0}
            for (p, n), (ok, tot) in sorted(rates.items())]


def _mistake_counts(records: list[GradeRecord], lang: str) -> tuple[list[dict], Counter]:
    """Diagnosed mistakes counted once per student, and unmatched failures per part."""
    found: dict[str, dict] = {}
    unmatched: Counter = Counter()
    for r in records:
        ids, blank_parts = set(), set()
        for test in r.tests:
            d = test.diagnosis
            if d is None:
                continue
            if d.id is None:
                blank_parts.add(test.part)
                continue
            entry = found.setdefault(d.id, {"id": d.id, "part": test.part,
                                            "title": _local(d.title, lang),
                                            "students": []})
            if d.id not in ids:
                ids.add(d.id)
                entry["students"].append(r.student_id)
        unmatched.update(blank_parts)
    ranked = sorted(found.values(), key=lambda e: (-len(e["students"]), e["id"]))
    return ranked, unmatched


def _error_kinds(records: list[GradeRecord]) -> list[tuple[str, int]]:
    """How many students hit each kind of test error (not_implemented, timeout, …)."""
    kinds: Counter = Counter()
    for r in records:
        kinds.update({t.error.get("kind") for t in r.tests if t.error})
    return kinds.most_common()


def report_context(records: list[GradeRecord], course: Course, lesson_key: str, lang: str) -> dict:
    """Class-wide numbers and plots for the TA report."""
    t = STRINGS[lang]
    lesson = course.lesson(lesson_key)
    titles = _part_titles(course, lesson_key, lang)
    scores = [r.score for r in records]
    max_score = lesson.max_score
    n = len(records)
    part_rows = []
    for key, part in lesson.parts.items():
        got = [r.parts[key].score if key in r.parts else 0.0 for r in records]
        full = sum(g >= part.points - 1e-9 for g in got)
        part_rows.append({"key": key, "title": titles[key], "points": part.points,
                          "mean": statistics.fmean(got) if got else 0.0,
                          "full": full, "full_rate": full / n if n else 0.0})
    mistakes, unmatched = _mistake_counts(records, lang)
    slow = sorted(records, key=lambda r: -r.timing.elapsed_s)[:SLOWEST]
    return {
        "t": t, "lang": lang, "course_title": course.title, "lesson_key": lesson_key,
        "lesson_title": _lesson_title(course, lesson_key, lang), "n": n,
        "max_score": max_score, "mean": statistics.fmean(scores) if scores else 0.0,
        "median": statistics.median(scores) if scores else 0.0,
        "full": sum(s >= max_score - 1e-9 for s in scores), "zero": sum(s <= 0 for s in scores),
        "histogram": histogram_svg(scores, max_score),
        "parts": part_rows,
        "parts_chart": bar_chart_svg([(p["title"], round(100 * p["full_rate"]))
                                      for p in part_rows], 100, "%"),
        "tests": _test_rates(records), "mistakes": mistakes,
        "unmatched": [(titles.get(p, p), c) for p, c in unmatched.most_common()],
        "problems": [r for r in records if r.status != GRADED],
        "statuses": Counter(r.status for r in records).most_common(),
        "error_kinds": _error_kinds(records),
        "slowest": slow,
        "slow_chart": bar_chart_svg([(r.student_id, r.timing.elapsed_s) for r in slow],
                                    max((r.timing.elapsed_s for r in slow), default=0.0),
                                    " s"),
        "students": [{"record": r, "page": Store.page_of(r.student_id)}
                     for r in sorted(records, key=lambda r: r.student_id)],
        "part_keys": list(lesson.parts),
    }


def render_report(records: list[GradeRecord], course: Course, lesson_key: str,
                  language: str | None = None, similarity: bool = False) -> str:
    """The TAs' HTML report over a whole class's records; with `similarity`, it links
    the similarity report beside it."""
    lang = _language(course, language)
    return _env().get_template("report.html.j2").render(
        **report_context(records, course, lesson_key, lang), similarity=similarity)


def render_similarity(pairs: list, compared: int, threshold: float, course: Course,
                      lesson_key: str, language: str | None = None) -> str:
    """The TAs' similarity report: `pairs` (similarity.Pair) side by side, with their
    matching regions marked; the code is the students', escaped and cleaned."""
    lang = _language(course, language)
    return _env().get_template("similarity.html.j2").render(
        t=STRINGS[lang], lang=lang, course_title=course.title, lesson_key=lesson_key,
        lesson_title=_lesson_title(course, lesson_key, lang), n=compared,
        threshold=f"{100 * threshold:g}", pairs=pairs)


def render_summary(record: GradeRecord, course: Course, lesson_key: str,
                   language: str | None = None) -> str:
    """The page's head as an HTML fragment: total, problem, each part's score and the
    mistakes named, from the page's own view (so it says no more than the page)."""
    lang = _language(course, language)
    return _env().get_template("summary.html.j2").render(
        **student_context(record, course, lesson_key, lang))
