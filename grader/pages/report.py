"""The TAs' class report (scores, parts, tests, mistakes, problems, the slowest
submissions), from the class's running counts (`tally.Tally`)."""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from jinja2 import Environment

from grader.config import Course
from grader.pages.charts import bar_chart_svg, histogram_svg
from grader.pages.feedback import (STRINGS, course_title, language_of, lesson_title, local_text, part_titles,
                             templates)
from grader.record import MISSING
from grader.store import Store
from grader.text.strings import in_language
from grader.judge.tally import Tally


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
    part_rows: list[dict[str, Any]] = []
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
        "problems": [replace(p, problem=in_language(p.problem, lang))  # a Said: the page's
                     for _, p in sorted(tally.problems, key=lambda x: x[0])],
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
                  pages: Environment | None = None, record: Sequence[dict] = (),
                  regrades: Sequence[dict] = (), written: Sequence[dict] = ()) -> str:
    """The TAs' HTML report over a whole class's counts (`Tally.of(records)` for a
    list of records); `similarity`: the link to the similarity report beside it
    (Store knows its name), if there is one. `pages`: the run's `feedback.templates()`.
    `record`: the grade of record's rows (judge/final.py `report_rows`); `regrades`:
    the open regrade requests; `written`: the check questions' rows (judge/written.py
    `report_rows`: per question the marks' distribution and each rubric item's use)."""
    lang = language_of(course, language)
    return (pages or templates()).get_template("report.html.j2").render(
        **report_context(tally, course, lesson_key, lang), similarity=similarity,
        record=list(record), regrades=list(regrades), written=list(written))
