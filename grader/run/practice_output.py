"""What `grader check` tells a student about one record: per part, the practice tests
passed, the failing ones with their messages, and the likely mistake.

One outcome serves both outputs (`grader check` prints it, `--json` writes it), so the
two never disagree; a test asserts the project's, the notebook's and the bundle's
checks give the same outcome.
"""
from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from grader.judge import disclosed
from grader.config import Course, title_in
from grader.pages.feedback import test_message
from grader.record import MISSING, UNREADABLE, GradeRecord, TestRecord

if TYPE_CHECKING:
    from grader.judge.earlier import Earlier

# Exit status of `grader check`, documented in docs/students.md
PASSED, FAILED, WRONG_INPUT, GRADER_FAILED = 0, 1, 2, 3
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
# What the check itself says, per language (`grader check --language`)
WORDS = {
    "en": {"note": "note:", "hint": "hint:", "likely": "likely mistake:",
           "practice": "practice tests", "printed": "your code printed:",
           "example": "smallest failing example",
           "paste": "(paste next to your file and run it; the reference's result is in "
                    "its comments):",
           "total": "practice tests: {passed}/{total} passed. The graded run has more "
                    "tests, hidden.",
           "diff": "{name}: max abs diff {diff:.3g} at {where}, got {got}, expected {ref} "
                   "(tolerance {atol} + {rtol}·|ref|)", "where": "where:", "found": "found:",
           "syntax": "Python could not read your file, so no test ran. The caret marks "
                     "where it stopped; the mistake is often just before it (a missing "
                     "comma, bracket, colon or quote, here or on the line above).",
           "earlier": "your own earlier files, which {file} runs on (from model_parts):",
           "earlier_ok": "lesson {lesson} {file}: {pieces}; its practice tests "
                         "{passed}/{total} passed",
           "earlier_none": "lesson {lesson}: no {file} beside your file, so {pieces} "
                           "cannot run; put your lesson {lesson} file there",
           "earlier_failing": "lesson {lesson} {file} fails its practice tests in "
                              "{parts}, where {pieces} come from: a part above may fail "
                              "for that, not for your wiring (see `grader check {file}`)",
           "earlier_mistake": "likely mistake there:"},
    "zh": {"note": "说明：", "hint": "提示：", "likely": "最可能的错误：",
           "practice": "练习测试通过", "printed": "你的代码打印了：",
           "example": "最小的失败示例",
           "paste": "（保存在你的文件旁边并运行；参考结果写在注释中）：",
           "total": "练习测试：{passed}/{total} 通过。正式评分还有更多隐藏的测试。",
           "diff": "{name}：最大绝对误差 {diff:.3g}，位置 {where}，你的值 {got}，期望值 {ref}"
                   "（容差 {atol} + {rtol}·|参考值|）", "where": "位置：", "found": "发现：",
           "syntax": "Python 无法读取你的文件，所以没有运行任何测试。^ 标出了它停下的位置；"
                     "错误往往就在它前面（这一行或上一行少了逗号、括号、冒号或引号）。",
           "earlier": "{file} 运行在你自己之前各课的文件上（来自 model_parts）：",
           "earlier_ok": "第 {lesson} 课 {file}：{pieces}；它的练习测试 {passed}/{total} 通过",
           "earlier_none": "第 {lesson} 课：你的文件旁边没有 {file}，所以 {pieces} 无法运行；"
                           "请把你第 {lesson} 课的文件放在那里",
           "earlier_failing": "第 {lesson} 课 {file} 的练习测试在 {parts} 没有通过，{pieces} "
                              "来自那里：上面的部分可能因此失败，而不是因为你的组装（见 "
                              "`grader check {file}`）",
           "earlier_mistake": "那里最可能的错误："},
}


def outcome(record: GradeRecord, course: Course, lesson_key: str, notes: list[str],
            language: str | None = None) -> dict:
    """The record as the student is told it, in `language` (default: course.yml's):
    every field plain JSON."""
    from grader.pages.where import sentence
    from grader.pages.feedback import (STRINGS, example_in, failed_parts, in_notebook,
                                       part_findings)
    from grader.text.strings import check_label, in_language
    lesson = course.lesson(lesson_key)
    lang = language or course.language
    typed = _typed(record.tests, record.cells, STRINGS[lang])
    record = in_notebook(record, lang, lesson.exercise)
    tests = record.tests
    parts = {}
    order = list(record.parts)
    failed, explained = failed_parts(record, order)
    for name, part in record.parts.items():
        mine = [t for t in tests if t.part == name]  # practice: not in the counters
        diagnosis = part.diagnosis
        failing = any(not t.passed for t in mine)
        parts[name] = {
            "where": sentence(part.where, STRINGS[lang], record.cells) if failing else "",
            "findings": part_findings(mine, part, [q for q in order[:order.index(name)]
                                                   if q in failed], explained, STRINGS[lang]),
            "title": title_in(lesson.parts[name], lang),
            "passed": sum(t.passed for t in mine), "total": len(mine),
            "likely_mistake": {"id": diagnosis.id, "title": diagnosis.title[lang],
                               "hint": diagnosis.hint[lang]}
            if diagnosis and diagnosis.id else None,
            "tests": [{"name": t.name, "outcome": t.outcome, "message": test_message(t, lang, most=5),
                       "traceback": (t.error or {}).get("traceback") or "",
                       "checks": [{**disclosed.check(c, t.practice),
                                   "label": check_label(str(c.get("name")), STRINGS[lang])}
                                  for c in t.checks if not c.get("passed")]}
                      for t in mine]}
    return {"lesson": lesson_key, "language": lang, "status": record.status,
            "problem": in_language(record.problem, lang),
            "syntax_error": _syntax_error(tests), "typed": typed,
            "traceback": record.import_traceback,
            "notes": [in_language(n, lang) for n in notes], "passed": sum(t.passed for t in tests), "total": len(tests),
            "parts": parts, "output": record.output,
            "examples": {k: example_in(v, lang) for k, v in record.examples.items()}}


def pieces_outcome(found: Earlier, checked: dict[str, dict], course: Course,
                   lesson_key: str, language: str) -> list[dict]:
    """An assembly lesson's own pieces as the student is told them, per earlier lesson
    (`builds_on`): its file (found or not), the pieces it gives, its own practice
    tests' counts from its check's outcome (`checked`), and the parts that fail there
    which a piece rests on, with their likely mistakes."""
    lesson = course.lesson(lesson_key)
    shown = []
    for key, names in lesson.builds_on.items():
        got = checked.get(key)
        parts = got["parts"] if got else {}
        failing = [p for p in dict.fromkeys(q for qs in names.values() for q in qs)
                   if p in parts and parts[p]["passed"] < parts[p]["total"]]
        shown.append({
            "lesson": key, "file": course.lesson(key).exercise, "found": key in found.files,
            "pieces": list(names), "passed": got["passed"] if got else 0,
            "total": got["total"] if got else 0, "failing": failing,
            "failing_pieces": [n for n, qs in names.items() if set(qs) & set(failing)],
            "titles": {p: parts[p]["title"] for p in failing},
            "mistakes": [parts[p]["likely_mistake"]["title"] for p in failing
                         if parts[p]["likely_mistake"]],
            "problem": got["problem"] if got else ""})
    return shown


def _syntax_error(tests: list[TestRecord]) -> bool:
    return any((t.error or {}).get("type") in SYNTAX_ERRORS for t in tests)


def _typed(tests: list[TestRecord], cells: list[list[int]], t: dict[str, str]
           ) -> dict | None:
    """The character typed in place of an ASCII one that Python could not read, and
    where (the message's "(<file>, line N)" is "line N", or a notebook's cell and
    line), if that is why the file could not be read."""
    from grader.pages.feedback import typed_instead
    from grader.text.cells import at

    for test in tests:
        message = (test.error or {}).get("message") or ""
        if (test.error or {}).get("type") in SYNTAX_ERRORS and (found := typed_instead(message)):
            line = re.search(r"line (\d+)\)\s*$", message)
            return {**found, "line": at(int(line.group(1)), cells, t, start=True) if line
                    else "?"}
    return None


def exit_status(outcome: dict) -> int:
    """0: every practice test passed (an assembly lesson's own earlier files' too); 2:
    there was no file to grade (missing, unreadable, not a notebook); 1: otherwise
    (some test failed, or an earlier file is missing)."""
    if outcome["status"] in (MISSING, UNREADABLE):
        return WRONG_INPUT
    if any(e["failing"] or not e["found"] for e in outcome.get("earlier") or []):
        return FAILED  # an assembly lesson's own piece fails its lesson, or is missing
    return PASSED if outcome["total"] and outcome["passed"] == outcome["total"] else FAILED


def print_outcome(record: GradeRecord, outcome: dict, course: Course, lesson_key: str,
                out: Console | None = None) -> None:
    """A record as `grader check` shows it, from its `outcome` (on `out`: `grader
    selftest` reads it back). A file that could not be run (a syntax error, a failed
    import) is shown once, with its traceback, not again under every part."""
    from grader.pages.feedback import STRINGS, lesson_stub, missing_from_stub

    out = out or Console(highlight=False, soft_wrap=not sys.stdout.isatty())  # no mid-phrase wrap
    lang = outcome.get("language") or course.language
    words = WORDS[lang]
    for note in (n for n in outcome["notes"] if n not in outcome["problem"]):  # said below
        out.print(f"{words['note']} {note}", markup=False)
    if outcome["problem"]:
        out.print(f"[bold red]{escape(outcome['problem'])}[/]")
        if outcome["traceback"]:
            out.print(outcome["traceback"].rstrip("\n"), markup=False)
        if outcome["syntax_error"]:
            out.print(f"[yellow]{words['hint']}[/] ", end="")
            typed = outcome.get("typed")
            out.print(STRINGS[outcome.get("language") or course.language]["syntax_typed"]
                      .format(**typed) if typed else words["syntax"], markup=False)
    stub = lesson_stub(course, lesson_key)
    for name, part in outcome["parts"].items():
        mark = "[green]✓[/]" if part["passed"] == part["total"] else "[red]✗[/]"
        out.print(f"{mark} {escape(name):9} {part['passed']}/{part['total']} "
                  f"{words['practice']}  [dim]{escape(part['title'])}[/]")
        if outcome["problem"]:
            continue  # said once, above
        for t in (t for t in part["tests"] if t["outcome"] != "passed"):
            out.print(f"    {t['name']}{STRINGS[lang]['colon']}", end="", markup=False)
            out.print(t["message"][:300], markup=False)
            if t["traceback"]:
                out.print("      " + t["traceback"].strip().replace("\n", "\n      "),
                          markup=False)
            for c in t["checks"]:  # a practice case's: its reference ships with the bundle
                if c.get("max_abs_diff") is not None:
                    out.print("      " + words["diff"].format(
                        name=c["label"], diff=c["max_abs_diff"], where=c.get("where"),
                        got=c.get("got_value"), ref=c.get("ref_value"), atol=c.get("atol"),
                        rtol=c.get("rtol")), markup=False)
        if outcome["examples"].get(name):
            out.print(f"    [yellow]{words['example']}[/] ", end="")
            out.print(words["paste"], markup=False)
            out.print("      " + outcome["examples"][name].rstrip("\n").replace("\n", "\n      "),
                      markup=False)
        failing = [t for t in record.tests if t.part == name and not t.passed]
        for where in missing_from_stub(failing, stub):
            out.print("    " + STRINGS[outcome.get("language") or course.language][
                "missing_in_stub"].format(**where), markup=False)
        if part["where"]:
            out.print(f"    [yellow]{words['where']}[/] ", end="")
            out.print(part["where"], markup=False)
        for found in part["findings"]:  # what the page's "What your results show" says
            out.print(f"    [yellow]{words['found']}[/] ", end="")
            out.print(found, markup=False)
        if part["likely_mistake"]:
            # The instructor's text is printed as is: "torch.cat([cos, cos])" is no markup.
            out.print(f"    [yellow]{words['likely']}[/] ", end="")
            out.print(part["likely_mistake"]["title"], markup=False)
            out.print(f"    [yellow]{words['hint']}[/] ", end="")
            out.print(part["likely_mistake"]["hint"], markup=False)
    if outcome.get("earlier"):
        print_pieces(outcome["earlier"], course.lesson(lesson_key).exercise, words, out)
    if outcome["output"]:
        out.print(f"[dim]{words['printed']}[/]")
        out.print(outcome["output"][:2000], markup=False)
    out.print(words["total"].format(passed=outcome["passed"], total=outcome["total"]))


def print_pieces(earlier: list[dict], exercise: str, words: dict[str, str],
                 out: Console) -> None:
    """An assembly lesson's own pieces (`pieces_outcome`), a line per earlier lesson."""
    out.print(words["earlier"].format(file=exercise), markup=False)
    for e in earlier:
        said = dict(e, pieces=", ".join(e["pieces"]))
        if not e["found"]:
            out.print("  [red]✗[/] ", end="")
            out.print(words["earlier_none"].format(**said), markup=False)
        elif e["failing"]:
            out.print("  [red]✗[/] ", end="")
            out.print(words["earlier_failing"].format(**dict(
                said, pieces=", ".join(e["failing_pieces"]),
                parts=", ".join(f"{p}: {e['titles'][p]}" for p in e["failing"]))),
                markup=False)
            if e["problem"]:  # its file could not be run: why, once
                out.print("      " + e["problem"], markup=False)
            for title in e["mistakes"]:
                out.print(f"      [yellow]{words['earlier_mistake']}[/] ", end="")
                out.print(title, markup=False)
        else:
            out.print("  [green]✓[/] ", end="")
            out.print(words["earlier_ok"].format(**said), markup=False)


def print_written(outcome: dict, course: Course, lesson_key: str, out: Console) -> None:
    """The shapes questions' marks (`written.shapes_marks`), field by field: marked here
    as they will be at grading, for the lesson's shapes are in its own text."""
    from grader.pages.feedback import STRINGS

    lang = outcome.get("language") or course.language
    zh = lang == "zh"
    lesson = course.lesson(lesson_key)
    for qid, got in (outcome.get("written") or {}).items():
        q = lesson.written[qid]
        title = title_in(q, lang)
        full = got["score"] == got["max_score"]
        out.print(f"{'[green]✓[/]' if full else '[red]✗[/]'} {qid:9} "
                  f"{got['score']:g}/{got['max_score']:g}  [dim]{escape(title)}[/]")
        for field, m in got["fields"].items():
            if not m["ok"] or m["note"]:
                out.print(f"    {field}{STRINGS['zh' if zh else 'en']['colon']}", end="",
                          markup=False)
                out.print(m["why"] or m["note"], markup=False)
