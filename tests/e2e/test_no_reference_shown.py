"""No reference output of a graded case anywhere a student can see it (issue 24, item 7).

Each known mistake of every lesson, and an attack, are graded in-process (trusted
callers in the student's seat, as the autograder zip's recording does), and everything
a student receives is rendered from their records: the page and its top (what
Gradescope shows) in both languages, the LMS exports (Gradescope's results.json, Canvas, LTI, Moodle), and what
`grader check` prints and writes as JSON. The reference's results of the graded cases
(its cache after the run) are then searched for in that text:
- at the precisions the surfaces print numbers (`num`, `.3g`, `.4g`, repr);
- and, for the attack, as a resubmission would use a table read off the page: no
  number in the text is within the tolerance of a small graded output (the aux loss).

The attack is the one that worked: a first submission whose aux loss is 0, so that a
page printing "yours / expected" or "differs by" gives the reference's value.
"""
from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path

import pytest
import torch
from rich.console import Console

from grader.run import practice_output
from grader.pages import feedback
from grader.judge import runner
from grader.judge.context import LessonContext
from grader.deliver.export import export
from grader.record import ClassScores, GradeRecord, status_of
from grader.judge.reference import Caller, load_module
from grader.text.shown import num

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ["10", "11", "12", "13"]
ZEROS_AUX = ("    return (load * scores.mean(0)).sum() * num_experts * router_aux_loss_coef\n",
             "    return (scores * 0).sum()  # the attack's first submission\n")
NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
SMALL = 4          # outputs with at most this many values are answered from a table


def _records(ctx: LessonContext, modules: dict[str, object]) -> list[GradeRecord]:
    """Each module graded on the graded cases, as a record (the pipeline's scoring)."""
    done: list[GradeRecord] = []
    names = list(modules)

    def keep(name: str):
        def on_raw(raw: dict) -> None:
            scored = runner.score(ctx, raw)
            done.append(GradeRecord(
                student_id=name, lesson=ctx.key,
                status=status_of(None, None, scored.tests), score=scored.score,
                max_score=scored.max_score, parts=scored.parts, tests=scored.tests))
        return on_raw

    runner.run_tests(ctx, [(Caller(modules[n], ctx.refs.probes), keep(n)) for n in names])
    return done


def _floats(obj) -> list[tuple[float, int]]:
    """Every float of the reference's results, with the size of the tensor it is in."""
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            values = obj.detach().double().reshape(-1).tolist()
            return [(v, len(values)) for v in values if math.isfinite(v)]
        return []
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _floats(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _floats(v)]
    return []


def _digits(text: str) -> int:
    mantissa = text.lstrip("-").split("e")[0].split("E")[0].replace(".", "").lstrip("0")
    return len(mantissa)


def _shown_forms(values: list[tuple[float, int]]) -> set[str]:
    """How a surface would print each value (`num`, `.4g`, `.6g`, repr), where the form
    is specific enough to be an answer: at least 4 significant digits, and not a short
    binary fraction (0.3125 is a points value as often as a reference's)."""
    forms: set[str] = set()
    for v, _ in values:
        if (v * 1024).is_integer():
            continue
        for text in (num(v), f"{v:.4g}", f"{v:.6g}", repr(v)):
            if _digits(text) >= 4 and not (float(text) * 1024).is_integer():
                forms.add(text)
    return forms


def _surfaces(course, key: str, records: list[GradeRecord], tmp: Path) -> dict[str, str]:
    """Everything a student receives for these records, as text, by where it is."""
    texts: dict[str, str] = {}
    for r in records:
        for lang in ("en", "zh"):
            texts[f"page {r.student_id} {lang}"] = feedback.render_student(r, course, key, lang)
            texts[f"page top {r.student_id} {lang}"] = feedback.render_page_top(
                r, course, key, lang)
        report = practice_output.outcome(r, course, key, [])
        texts[f"check --json {r.student_id}"] = json.dumps(report, ensure_ascii=False)
        sink = io.StringIO()
        practice_output.print_outcome(r, report, course, key, Console(file=sink, width=200))
        texts[f"check {r.student_id}"] = sink.getvalue()
    scores = ClassScores(lesson=key, course=course.title, version="", max_score=0.0,
                         students=[GradeRecord.from_json(r.score_json()) for r in records])
    out = tmp / f"export{key}"
    for path in export(course, key, scores, out, ["gradescope", "canvas", "lti", "moodle"]):
        if path.suffix == ".zip":
            import zipfile
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    texts[f"{path.name}:{name}"] = z.read(name).decode("utf-8", "replace")
        else:
            texts[path.name] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def _leaks(texts: dict[str, str], forms: set[str]) -> list[tuple[str, str]]:
    found = []
    for where, text in texts.items():
        for token in set(NUMBER.findall(text)) & forms:
            found.append((where, token))
    return found


@pytest.fixture(scope="module", params=LESSONS)
def graded(request, course, tmp_path_factory):
    """A lesson's known mistakes (and, in lesson 13, the attack) graded, with the
    reference's results of the graded cases and what students receive."""
    key = request.param
    ctx = LessonContext(course, key)
    refs = ctx.refs
    modules = {v.mistake.id: v.caller.module for v in refs.variants}
    if key == "13":
        assert refs.source.count(ZEROS_AUX[0]) == 1
        modules["attack-aux-zeros"] = load_module(
            "_attack_aux_zeros", refs.source.replace(*ZEROS_AUX), "attack")
    records = _records(ctx, modules)
    assert len(records) == len(modules)
    values = _floats(list(refs.reference.cache.values()))
    texts = _surfaces(course, key, records, tmp_path_factory.mktemp(f"shown{key}"))
    return key, records, values, texts


def test_no_reference_value_on_any_surface(graded):
    key, records, values, texts = graded
    assert values and any(not r.tests[0].practice for r in records)
    assert any(not t.passed for r in records for t in r.tests), "no mistake failed a test"
    leaks = _leaks(texts, _shown_forms(values))
    assert not leaks, f"lesson {key}: reference values shown: {leaks[:10]}"


def test_no_table_answers_the_aux_loss(graded):
    """The attack: answers of zeros, then a table of every number its surfaces show.
    None of those numbers is within tolerance of a graded aux loss (or any output of a
    few values), so a resubmission from the table gains nothing."""
    key, records, values, texts = graded
    if key != "13":
        pytest.skip("the attack's lesson is 13")
    attack = next(r for r in records if r.student_id == "attack-aux-zeros")
    assert attack.parts["aux_loss"].score == 0.0
    mine = {w: t for w, t in texts.items() if "attack-aux-zeros" in w or "/" not in w}
    shown = {float(x) for text in mine.values() for x in NUMBER.findall(text)
             if _digits(x) >= 2}
    small = [v for v, size in values if size <= SMALL and abs(v) > 1e-6
             and v != round(v, 2)]
    assert small, "no small graded output to attack"
    hits = [(v, s) for v in small for s in shown if abs(s - v) <= 1e-4 * abs(v)]
    assert not hits, f"numbers on the attack's surfaces answer graded outputs: {hits[:5]}"
