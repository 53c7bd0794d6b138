"""Issue 54's acceptance set: single-line mistakes written from the lessons, not from
the grader's catalogue (tests/fixtures/divergence/held_out.yml), each run in the
sandbox's child under the tracer as a graded submission is: its part, and lesson 13's
composite part `moe`, traced on the part's smallest failing example first, then on
the lesson's fresh inputs. Every page must name the edited line, and no box may name
another line: the one box that may is a raise's ("Line N raised …")."""
import pytest
import yaml

from grader.judge import divergence, smallest
from grader.judge.context import LessonContext
from grader.judge.divergence import tracing
from grader.judge.plugin import StudentCaller
from grader.pages import where
from grader.pages.feedback import STRINGS
from grader.sandbox.session import Session
from tests.conftest import ROOT, open_slot
from tests.e2e.test_divergence import named, traced_call

HELD_OUT = ROOT / "tests" / "fixtures" / "divergence" / "held_out.yml"
pytestmark = pytest.mark.slow


def entries() -> list[dict]:
    return yaml.safe_load(HELD_OUT.read_text(encoding="utf-8"))


def own_init(source: str) -> str:
    """FeedForward as many students write it: no `self.act_fn` line in __init__."""
    out = source.replace("        self.act_fn = ACT2FN[hidden_act]\n", "")
    return out.replace("self.act_fn(", "F.silu(")


def edited(solution: str, entry: dict) -> tuple[str, int]:
    """The solution with the entry's one line edited, and that line's number."""
    source = own_init(solution) if entry.get("layout") == "own_init" else solution
    lines = source.splitlines()
    at = [n for n, line in enumerate(lines, start=1) if entry["find"] in line]
    assert len(at) == 1, entry
    lines[at[0] - 1] = lines[at[0] - 1].replace(entry["find"], entry["new"])
    return "\n".join(lines) + "\n", at[0]


def test_the_set_is_big_enough_and_made_from_every_lesson():
    found = entries()
    assert len(found) >= 30
    assert {e["lesson"] for e in found} == {"10", "11", "12", "13"}



@pytest.mark.parametrize("lesson", ["10", "11", "12", "13"])
def test_every_page_names_the_edited_line_and_no_box_another(course, lesson):
    ctx = LessonContext(course, lesson)
    lessons = divergence.lesson_traces(ctx)
    composite, names = lessons.composite()
    info = course.lesson(lesson)
    slot = open_slot(course, lesson)
    missed, other = [], []
    try:
        for entry in (e for e in entries() if e["lesson"] == lesson):
            source, line = edited(ctx.refs.source, entry)
            parts = [entry["part"]] + ([composite] if composite and composite != entry["part"]
                                       else [])
            session = Session(slot, source, info.exercise, info.provides, course.limits(lesson))
            found = {}
            try:
                for part in parts:
                    example = smallest.examples(ctx.tests, ctx.refs.probes, [part],
                                                StudentCaller(session, ctx),
                                                ctx.refs.reference).get(part)
                    first = (example.probe, example.args) if example else None
                    w = divergence.where(traced_call(session), lessons, part, source, first)
                    if w is not None:
                        found[part] = w
            finally:
                session.close()
            found = tracing.upstream(found, list(found), source, composite, names)
            hit = False
            for part, w in found.items():
                first, raised = named(w)
                hit |= any(a <= line <= b for a, b in first + raised)
                other += [(entry["new"], part, a) for a, b in first if not a <= line <= b]
                for lang in ("en", "zh"):  # a sentence for each box, in both languages
                    assert len(where.boxes(w.to_json(), STRINGS[lang])) == len(first + raised) \
                        or w.kind == "gradient"
            if not hit:
                missed.append((entry["new"], {p: w.kind for p, w in found.items()}))
    finally:
        slot.close()
    print(f"lesson {lesson}: missed {missed}, another line {other}")
    assert not missed, missed
    assert not other, other
