"""An assembly lesson end to end (issue 57): lesson 13b graded in the sandbox for a
student whose earlier lessons are in their folders, with those lessons' stored
results written here as a run would have stored them (grading lessons 10-13 again
would only cost time: grader/judge/earlier.py reads the results, whoever wrote them).

kim: lesson 10 and 13 at full marks, no lesson-11 file, lesson 12 with its known
mistake `rotate_half_sign` (part apply at 0). The wiring parts keep full marks; the
own-code part runs kim's lessons 10, 12 (freqs, offset) and 13, stands in for lesson
11 and for apply, and the page says why, naming the lesson-12 mistake. That the
own-code part really runs a student's own file: tests/unit/test_assembly.py.

lee (no earlier files): RoPE on v in the Attention and a post-norm block, mistakes in
parts that hold one another: each is charged in its own part only; each part's box
names the line, and its smallest failing example runs beside lee's file and lessons
10-13's files (examples.py makes `model_parts` of them). max: an Attention
whose forward asks the grader's Attention stand-in for its answer, refused in the
self_attn part's requests.

Graded in the same run, code nobody here wrote:
- tests/fixtures/lesson13b/outside/hf_qwen3.py: the installed transformers' Qwen3
  attention, decoder layer and model (MiniMind's computation), wrapped into the
  lesson's calling convention; full marks.
- MiniMind upstream's model_minimind.py (jingyaogong/minimind at d65ef2c, Apache-2.0),
  with upstream_adapter.py.txt appended (constructors taking the lesson's config, the
  model's lm_head): full marks. Upstream's file is not kept in this repository (code
  fetched from elsewhere is not committed here): point MINIMIND_UPSTREAM at a copy of
  that commit's model/model_minimind.py (its SHA-256 is checked) to run it; without
  it the test is skipped and says so.
"""
from __future__ import annotations

import hashlib
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from grader import config
from grader.judge import runner
from grader.judge.context import LessonContext
from grader.pages import feedback
from grader.record import Diagnosis, GradeRecord, PartRecord
from grader.store import Store, dump, source_hash

from ..conftest import open_slot

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ROOT / "tests" / "fixtures" / "lesson13b" / "outside"
UPSTREAM_SHA256 = "47f124f5f386a8cd76b488b36ecc3e00fc43e3894cdb3ba602420188d9ba8860"
FULL = {"self_attn": 4.0, "block": 3.0, "model": 3.0, "own": 1.0}


def _upstream() -> str | None:
    path = os.environ.get("MINIMIND_UPSTREAM")
    if not path:
        return None
    data = Path(path).read_bytes()
    assert hashlib.sha256(data).hexdigest() == UPSTREAM_SHA256, \
        f"{path} is not model_minimind.py at d65ef2c"
    return data.decode() + (OUTSIDE / "upstream_adapter.py.txt").read_text(encoding="utf-8")


def _solution(name: str) -> str:
    return re.sub(r"^ *### (BEGIN|END) SOLUTION\n", "", (ROOT / "solutions" / name)
                  .read_text(encoding="utf-8"), flags=re.M)


def _mistaken(folder: str, name: str, mistake: str) -> str:
    text = _solution(name)
    found = yaml.safe_load((ROOT / "hidden_tests" / folder / "mistakes.yml").read_text("utf-8"))
    for edit in next(m for m in found if m["id"] == mistake)["edits"]:
        text = text.replace(edit["old"], edit["new"])
    return text


def _two(*mistakes: str) -> str:
    """The 13b solution carrying several of its known mistakes at once."""
    text = _solution("13b_assembly.py")
    found = yaml.safe_load((ROOT / "hidden_tests" / "13b_assembly" / "mistakes.yml")
                           .read_text("utf-8"))
    for m in (m for m in found if m["id"] in mistakes):
        for edit in m["edits"]:
            assert edit["old"] in text
            text = text.replace(edit["old"], edit["new"])
    return text


# The grader's Attention stand-in reached through the stand-ins' module and called with
# a proper request: it would answer the reference's output, but not in self_attn's.
ASKS_THE_STAND_IN = """

_stand_in = RMSNorm.forward.__globals__["stand_in"]
_init = Attention.__init__


def _kept(self, config):
    _init(self, config)
    self.cfg = config


def _asked(self, x, position_embeddings, past_key_value=None, use_cache=False,
           attention_mask=None):
    c = self.cfg
    cfg = {k: getattr(c, k) for k in (
        "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
        "hidden_act", "use_moe", "num_experts", "num_experts_per_tok", "norm_topk_prob",
        "router_aux_loss_coef", "rms_norm_eps")}
    weights = dict(self.named_parameters())
    past = list(past_key_value or ())
    out = _stand_in("Attention", [x, *position_embeddings, *past, *weights.values()],
                    config=cfg, names=list(weights), past=bool(past),
                    use_cache=bool(use_cache), attention_mask=attention_mask,
                    training=self.training)
    return out[0], (tuple(out[1:3]) if use_cache else None)


Attention.__init__ = _kept
Attention.forward = _asked
"""


def _stored(course: config.Course, key: str, sid: str, lost: dict, text: str) -> None:
    """A stored result of `key` for `sid`, made from the file `text` (its hash, as a
    run records it): full marks but in the parts `lost` names (part -> the diagnosis,
    or None)."""
    parts = {}
    for name, part in course.lesson(key).parts.items():
        diagnosis = lost.get(name)
        parts[name] = PartRecord(0.0 if name in lost else part.points, part.points, 0, 1,
                                 diagnosis)
    record = GradeRecord(sid, key, "graded", 0.0, 10.0, parts, [], source_hash=source_hash(text))
    store = Store(course.path(course.lesson(key).out))
    store.results_path.mkdir(parents=True, exist_ok=True)
    store.result_path(sid).write_text(dump(record.to_json()), encoding="utf-8")


@pytest.fixture(scope="module")
def graded(far_course, tmp_path_factory) -> tuple[dict, config.Course]:
    folder = tmp_path_factory.mktemp("assembly")
    data = yaml.safe_load(far_course.read_text(encoding="utf-8"))
    for key in ("10", "11", "12", "13", "13b"):
        data["lessons"][key]["submissions"] = str(folder / f"subs{key}")
    path = folder / "course.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), "utf-8")
    course = config.load(path)
    files = {"kim": {"10": _solution("10_rmsnorm.py"),
                     "12": _mistaken("12_rope", "12_rope.py", "rotate_half_sign"),
                     "13": _solution("13_moe.py")}}
    rope = Diagnosis("rotate_half_sign", {"en": "rotate_half has the minus sign on the "
                                          "wrong half", "zh": "rotate_half 的负号放错了一半"})
    subs = []
    for sid, lessons in files.items():
        for key, text in lessons.items():
            target = course.path(course.lesson(key).submissions) / sid
            target.mkdir(parents=True)
            (target / course.lesson(key).exercise).write_text(text, "utf-8")
            _stored(course, key, sid, {"apply": rope} if key == "12" else {}, text)
        own = folder / "subs13b" / sid
        own.mkdir(parents=True)
        (own / "13b_assembly.py").write_text(_solution("13b_assembly.py"), "utf-8")
        subs.append(runner.Submission(sid, own / "13b_assembly.py"))
    outside = {"hf_qwen3": (OUTSIDE / "hf_qwen3.py").read_text(encoding="utf-8"),
               "lee": _two("rope_on_v", "post_norm"),
               "max": _solution("13b_assembly.py") + ASKS_THE_STAND_IN}
    if (upstream := _upstream()) is not None:
        outside["minimind_upstream"] = upstream
    for sid, text in outside.items():  # no earlier files: every piece stood in for
        own = folder / "subs13b" / sid
        own.mkdir(parents=True)
        (own / "13b_assembly.py").write_text(text, "utf-8")
        subs.append(runner.Submission(sid, own / "13b_assembly.py"))
    ctx = LessonContext(course, "13b")
    slot = open_slot(course, "13b")
    out: dict = {}
    try:
        runner.grade_many(ctx, subs, slot, lambda r: out.__setitem__(r.student_id, r))
    finally:
        slot.close()
    return out, course


def test_a_lesson_12_mistake_is_not_charged_again(graded):
    records, course = graded
    kim = records["kim"]
    assert kim.status == "graded", kim.problem
    assert {p: r.score for p, r in kim.parts.items()} == FULL
    pieces = {p["name"]: p for p in kim.parts["own"].earlier["pieces"]}
    assert [n for n, p in pieces.items() if p["own"]] == [
        "RMSNorm", "precompute_freqs_cis", "rope_position_embeddings", "FeedForward",
        "MOEFeedForward"]
    assert pieces["attention"]["why"] == "no_file"
    assert kim.source_hash == source_hash(_solution("13b_assembly.py"))  # as 10-13's are
    assert pieces["apply_rotary_pos_emb"]["why"] == "lost"
    assert pieces["apply_rotary_pos_emb"]["parts"] == ["apply"]
    page = html.unescape(feedback.render_student(kim, course, "13b", "en"))
    assert "no file of yours for lesson 11 was found" in page
    assert "rotate_half has the minus sign on the wrong half" in page
    assert "charged in lesson 12 only, not again here" in page



@pytest.mark.parametrize("name", ["hf_qwen3", "minimind_upstream"])
def test_outside_code_of_minimind_s_computation_scores_full_marks(graded, name):
    records, _ = graded
    if name not in records:
        pytest.skip("MINIMIND_UPSTREAM names no copy of upstream's model_minimind.py")
    record = records[name]
    assert record.status == "graded", record.problem
    failing = [(t.name, t.message[:200]) for t in record.tests if not t.passed]
    assert {p: v.score for p, v in record.parts.items()} == FULL, failing


def test_mistakes_in_parts_that_hold_one_another_are_each_charged_once(graded):
    """The block is graded on the grader's Attention, the model on its blocks: lee's
    attention mistake costs the self_attn part only, the block's the block part only,
    and the model and own-code parts keep their points."""
    records, _ = graded
    lee = records["lee"]
    assert lee.status == "graded", lee.problem
    assert {p: r.score for p, r in lee.parts.items()} == {**FULL, "self_attn": 0.0,
                                                          "block": 0.0}
    assert lee.parts["self_attn"].diagnosis.id == "rope_on_v"
    assert lee.parts["block"].diagnosis.id == "post_norm"
    assert "Attention" in lee.parts["block"].earlier["wiring"]
    assert "MiniMindBlock" in lee.parts["model"].earlier["wiring"]


def test_the_attention_earns_nothing_by_calling_the_stand_in_for_itself(graded):
    """max's Attention returns what the grader's Attention stand-in answers: refused
    in the self_attn part (and in the own-code part, which runs max's own Attention);
    the block and model parts run on stand-ins of their own and keep their points."""
    records, _ = graded
    max_ = records["max"]
    scores = {p: r.score for p, r in max_.parts.items()}
    assert scores == {**FULL, "self_attn": 0.0, "own": 0.0}, scores
    said = [t.message for t in max_.tests if t.part == "self_attn"]
    assert said and all("answers in block_forward's requests only" in m for m in said), said


# lessons 10-13's files, as the smallest example imports them (examples.py's PIECES)
EARLIER_FILES = ("10_rmsnorm.py", "11_attention.py", "12_rope.py", "13_moe.py")


def _shown(snippet: str, output: str) -> object:
    """The value a snippet's comments show as the student's for `output` (theirs come
    first), read back with torch's constructors only."""
    line = next(x for x in snippet.splitlines() if x.startswith(f"#   {output} = "))
    return eval(line.removeprefix(f"#   {output} = "), {"torch": torch})  # noqa: S307 - ours


def test_a_wiring_mistake_names_its_line_and_shows_an_example_that_runs(graded, tmp_path):
    """As in lessons 10-13 (issue 57): each of lee's failing wiring parts gets the box
    naming the line of its mistake, en and zh, and a smallest failing example. Saved
    next to lee's file and lessons 10-13's files (a student's own; here the
    solutions), each runs, and prints the numbers it shows as lee's: the block's too,
    as its smallest input has one token at position 0, where RoPE (lee's attention
    mistake) changes nothing."""
    records, course = graded
    lee = records["lee"]
    text = _two("rope_on_v", "post_norm")
    lines = text.splitlines()
    edited = {"self_attn": next(i for i, x in enumerate(lines, 1)
                                if "xq, xv = apply_rotary_pos_emb" in x),
              "block": next(i for i, x in enumerate(lines, 1)
                            if x.strip() == "hidden_states, position_embeddings,")}
    pages = {lang: feedback.render_student(lee, course, "13b", lang) for lang in ("en", "zh")}
    for part, line in edited.items():
        where = lee.parts[part].where
        assert where and where["line"] <= line <= where["end"], (part, where)
        for lang, said in (("en", f"Line {where['line']} <code>"),
                           ("zh", f"第 {where['line']} 行 <code>")):
            assert said in pages[lang], (part, lang)
    assert set(lee.examples) == set(edited), lee.examples
    for lang in ("en", "zh"):
        assert html.escape(feedback.STRINGS[lang]["ex_model_parts"]) in pages[lang]
        assert html.escape(feedback.STRINGS[lang]["ex_own_attention"]) in pages[lang]
    for name in EARLIER_FILES:
        (tmp_path / name).write_text(_solution(name), encoding="utf-8")
    (tmp_path / "13b_assembly.py").write_text(text, encoding="utf-8")
    runner_py = ("import builtins, sys, torch\n"
                 "printed = []\n"
                 "builtins.print = lambda *a, **k: printed.extend(a)\n"
                 "exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'),"
                 " {'__name__': '__main__'})\n"
                 "torch.save(printed, sys.argv[2])\n")
    (tmp_path / "run.py").write_text(runner_py, encoding="utf-8")
    for part, snippet in lee.examples.items():
        (tmp_path / f"{part}.py").write_text(snippet, encoding="utf-8")
        done = subprocess.run([sys.executable, "run.py", f"{part}.py", f"{part}.pt"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        y, cache = torch.load(tmp_path / f"{part}.pt")
        assert torch.equal(y, _shown(snippet, "y")), part
        shown_cache = _shown(snippet, "cache")
        assert (cache is None) == (shown_cache is None), part
        if cache is not None:
            assert torch.equal(cache, shown_cache), part
