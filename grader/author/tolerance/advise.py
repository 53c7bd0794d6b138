"""Per check and tolerance key: the largest correct difference, the smallest mistake,
a suggested atol/rtol between them, drift, and the current tolerance's verdict."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grader.config import Course
from grader.lesson.testfile import part_of
from grader.judge.context import LessonContext
from grader.author.tolerance import measured, variants
from grader.author.tolerance.measured import Compared, Run

Key = tuple[str, str, str]  # (test, check, tolerance key)
PREFER = 2.0  # a larger rtol is suggested only when it widens the margin this much


@dataclass
class Worst:
    value: float
    who: str
    case: str


@dataclass
class Row:
    """One check (test × check name) under one tolerance key."""
    test: str
    check: str
    key: str
    atol: float
    rtol: float
    correct: Worst
    mistake: Worst | None = None            # smallest mistake a tolerance can separate
    noise: list[str] = field(default_factory=list)   # mistakes no larger than correct
    suggest: tuple[float, float, float] | None = None  # atol, rtol, margin each side
    too_tight: list[Worst] = field(default_factory=list)
    unsafe: list[Worst] = field(default_factory=list)
    drift: str = ""
    size: str = ""
    floor: float = 0.0  # one ulp at the reference's scale: the least a margin is above


@dataclass
class Advice:
    lesson: str
    correct: list[tuple[str, str]]       # (name, what it is)
    mistakes: int
    notes: list[str]
    rows: list[Row]
    broken: dict[str, dict[str, str]]   # correct variant -> test -> exception
    escaping: list[str]  # mistakes of the parts run that fail no test run, as set now


def _by_row(runs: dict[str, Run]) -> dict[Key, dict[str, list[Compared]]]:
    rows: dict[Key, dict[str, list[Compared]]] = defaultdict(lambda: defaultdict(list))
    for who, r in runs.items():
        for c in r.compared:
            rows[(c.test, c.check, c.key)][who].append(c)
    return rows


def _worst(by_who: dict[str, list[Compared]], value) -> Worst:
    return max((Worst(value(c), who, c.case) for who, cs in by_who.items() for c in cs),
               key=lambda w: w.value, default=Worst(0.0, "", ""))


def _mistake_size(cs: list[Compared]) -> float:
    """How far a mistake gets from the reference at this check (its best chance)."""
    return max(c.max_abs for c in cs)


def _suggest(correct: dict[str, list[Compared]], mistakes: dict[str, list[Compared]],
             floor: float) -> tuple[float, float, float] | None:
    """The (atol, rtol) with the widest margin on both sides, over the rtols weighed:
    per element, what is left of the error once rtol·|ref| is allowed."""
    found = []
    for r in sorted({k for cs in correct.values() for c in cs for k in c.excess}):
        need = max([c.excess[r] for cs in correct.values() for c in cs] + [floor])
        catch = min((max(c.excess[r] for c in cs) for cs in mistakes.values()),
                    default=math.inf)
        if math.isfinite(catch) and catch > need:
            margin = math.sqrt(catch / need)
            found.append((need * margin, r, margin))
    if not found:
        return None
    # the smallest rtol within PREFER of the widest margin: a plain atol reads best
    widest = max(m for _, _, m in found)
    return next(f for f in found if f[2] * PREFER >= widest)


def _drift(correct: dict[str, list[Compared]]) -> str:
    """Error growing with the index along an axis of the worst correct comparison."""
    worst = max((c for cs in correct.values() for c in cs), key=lambda c: c.max_abs,
                default=None)
    if worst is None or worst.max_abs <= 0:
        return ""
    for axis, p in sorted(worst.profiles.items()):
        i = np.arange(len(p), dtype=np.float64)
        q = len(p) // 4
        if p.std() == 0 or not np.isfinite(p).all():
            continue
        corr = float(np.corrcoef(i, p)[0, 1])
        if corr >= 0.8 and p[-q:].mean() >= 4 * max(p[:q].mean(), 1e-300):
            slope = float((i * p).sum() / (i * i).sum())
            return (f"drift ∝ position (axis {axis}, {worst.case}): ≈ {slope:.2g} × index, "
                    f"up to {p.max():.2g} at index {int(p.argmax())} of {len(p)}")
    return ""


def _size(correct: dict[str, list[Compared]]) -> str:
    """The largest correct error across cases against each case's size (log-log fit)."""
    by_case: dict[str, tuple[int, float]] = {}
    for cs in correct.values():
        for c in cs:
            n, v = by_case.get(c.case, (c.numel, 0.0))
            by_case[c.case] = (n, max(v, c.max_abs))
    pts = [(n, v) for n, v in by_case.values() if v > 0 and math.isfinite(v)]
    if len(pts) < 3 or max(n for n, _ in pts) < 4 * min(n for n, _ in pts):
        return ""
    x, y = np.log([n for n, _ in pts]), np.log([v for _, v in pts])
    if x.std() == 0 or y.std() == 0:
        return ""
    slope = float(np.polyfit(x, y, 1)[0])
    if float(np.corrcoef(x, y)[0, 1]) >= 0.8 and slope >= 0.3:
        return f"grows with the case's size: ∝ size^{slope:.1f} over {len(pts)} cases"
    return ""


def _row(key: Key, correct: dict[str, list[Compared]],
         mistakes: dict[str, list[Compared]]) -> Row:
    any_c = next(c for cs in (*correct.values(), *mistakes.values()) for c in cs)
    row = Row(*key, any_c.atol, any_c.rtol, _worst(correct, lambda c: c.max_abs))
    touched = {m: cs for m, cs in mistakes.items() if _mistake_size(cs) > 0}
    row.noise = sorted(m for m, cs in touched.items() if _mistake_size(cs) <= row.correct.value)
    apart = {m: cs for m, cs in touched.items() if m not in row.noise}
    finite = {m: cs for m, cs in apart.items() if math.isfinite(_mistake_size(cs))}
    if finite:
        m = min(finite, key=lambda m: _mistake_size(finite[m]))
        case = max(finite[m], key=lambda c: c.max_abs).case
        row.mistake = Worst(_mistake_size(finite[m]), m, case)
    row.floor = floor = max(c.eps for cs in correct.values() for c in cs)
    row.suggest = _suggest(correct, finite, floor)
    row.too_tight = [Worst(c.excess[c.rtol], who, c.case)
                     for who, cs in correct.items() for c in cs if c.excess[c.rtol] > c.atol]
    row.unsafe = [Worst(_mistake_size(cs), m, "") for m, cs in sorted(apart.items())
                  if max(c.excess[c.rtol] for c in cs) <= cs[0].atol]
    row.drift, row.size = _drift(correct), _size(correct)
    return row


def advise(course: Course, key: str, folder: Path | None = None, select: str = "") -> Advice:
    """Run the graded tests (those pytest's `-k select` picks) with every correct
    variant and known mistake in turn."""
    refs = LessonContext(course, key).refs
    if refs.source is None:
        raise ValueError(f"lesson {key} has no solution here (a student bundle?)")
    items = measured.graded_tests(course, key, select)
    tolerances = course.tolerances(key)
    made, notes = variants.generated(refs.source, refs.reference, refs.probes, key)
    chosen = variants.from_folder(folder, refs.probes) + made
    correct = {v.name: measured.run(items, v.caller, refs.reference, tolerances) for v in chosen}
    wrong = {v.mistake.id: measured.run(items, v.caller, refs.reference, tolerances)
             for v in refs.variants}
    c_rows, m_rows = _by_row(correct), _by_row(wrong)
    rows = [_row(k, c_rows[k], m_rows.get(k, {})) for k in c_rows]
    parts = {part_of(item.path) for item in items}
    return Advice(key, [(v.name, v.about) for v in chosen], len(wrong), notes, rows,
                  {name: r.raised for name, r in correct.items() if r.raised},
                  sorted(v.mistake.id for v in refs.variants if v.mistake.part in parts
                         and not wrong[v.mistake.id].failed))
