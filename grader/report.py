"""The TAs' pages: the class report (scores, parts, tests, mistakes, problems, the
slowest submissions), from the class's running counts (`tally.Tally`), and the
similarity report."""
from __future__ import annotations

import statistics

from jinja2 import Environment
from markupsafe import escape

from grader import similarity
from grader.capped import MAX_SOURCE
from grader.charts import bar_chart_svg, histogram_svg
from grader.config import Course
from grader.record import MISSING
from grader.feedback import (STRINGS, course_title, language_of, lesson_title, local_text, part_titles,
                             templates)
from grader.shown import clean
from grader.store import Store
from grader.tally import Tally


def report_context(tally: Tally, course: Course, lesson_key: str, lang: str) -> dict:
    """Class-wide numbers and plots for the TA report. A student who handed nothing in
    (graded as missing, or on the roster and not in the download: `tally.absent`) is
    counted and listed, and left out of every average, rate and chart."""
    t = STRINGS[lang]
    lesson = course.lesson(lesson_key)
    titles = part_titles(course, lesson_key, lang)
    every = tally.in_order()
    lines = [line for line in every if line.status != MISSING]
    nothing = sorted([line.student_id for line in every if line.status == MISSING]
                     + list(tally.absent))
    scores = [line.score for line in lines]
    max_score = lesson.max_score
    n = len(lines)
    part_rows = []
    for key, part in lesson.parts.items():
        got = [line.parts.get(key, 0.0) for line in lines]
        full = sum(g >= part.points - 1e-9 for g in got)
        part_rows.append({"key": key, "title": titles[key], "points": part.points,
                          "mean": statistics.fmean(got) if got else 0.0,
                          "full": full, "full_rate": full / n if n else 0.0})
    slow = tally.slowest()
    return {
        "t": t, "lang": lang, "course_title": course_title(course, lang), "lesson_key": lesson_key,
        "lesson_title": lesson_title(course, lesson_key, lang), "n": n,
        "class_size": len(every) + len(tally.absent), "nothing": nothing,
        "absent": sorted(tally.absent),
        "max_score": max_score, "mean": statistics.fmean(scores) if scores else 0.0,
        "median": statistics.median(scores) if scores else 0.0,
        "full": sum(s >= max_score - 1e-9 for s in scores), "zero": sum(s <= 0 for s in scores),
        "histogram": histogram_svg(scores, max_score),
        "parts": part_rows,
        "parts_chart": bar_chart_svg([(p["title"], round(100 * p["full_rate"]))
                                      for p in part_rows], 100, "%"),
        "tests": [{"part": p, "name": name, "passed": ok, "total": tot,
                   "rate": ok / tot if tot else 0.0}
                  for (p, name), (ok, tot) in sorted(tally.rates.items())],
        "mistakes": _mistakes(tally, lang),
        "unmatched": [(titles.get(p, p), c) for p, c in tally.unmatched.ranked()],
        "problems": [p for _, p in sorted(tally.problems, key=lambda x: x[0])],
        "statuses": tally.statuses.ranked(),
        "error_kinds": tally.error_kinds.ranked(),
        "slowest": slow,
        "slow_chart": bar_chart_svg([(s.student_id, s.elapsed_s) for s in slow],
                                    max((s.elapsed_s for s in slow), default=0.0), " s"),
        "students": [{"line": line, "page": Store.page_of(line.student_id)}
                     for line in sorted(every, key=lambda line: line.student_id)],
        "part_keys": list(lesson.parts),
    }


def _mistakes(tally: Tally, lang: str) -> list[dict]:
    """Diagnosed mistakes, each counted once per student, the most common first."""
    found = [{"id": m.id, "part": m.part, "title": local_text(m.title, lang),
              "students": [sid for _, sid in sorted(m.students, key=lambda x: x[0])]}
             for m in tally.mistakes.values()]
    return sorted(found, key=lambda e: (-len(e["students"]), e["id"]))


def render_report(tally: Tally, course: Course, lesson_key: str,
                  language: str | None = None, similarity: str | None = None,
                  pages: Environment | None = None) -> str:
    """The TAs' HTML report over a whole class's counts (`Tally.of(records)` for a
    list of records); `similarity`: the link to the similarity report beside it
    (Store knows its name), if there is one. `pages`: the run's `feedback.templates()`."""
    lang = language_of(course, language)
    return (pages or templates()).get_template("report.html.j2").render(
        **report_context(tally, course, lesson_key, lang), similarity=similarity)


def render_similarity(found: similarity.Found, compared: int, threshold: float,
                      course: Course, lesson_key: str, language: str | None = None,
                      pages: Environment | None = None,
                      budget: similarity.Budget | None = None,
                      cut: list[tuple[str, int]] | tuple = ()) -> tuple[str, int]:
    """The TAs' similarity report and how many pairs it shows: `found`'s pairs side by
    side, most similar first, while the page stays within `budget.page_kb` (course.yml's,
    else the defaults), each side's matching regions marked with a few lines around
    them; what the budget left out is said. `cut`: the sides compared only up to
    `budget.file_kb` (label, size in KB). The code is the students', escaped and cleaned."""
    lang = language_of(course, language)
    budget = budget or similarity.Budget()
    template = (pages or templates()).get_template("similarity.html.j2")

    def render(shown: int) -> str:
        return template.render(
            t=STRINGS[lang], lang=lang, course_title=course_title(course, lang),
            lesson_key=lesson_key, lesson_title=lesson_title(course, lesson_key, lang),
            n=compared, threshold=f"{100 * threshold:g}", pairs=found.pairs[:shown],
            hidden=len(found.pairs) - shown, found=found, budget=budget, kept=similarity.KEPT,
            context=similarity.CONTEXT, cut=cut)

    room = budget.page_kb * 1024 - len(render(0).encode())  # the page with no pair on it
    shown = 0
    for pair in found.pairs:
        room -= _pair_bytes(pair)
        if room < 0:
            break
        shown += 1
    return render(shown), shown


PAIR_MARKUP = 2048   # a pair's HTML around its ids and code (measured: under 1 KB)
PIECE_MARKUP = 160   # a piece's: <mark> or a skipped-lines note (measured: under 100 bytes)


def _pair_bytes(pair: similarity.Pair) -> int:
    """At most what one pair adds to the similarity page: its ids (each twice) and its
    excerpts, escaped and cleaned as the template shows them."""
    ids = [side.student_id for side in (pair.a, pair.b)] * 2
    pieces = [piece.text for side in (pair.a, pair.b) for piece in side.excerpt]
    return (PAIR_MARKUP + PIECE_MARKUP * len(pieces)
            + sum(len(str(escape(clean(text, MAX_SOURCE))).encode()) for text in ids + pieces))
