"""Where a failing part's values first leave the reference's (grader/judge/divergence/),
on a corpus of single-line mistakes made in place in each lesson's solution
(tests/fixtures/divergence/<lesson>.yml, made by scripts/divergence_corpus.py: the
audit's mutants and mistakes students make), each run in the sandbox's child with
the tracer, as a graded submission is.

The page must name the edited line for every entry of each lesson's corpus, and no
box where the values differ another line, counted as the held-out set counts
(`named`): a box for the line that raised ("Line 42 raised …", top-k + 1 on an
example where K = E) names its line too, and may name another. Correct code of other
forms and code nobody here wrote get no line at all.
"""
import copy
import os
import re
from pathlib import Path

import pytest
import yaml

from grader.judge import divergence, runner, smallest, standin
from grader.record import Where
from grader.run.practice_output import outcome, print_outcome
from grader.judge.context import LessonContext
from grader.pages.feedback import STRINGS, render_student
from grader.pages import where
from grader.judge.plan import Submission
from grader.inside import protocol
from grader.judge.plugin import StudentCaller
from grader.sandbox.session import Session
from tests.conftest import ROOT, open_slot

CORPUS = ROOT / "tests" / "fixtures" / "divergence"
LESSONS = {"10": "10_rmsnorm", "11": "11_attention", "12": "12_rope", "13": "13_moe",
           "13b": "13b_assembly"}
# MiniMind upstream's model/model_minimind.py (jingyaogong/minimind, Apache-2.0) is not
# kept here (code fetched from elsewhere is not committed): MINIMIND_UPSTREAM names a copy
# (tests/e2e/test_assembly.py checks its commit); without it the upstream case is left out
UPSTREAM = os.environ.get("MINIMIND_UPSTREAM")


# Entries of a lesson's corpus whose page does not name the edited line, each with what
# it gets ("wrong": another line, "none": no line) and why; kept exact, so that a new
# miss fails (every lesson lists none: 13b's old cache returned is named since the tracer
# follows lists and tuples, its k left un-normalised since an assignment that leaves a
# name as it was is compared, `finding._kept`)
MISSED: dict[str, dict[str, tuple[str, str]]] = {}


def corpus(lesson: str) -> list[dict]:
    return yaml.safe_load((CORPUS / f"{lesson}.yml").read_text(encoding="utf-8"))


def edited(solution: str, entry: dict) -> str:
    lines = solution.splitlines()
    assert lines[entry["line"] - 1] == entry["old"], entry["id"]
    lines[entry["line"] - 1] = entry["new"]
    return "\n".join(lines) + "\n"


def named(w: Where) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The spans a finding's boxes name: where the values first differ, and a raise
    ("Line N raised …", the one box that may name another line than the edited one)."""
    first = [(w.line, w.end)] if w.line and w.kind != "raised" else []
    raised = [(w.raise_line, w.raise_end)] if w.raise_line else []
    return first, raised


def traced_call(session: Session):
    def call(probe: str, args: dict) -> object:
        frame = protocol.dumps({"probe": probe, "args": args, "trace": True})
        return session.call(probe, args, "tracing", frame=frame)
    return call


@pytest.mark.parametrize("lesson", list(LESSONS))
def test_the_corpus_is_big_enough_and_each_entry_edits_one_line(course, lesson):
    entries = corpus(lesson)
    assert len(entries) >= (30 if lesson == "13" else 10)
    solution = course.path(course.lesson(lesson).solution).read_text(encoding="utf-8")
    for entry in entries:
        changed = [a != b for a, b in zip(solution.splitlines(),
                                         edited(solution, entry).splitlines())]
        assert sum(changed) == 1
    assert any(e["id"].startswith("hand-") for e in entries)
    assert any(not e["id"].startswith("hand-") for e in entries)


@pytest.mark.parametrize("lesson", list(LESSONS))
def test_the_page_names_the_edited_line(course, lesson):
    """Each mistake runs in a sandboxed child under the tracer, first on its smallest
    failing example where the lesson has them (as a graded run does), then on the
    lesson's fresh inputs; the sentence shown names the statement holding the edited
    line (hit), another (wrong), or none. A gradient-only mistake (`backward`: every
    forward value is the reference's) must be named, as a gradient cut or addition."""
    ctx = LessonContext(course, lesson)
    lessons = divergence.lesson_traces(ctx)
    info = course.lesson(lesson)
    limits = course.limits(lesson)
    solution = ctx.refs.source
    slot = open_slot(course, lesson)
    hits, wrong, none, raised, on_example = [], [], [], [], 0
    backward: dict[str, str] = {}  # a gradient-only mistake's id -> the kind found
    try:
        for entry in corpus(lesson):
            source = edited(solution, entry)
            session = Session(slot, source, info.exercise, info.provides, limits)
            if info.builds_on:  # an assembly lesson's pieces, answered as a graded run does
                answering = standin.answerer(ctx.tests, ctx.refs.pieces,
                                             ctx.refs.stand_in_memo)
                session.stand_in = answering.answer if answering is not None else None
            try:
                example = smallest.examples(ctx.tests, ctx.refs.probes, [entry["part"]],
                                            StudentCaller(session, ctx),
                                            ctx.refs.reference).get(entry["part"])
                first = (example.probe, example.args) if example else None
                on_example += first is not None
                found = divergence.where(traced_call(session), lessons, entry["part"], source,
                                         first)
            finally:
                session.close()
            firsts, raises = named(found or Where("none"))
            if entry.get("raises"):  # its box names the line that raised, as a traceback
                assert found is not None and found.kind == "raised" and found.raise_line, \
                    (entry["id"], found)
                raised.append(entry["id"])
                continue
            if entry.get("backward"):
                backward[entry["id"]] = (found.kind if found and found.line and found.line
                                         <= entry["line"] <= found.end else "missed")
            if not firsts + raises:
                none.append(entry["id"])
                continue
            if any(not a <= entry["line"] <= b for a, b in firsts):
                wrong.append(entry["id"])
            elif any(a <= entry["line"] <= b for a, b in firsts + raises):
                hits.append(entry["id"])
            else:
                none.append(entry["id"])  # only a raise, on a later line: not the line
            line = (firsts + raises)[0][0]
            for lang, said in (("en", f"Line {line} "), ("zh", f"第 {line} 行")):
                assert where.sentence(found.to_json(), STRINGS[lang]).startswith(said)
    finally:
        slot.close()
    n = len(hits) + len(wrong) + len(none)
    print(f"lesson {lesson}: {n} mistakes ({on_example} traced on their smallest example "
          f"first), edited line named {len(hits) / n:.0%}, a wrong line {len(wrong) / n:.0%} "
          f"{wrong}, none {len(none) / n:.0%} {none}; {len(raised)} raising, each its "
          f"raise's box; gradient-only {len(backward)}: {backward}")
    if smallest.load(ctx.tests) is not None:
        assert on_example >= 0.9 * (n + len(raised))  # the examples are what is traced
    listed = MISSED.get(lesson, {})
    assert {i: ("wrong" if i in wrong else "none") for i in wrong + none if i in listed} \
        == {i: kind for i, (kind, _) in listed.items()}
    # none may newly miss (issue 54)
    assert not [i for i in wrong + none if i not in listed], (wrong, none)
    assert all(kind in ("cut", "added") for kind in backward.values()), backward
    if lesson in ("10", "11", "13"):  # the lessons that grade gradients
        assert len(backward) >= 3


# ---------------------------------------------------------------- whole grading runs

def _upstream_13(solution: str) -> str:
    """MiniMind's own FeedForward and MOEFeedForward (model/model_minimind.py), wrapped
    into the lesson's signatures; the parts upstream has no function for (route,
    dispatch, the loss) are the solution's."""
    text = Path(UPSTREAM or "").read_text(encoding="utf-8")
    classes = re.search(r"^class FeedForward\(nn\.Module\):.*?(?=^class MiniMindBlock)", text,
                        re.S | re.M).group(0)
    classes = classes.replace("class FeedForward(", "class UpstreamFeedForward(").replace(
        "class MOEFeedForward(", "class UpstreamMOEFeedForward(").replace(
        "[FeedForward(config", "[UpstreamFeedForward(config")
    functions = solution[solution.index("def route("):solution.index("class MOEFeedForward")]
    head = solution[:solution.index("class FeedForward")]
    return head + classes + '''
class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FeedForward(UpstreamFeedForward):
    def __init__(self, hidden_size, intermediate_size, hidden_act="silu"):
        super().__init__(Config(hidden_size=hidden_size, intermediate_size=intermediate_size,
                                hidden_act=hidden_act))


class MOEFeedForward(UpstreamMOEFeedForward):
    def __init__(self, hidden_size, intermediate_size, num_experts=4, num_experts_per_tok=1,
                 hidden_act="silu", norm_topk_prob=True, router_aux_loss_coef=5e-4):
        super().__init__(Config(hidden_size=hidden_size, moe_intermediate_size=intermediate_size,
                                num_experts=num_experts, num_experts_per_tok=num_experts_per_tok,
                                hidden_act=hidden_act, norm_topk_prob=norm_topk_prob,
                                router_aux_loss_coef=router_aux_loss_coef))


''' + functions


@pytest.fixture(scope="module")
def graded13(course, tmp_path_factory):
    """Lesson 13 graded whole (points, page, `grader check`): five mistakes of the
    corpus, the lesson's correct fixtures and MiniMind upstream."""
    ctx = LessonContext(course, "13")
    solution = ctx.refs.source
    sources = {e["id"]: edited(solution, e) for e in corpus("13")
               if e["id"] in ("hand-0", "hand-2", "hand-5", "hand-9", "hand-13")}
    for path in sorted((ROOT / "tests" / "fixtures" / "lesson13" / "correct").glob("*.py")):
        sources[f"correct-{path.stem}"] = path.read_text(encoding="utf-8")
    if UPSTREAM:
        sources["upstream"] = _upstream_13(solution)
    folder = tmp_path_factory.mktemp("divergence13")
    slot = open_slot(course, "13")
    records = {}
    try:
        for sid, source in sources.items():
            (folder / sid).mkdir()
            (folder / sid / "13_moe.py").write_text(source, encoding="utf-8")
            records[sid] = runner.grade(ctx, Submission(sid, folder / sid / "13_moe.py"), slot)
    finally:
        slot.close()
    return records


def test_each_failing_part_of_a_mistake_names_its_line_on_the_page_and_in_check(
        course, graded13, capsys):
    by_id = {e["id"]: e for e in corpus("13")}
    mistakes = {sid: r for sid, r in graded13.items() if sid in by_id}
    assert len(mistakes) == 5
    for sid, record in mistakes.items():
        line = by_id[sid]["line"]
        failing = {t.part for t in record.tests if not t.passed}
        assert by_id[sid]["part"] in failing
        for name, part in record.parts.items():
            assert (part.where is not None) <= (name in failing)  # never on a passing part
        where = record.parts[by_id[sid]["part"]].where
        assert where["line"] <= line <= where["end"], (sid, where)
        for lang, said in (("en", f"Line {where['line']} <code>"),
                           ("zh", f"第 {where['line']} 行 <code>")):
            page = render_student(record, course, "13", lang)
            assert said in page and STRINGS[lang]["where_head"] in page
        report = outcome(record, course, "13", [])
        print_outcome(record, report, course, "13")
        assert f"where: Line {where['line']} `" in capsys.readouterr().out


def test_no_line_on_correct_code_nor_upstream(graded13):
    others = {sid: r for sid, r in graded13.items() if not sid.startswith("hand-")}
    assert any(sid.startswith("correct-") for sid in others)
    for sid, record in others.items():
        named = {name: p.where for name, p in record.parts.items()
                 if p.where and p.where.get("line")}
        assert not named, (sid, named)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_pages_in_chromium(course, graded13, tmp_path, language):
    """The five mistakes' pages, and one whose trace says hostile things (markup in
    the quoted code and values), open in Chromium without a problem; the hostile
    text shows as text."""
    from tests.e2e.test_browser import CHROMIUM, load_and_shoot
    if not Path(CHROMIUM).exists():
        pytest.skip("headless Chromium is not installed")
    artifacts = Path(os.environ.get("TEST_ARTIFACTS") or tmp_path / "artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    hostile = next(r for sid, r in graded13.items() if sid == "hand-9")
    hostile = copy.deepcopy(hostile)
    hostile.parts["dispatch"].where = {
        "kind": "line", "line": 58, "end": 58, "code": "</p><script>alert(1)</script>",
        "name": "weight", "matched": ["<b>x</b>"], "got": "<img src=x>", "ref": "[1]"}
    pages = {sid: r for sid, r in graded13.items() if sid.startswith("hand-")}
    pages["hostile"] = hostile
    for sid, record in pages.items():
        html = render_student(record, course, "13", language)
        if sid == "hostile":
            assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html
        page = tmp_path / f"{sid}-{language}.html"
        page.write_text(html, encoding="utf-8")
        png = artifacts / f"divergence-{sid}-{language}.png"
        assert load_and_shoot(page, png, tmp_path / f"profile-{sid}") == []
        assert png.stat().st_size > 10_000


def test_a_trace_never_changes_a_verdict_nor_shows_on_a_passing_part(course, monkeypatch,
                                                                     tmp_path):
    """Grading with a trace that claims a line for every part gives the same points,
    and the claim is kept on the failing parts only."""
    ctx = LessonContext(course, "13")
    entry = next(e for e in corpus("13") if e["id"] == "hand-9")  # dispatch's weight
    path = tmp_path / "s" / "13_moe.py"
    path.parent.mkdir()
    path.write_text(edited(ctx.refs.source, entry), encoding="utf-8")
    slot = open_slot(course, "13")
    try:
        honest = runner.grade(ctx, Submission("s", path), slot)
        claim = {"kind": "line", "line": 1, "end": 1, "code": "x", "name": "x",
                 "matched": [], "got": "1", "ref": "2"}
        monkeypatch.setattr(divergence, "trace_failing",
                            lambda ctx, session, raw, first=None, compute=True: (
                                {p: claim for p in ctx.lesson.parts}, 0.0))
        lying = runner.grade(ctx, Submission("s", path), slot)
    finally:
        slot.close()
    assert lying.score == honest.score < honest.max_score
    failing = {t.part for t in lying.tests if not t.passed}
    assert "dispatch" in failing and "ffn" not in failing
    for name, part in lying.parts.items():
        assert (part.score, part.passed) == (honest.parts[name].score,
                                             honest.parts[name].passed)
        assert (part.where == claim) == (name in failing)


def test_a_trace_runs_apart_from_the_graded_session_and_leaves_the_slot_clean(
        course, monkeypatch, tmp_path):
    """A submission whose child dies in every failing part: its record (output, status,
    messages) is the same traced or not, and the slot then grades the solution to
    full marks. A trace that restarted the graded session's dead child imported the
    submission again: one more print in the student's output (it goes on in a child of
    its own once the graded one is gone)."""
    ctx = LessonContext(course, "13")
    path = tmp_path / "s" / "13_moe.py"
    path.parent.mkdir()
    path.write_text(ctx.refs.source + (
        "\nimport os as _os\nprint('IMPORTED-MARK')\n\n\ndef _die(*args, **kwargs):\n"
        "    _os._exit(3)\n\n\nroute = dispatch = load_balancing_loss = _die\n"),
        encoding="utf-8")
    good = tmp_path / "good" / "13_moe.py"
    good.parent.mkdir()
    good.write_text(ctx.refs.source, encoding="utf-8")
    slot = open_slot(course, "13")
    try:
        traced = runner.grade(ctx, Submission("s", path), slot)
        solution = runner.grade(ctx, Submission("good", good), slot)
        monkeypatch.setattr(divergence, "trace_failing", lambda ctx, session, raw, first=None, compute=True: ({}, 0.0))
        plain = runner.grade(ctx, Submission("s", path), slot)
    finally:
        slot.close()
    assert "IMPORTED-MARK" in plain.output
    assert traced.output.count("IMPORTED-MARK") == plain.output.count("IMPORTED-MARK")
    assert (traced.status, traced.problem, traced.score) == (plain.status, plain.problem,
                                                             plain.score)
    assert [t.message for t in traced.tests] == [t.message for t in plain.tests]
    assert solution.score == solution.max_score
