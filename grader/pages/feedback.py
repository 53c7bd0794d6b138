"""A student's page (HTML), its top as Gradescope shows it (`render_page_top`), and
`templates()`, the Jinja2 environment every page is rendered with (report.py's class
and similarity reports too).

Everything a student wrote (ids, messages, tracebacks, printed output) is untrusted:
Jinja2 autoescapes it, `clean` strips control and bidi characters and caps its size,
and the pages carry a CSP that forbids scripts and remote loads, so they work
offline and nothing a student prints can run. Plots are inline SVG (charts.py).
"""
from __future__ import annotations

import ast
import re
import unicodedata
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from grader.judge import disclosed
from grader.judge.drawn import OPEN_FAILURES, shown_pictures
from grader.judge.drawn import blocked_by as _blocked_by, cards as _cards
from grader.judge.drawn import drawn_heatmap as _drawn_heatmap, failing_checks as _failing_checks
from grader.pages import explain, where
from grader.config import Course
from grader.record import GradeRecord, PartRecord, TestRecord
from grader.pages.charts import heatmap_svg, pair_bars_svg
from grader.text.cells import at, in_cells
from grader.text.shown import clean, num, points
from grader.text.strings import (STRINGS, TEMPLATES, check_label, in_language, local_text,
                                 message_in)

if TYPE_CHECKING:
    from grader.judge.context import LessonContext

# How the sandbox reports a file Python could not read (grader/sandbox/session.py).
_SYNTAX = re.compile(r"(SyntaxError|IndentationError|TabError): (.*) \([^()]*, line (\d+)\)",
                     re.S)
# How a probe or the student's own code reports a function the file lacks.
_MISSING = re.compile(r"module '[\w.]+' has no attribute '(\w+)'|name '(\w+)' is not defined")

def templates() -> Environment:
    """The pages' templates (autoescaped, strict), compiled as they are first used: a
    run makes one (`run_templates`) and renders every page with it, and a caller
    rendering one page alone gets a fresh one."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(clean=clean, num=num, points=points, ticks=ticks, counted=counted)
    return env


def counted(t: dict[str, str], key: str, n: int) -> str:
    """`t[key]` said of `n` things: its `_one` form where `n` is 1 ("1 more failing
    test", not "1 more failing tests"; Chinese says both alike)."""
    return t.get(f"{key}_one", t[key]).format(n=n) if n == 1 else t[key].format(n=n)


def ticks(value: object, limit: int) -> Markup:
    """Text of the grader's (a note) cleaned and escaped, each `quoted` piece set as
    code, as where.boxes_html does: a page shows no Markdown backticks."""
    return Markup(re.sub(r"`([^`]*)`", r"<code>\1</code>", str(escape(clean(value, limit)))))


def run_templates(ctx: LessonContext) -> Environment:
    """The templates a run renders its pages with, compiled once and kept on its lesson
    context (`LessonContext.pages`): forked workers inherit what is compiled."""
    if ctx.pages is None:
        ctx.pages = templates()
    return ctx.pages


def language_of(course: Course, language: str | None, out: Path | None = None) -> str:
    """The one precedence for a language: the option, else what the run in `out`
    recorded (its pages are in it), else course.yml's."""
    from grader.store import Store

    lang = language or (Store(out).language() if out is not None else "") or course.language
    if lang not in STRINGS:
        raise ValueError(f"no feedback strings for language {lang!r} (have: {', '.join(STRINGS)})")
    return lang


def part_titles(course: Course, lesson_key: str, lang: str) -> dict[str, str]:
    parts = course.lesson(lesson_key).parts
    return {k: (p.title_zh if lang == "zh" and p.title_zh else p.title) or k
            for k, p in parts.items()}


def course_title(course: Course, lang: str) -> str:
    return course.title_zh if lang == "zh" and course.title_zh else course.title


def lesson_title(course: Course, lesson_key: str, lang: str) -> str:
    lesson = course.lesson(lesson_key)
    return lesson.title_zh if lang == "zh" and lesson.title_zh else lesson.title


# ---------------------------------------------------------------- student page

def _part_view(part: str, title: str, scored: PartRecord | None, tests: list[TestRecord],
               record: GradeRecord, lang: str, t: dict[str, str], stub: Stub | None = None,
               failed_before: list[str] | None = None, explained: set[str] | None = None
               ) -> dict:
    """One part: its score, what its results show, failing tests grouped by identical
    error, and diagnoses. `failed_before`: the earlier parts that failed (not for the
    record's own problem), `explained` those of them a known mistake explains.

    Tests that failed for the record's own problem (no file, import error) are only
    counted: the banner at the top already says why.
    """
    failing = [x for x in tests if not x.passed]
    blocked = [x for x in failing if _blocked(x, record)]
    cards = [{"test": _test_view(group[0], t, lang, i < OPEN_FAILURES),
              "same": [x.name for x in group[1:]]}
             for i, group in enumerate(_cards(failing, blocked))]
    return {"key": part, "title": title, "score": scored.score if scored else 0.0,
            "max_score": scored.max_score if scored else 0.0,
            "passed": scored.passed if scored else len(tests) - len(failing),
            "tests": scored.tests if scored else len(tests),
            "groups": cards[:OPEN_FAILURES], "folded": cards[OPEN_FAILURES:],
            "folded_tests": sum(1 + len(g["same"]) for g in cards[OPEN_FAILURES:]),
            "blocked": len(blocked),
            "passing": [x.name for x in tests if x.passed],
            # "no known mistake: compare with the lesson's formulas" sends a precision
            # matter the wrong way: the precision finding says what it is instead
            "diagnoses": [d for d in _part_diagnoses(failing, lang)
                          if d["id"] is not None or not explain.precision_only(tests)],
            "findings": part_findings(tests, scored, failed_before or [], explained or set(),
                                      t),
            "near": {"title": local_text(scored.near.title, lang),
                     "hint": local_text(scored.near.hint, lang)}
            if scored is not None and scored.near is not None and failing else None,
            "missing": missing_from_stub(failing, stub),
            "example": example_in(record.examples.get(part, ""), lang),
            "where": where.boxes_html(scored.where, t, record.cells) if scored and failing
            else [],
            "elsewhere": t["graded_no_elements"] if any(
                not x.practice and _beyond(x) for x in failing if not _blocked(x, record))
            else ""}


def _beyond(test: TestRecord) -> bool:
    """A test with a check that has values beyond the tolerance."""
    return any(c.get("outside") for c in _failing_checks(test))


def part_findings(tests: list[TestRecord], scored: PartRecord | None,
                  failed_before: list[str], explained: set[str], t: dict[str, str]
                  ) -> list[str]:
    """What a part's results show, as the page, its top on Gradescope and `grader
    check` all list it: each finding with its reach, the failing tests it explains
    (a precision matter, the earlier pieces, the stand-in round and the contrast rule
    explain them all; the composite part's parts its composite tests; an answer to
    the grader's questions as `explain.answer_reach`; a structure claim the tests it
    is found in), ordered by `explain.by_reach`, ties in this order."""
    failing = [x for x in tests if not x.passed]
    every = len(failing)
    answers = scored.answers if scored is not None and failing else []
    found = [*((every, x) for x in explain.precision_sentences(tests, t)),
             *((every, x) for x in explain.earlier_sentences(
                 scored.earlier if scored else None, t)),
             *((every, x) for x in explain.stand_in_sentences(
                 scored.stand_in if scored else None, t)),
             *((sum(1 for x in failing if x.composite), x)
               for x in explain.composite_sentences(tests, failed_before, explained, t)),
             *((every, x) for x in explain.contrast_sentences(tests, t)),
             *((explain.answer_reach(a, failing), explain.answer_text(a, t)) for a in answers),
             *explain.structure_at_top(failing, t)]
    return [x for _, x in explain.by_reach(found) if x]


def failed_parts(record: GradeRecord, order: list[str]) -> tuple[list[str], set[str]]:
    """The parts (in `order`) with a test that failed for more than the record's own
    problem, and those of them a known mistake explains."""
    failed = [q for q in order if any(not x.passed and not _blocked(x, record)
                                      for x in record.tests if x.part == q)]
    return failed, {q for q in failed if (part := record.parts.get(q)) is not None
                    and part.diagnosis is not None and part.diagnosis.id}


def _blocked(test: TestRecord, record: GradeRecord) -> bool:
    """A test that failed for the record's own problem (no file, an import error): the
    banner at the top says why, once."""
    return _blocked_by(test, record.problem)


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


def stored(record: GradeRecord) -> GradeRecord:
    """The record as results/<id>.json keeps it: what its page and every reader of a
    stored result read. A passed check keeps its name (the page counts it, the audit
    names it); its numbers were most of a correct student's result, and no page shows
    them. A check's heatmap and a test's picture stay only where the page draws them
    (the others were 83 KB of a mistaken student's result). The page rendered from
    this record is the same, byte for byte."""
    maps, pictured = shown_pictures(record.tests, record.problem)

    def kept(c: dict) -> dict:
        if not isinstance(c, dict):  # (a record read back may hold anything)
            return c
        if c.get("passed"):
            return c if c.keys() <= _PASSED_CHECK else \
                {k: c[k] for k in _PASSED_CHECK if k in c}
        if c.get("heatmap") and id(c) not in maps:
            return {k: v for k, v in c.items() if k != "heatmap"}
        return c

    def lean(test: TestRecord) -> TestRecord:
        checks = [kept(c) for c in test.checks]
        pictures = [p for p in test.pictures if isinstance(p, dict)][:1] \
            if id(test) in pictured else []
        if pictures == test.pictures and all(a is b for a, b in zip(checks, test.checks)):
            return test
        return replace(test, checks=checks, pictures=pictures)

    tests = [lean(test) for test in record.tests]
    if all(a is b for a, b in zip(tests, record.tests)):
        return record
    return replace(record, tests=tests)


# what a stored result keeps of a passed check: the page counts passed checks, the
# audit's report names them
_PASSED_CHECK = {"name", "passed"}


def _part_diagnoses(failing: list[TestRecord], lang: str) -> list[dict]:
    """Distinct diagnoses of a part's failing tests, most frequent first."""
    seen: dict[object, dict] = {}
    for test in failing:
        d = test.diagnosis
        if d is None:
            continue
        entry = seen.setdefault(d.id, {"id": d.id, "count": 0,
                                       "title": local_text(d.title, lang),
                                       "hint": local_text(d.hint, lang)})
        entry["count"] += 1
    return sorted(seen.values(), key=lambda e: (e["id"] is None, -e["count"]))


def _local_picture(picture: dict, lang: str) -> dict:
    """A picture's name and labels in the page's language (a lesson may give either
    as {language: text})."""
    return {**picture, "name": in_language(picture.get("name", ""), lang),
            "labels": [in_language(x, lang) for x in picture.get("labels", [])]}


def test_message(test: TestRecord, lang: str, most: int) -> str:
    """A test's message in `lang`: its error's, or its first `most` failing checks' as
    the plugin joins them (`name: message; ...`), each check's in `lang`
    (`message_texts`): the record's own message is English."""
    failing = [c for c in test.checks if isinstance(c, dict) and not c.get("passed")]
    if test.error:
        return message_in(test.error, lang)
    if not failing:
        return test.message
    t = STRINGS[lang]
    return t["semicolon"].join(
        check_label(str(c.get("name")), t) + t["colon"] + message_in(c, lang)
        for c in failing[:most])


def _test_view(test: TestRecord, t: dict[str, str], lang: str, picture: bool) -> dict:
    """A failing test's checks; at most its first heatmap is drawn."""
    checks = [c for c in test.checks if isinstance(c, dict)]
    failing = [disclosed.check(c, test.practice) for c in _failing_checks(test)]
    first_map = _drawn_heatmap(failing)
    error = test.error and {**test.error, "message": message_in(test.error, lang)}
    return {"name": test.name, "message": test.message, "error": error,
            "checks": [_check_view(c, t, lang, picture and i == first_map)
                       for i, c in enumerate(failing)],
            "pictures": [pair_bars_svg(_local_picture(p, lang), t)
                         for p in test.pictures if isinstance(p, dict)][:1]
            if picture and test.practice else [],
            "passed_checks": len(checks) - len(failing)}


def heatmap_axes(check: dict, t: dict[str, str], lang: str) -> tuple[str, str]:
    """What a check's heatmap rows and columns are, as the lesson named them for this
    check; what the grader knows alone otherwise (leading dims, the last dim)."""
    axes = check.get("axes")
    if not isinstance(axes, dict):
        axes = {}
    rows, cols = (local_text(axes[k], lang) if axes.get(k) else t[f"axis_{k}"]
                  for k in ("rows", "cols"))
    return rows, cols


def _check_view(check: dict, t: dict[str, str], lang: str, picture: bool) -> dict:
    heat = check.get("heatmap") if picture else None
    rows, cols = heatmap_axes(check, t, lang)
    svg = heatmap_svg(heat, check.get("atol"), t, rows, cols) \
        if isinstance(heat, list) and heat else None
    caption = t["heatmap_caption"].format(rows=rows, cols=cols)
    claim = check.get("structure")
    return {**check, "heatmap_svg": svg, "heatmap_caption": caption,
            "message": clean(message_in(check, lang)),
            "structure_text": explain.structure_text(claim, t) if isinstance(claim, dict)
            else "",
            "label": check_label(str(check.get("name", "")), t),
            "tolerance": (f"{num(check['atol'])} + {num(check.get('rtol') or 0.0)}·{t['abs_ref']}"
                          if check.get("atol") is not None else None)}


def syntax_error(problem: str) -> dict | None:
    """The message and line of a file Python could not read, from the record's problem,
    and the character typed in place of an ASCII one, if that is why; None for any other
    problem."""
    found = _SYNTAX.fullmatch(problem.strip())
    return {"message": found.group(2), "line": int(found.group(3)),
            "typed": typed_instead(found.group(2))} if found else None


# Python's words for a character it cannot read: "invalid character '：' (U+FF1A)",
# "invalid non-printable character U+3000"
_INVALID = re.compile(r"invalid (?:non-printable )?character (?:'(.)' \()?U\+([0-9A-F]{4,6})")
# what a Chinese keyboard types for ASCII punctuation that NFKC does not fold
_TYPED = {"“": '"', "”": '"', "‘": "'", "’": "'", "。": ".", "、": ",", "【": "[",
          "】": "]", "《": "<", "》": ">", "—": "-", "…": "..."}


def typed_instead(message: str) -> dict | None:
    """The character Python could not read and the ASCII one meant (a full-width colon
    from a Chinese keyboard is `:`), or None when the message names no such character."""
    found = _INVALID.search(message)
    if found is None:
        return None
    char = chr(int(found.group(2), 16))
    meant = _TYPED.get(char) or unicodedata.normalize("NFKC", char)
    if not meant.isascii() or not meant.isprintable():
        return None
    return {"char": char, "code": f"U+{ord(char):04X}", "ascii": meant}


_EXAMPLE_COMMENTS = ("ex_digits", "ex_fills", "ex_tanh", "ex_backward", "ex_reference_gives",
                     "ex_yours_gives", "ex_model_parts", "ex_own_attention", "ex_own_blocks")


def example_in(snippet: str, lang: str) -> str:
    """A smallest failing example (made in English; Said where the grader said the
    student's error) with its comments in `lang`."""
    snippet = in_language(snippet, lang)
    for key in _EXAMPLE_COMMENTS:
        snippet = snippet.replace(STRINGS["en"][key], STRINGS[lang][key])
    return snippet


def in_notebook(record: GradeRecord, lang: str, file: str) -> GradeRecord:
    """The record with its problem, tracebacks and errors' messages naming a notebook's
    code cell and line (the record's `cells`) where Python named a line of `file`, the
    .py the cells were joined into; the record itself for a .py handed in."""
    if not record.cells:
        return record
    t = STRINGS[lang]

    def said(text: str) -> str:
        return in_cells(text, record.cells, t, file)

    def error(e: dict | None) -> dict | None:
        return e and {**e, "message": said(message_in(e, lang)), "message_texts": None,
                      "traceback": said(e.get("traceback") or "")}

    return replace(record, problem=said(in_language(record.problem, lang)),
                   import_traceback=said(record.import_traceback),
                   tests=[replace(x, error=error(x.error)) for x in record.tests])


def student_context(record: GradeRecord, course: Course, lesson_key: str, lang: str) -> dict:
    """Everything the student template shows, with raw_log left out on purpose."""
    t = STRINGS[lang]
    syntax = syntax_error(record.problem) if record.status != "graded" else None
    if syntax:
        syntax["at"] = at(syntax["line"], record.cells, t, start=bool(syntax["typed"]))
    record = in_notebook(record, lang, course.lesson(lesson_key).exercise)
    titles = part_titles(course, lesson_key, lang)
    by_part: dict[str, list[TestRecord]] = defaultdict(list)
    for test in record.tests:
        by_part[test.part].append(test)
    summaries = record.parts
    order = list(titles) + [p for p in summaries if p not in titles]
    stub = lesson_stub(course, lesson_key)
    failed, explained = failed_parts(record, order)
    parts = [_part_view(p, titles.get(p, p), summaries.get(p), by_part.get(p, []),
                        record, lang, t, stub, [q for q in order[:i] if q in failed],
                        explained)
             for i, p in enumerate(order)]
    return {"t": t, "lang": lang, "course_title": course_title(course, lang),
            "lesson_key": lesson_key, "lesson_title": lesson_title(course, lesson_key, lang),
            "student_id": record.student_id, "student_name": record.name,
            "status": record.status,
            "problem": in_language(record.problem, lang), "sandboxed": record.sandboxed,
            "syntax": syntax,
            "import_traceback": record.import_traceback,
            "notes": [local_text(n, lang) for n in record.notes],
            "output": record.output, "score": record.score,
            "max_score": record.max_score, "parts": parts}


def render_student(record: GradeRecord, course: Course, lesson_key: str,
                   language: str | None = None, pages: Environment | None = None) -> str:
    """One student's HTML page; `language` overrides course.yml's, `pages` is the
    run's `templates()`."""
    lang = language_of(course, language)
    return (pages or templates()).get_template("feedback.html.j2").render(
        **student_context(record, course, lesson_key, lang))


def render_page_top(record: GradeRecord, course: Course, lesson_key: str,
                    language: str | None = None, pages: Environment | None = None) -> str:
    """The page's top as an HTML fragment: total, problem, each part's score and the
    mistakes named, from the page's own view (so it says no more than the page)."""
    lang = language_of(course, language)
    return (pages or templates()).get_template("page_top.html.j2").render(
        **student_context(record, course, lesson_key, lang))
