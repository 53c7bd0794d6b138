"""The TAs' pages: the class report (scores, parts, tests, mistakes, problems, the
slowest submissions) and the similarity report, from the class's records."""
from __future__ import annotations

import statistics
from collections import Counter

from jinja2 import Environment

from grader.charts import bar_chart_svg, histogram_svg
from grader.config import Course
from grader.feedback import (STRINGS, course_title, language_of, lesson_title, local_text, part_titles,
                             templates)
from grader.record import GRADED, GradeRecord
from grader.store import Store

SLOWEST = 10             # submissions listed as slowest in the class report


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
                                            "title": local_text(d.title, lang),
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
    titles = part_titles(course, lesson_key, lang)
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
        "t": t, "lang": lang, "course_title": course_title(course, lang), "lesson_key": lesson_key,
        "lesson_title": lesson_title(course, lesson_key, lang), "n": n,
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
                  language: str | None = None, similarity: str | None = None,
                  pages: Environment | None = None) -> str:
    """The TAs' HTML report over a whole class's records; `similarity`: the link to
    the similarity report beside it (Store knows its name), if there is one. `pages`:
    the run's `feedback.templates()`."""
    lang = language_of(course, language)
    return (pages or templates()).get_template("report.html.j2").render(
        **report_context(records, course, lesson_key, lang), similarity=similarity)


def render_similarity(pairs: list, compared: int, threshold: float, course: Course,
                      lesson_key: str, language: str | None = None,
                      pages: Environment | None = None) -> str:
    """The TAs' similarity report: `pairs` (similarity.Pair) side by side, with their
    matching regions marked; the code is the students', escaped and cleaned."""
    lang = language_of(course, language)
    return (pages or templates()).get_template("similarity.html.j2").render(
        t=STRINGS[lang], lang=lang, course_title=course_title(course, lang), lesson_key=lesson_key,
        lesson_title=lesson_title(course, lesson_key, lang), n=compared,
        threshold=f"{100 * threshold:g}", pairs=pairs)
