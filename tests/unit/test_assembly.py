"""An assembly lesson (13b): its pieces stood in for in every request (stand_ins.py's
ALWAYS, course.yml's builds_on). The trusted side's `model_parts` is built of the
earlier lessons' solutions; its probes answer the stand-ins in-process with the same
answers the child gets; the model on stood-in pieces is the reference model."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from grader.config import ConfigError, load
from grader.inside import probekit
from grader.judge import earlier, standin
from grader.judge.context import LessonContext
from grader.judge.reference import load_module

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "hidden_tests" / "13b_assembly"


@pytest.fixture(scope="module")
def refs():
    """Lesson 13b's references as a run loads them (LessonContext.refs)."""
    sys.path.insert(0, str(TESTS))
    try:
        yield LessonContext(load(ROOT / "course.yml"), "13b").refs
    finally:
        sys.path.remove(str(TESTS))


def test_the_trusted_model_parts_are_the_earlier_solutions(refs):
    pieces = refs.pieces
    assert pieces is not None and pieces.RMSNorm.__module__ == "_piece_10"
    assert pieces.MOEFeedForward.__module__ == "_piece_13"
    assert standin.always(TESTS) is not None
    assert standin.always(ROOT / "hidden_tests" / "10_rmsnorm") is None  # none there


def test_a_name_builds_on_lists_must_be_in_its_lessons_solution(tmp_path):
    with pytest.raises(AttributeError, match="no RoPE"):
        standin.pieces({"10": (ROOT / "solutions" / "10_rmsnorm.py", {"RoPE": ["norm"]})})


def test_builds_on_names_other_lessons_only(tmp_path):
    text = (ROOT / "course.yml").read_text(encoding="utf-8").replace(
        '      "10": {RMSNorm: [norm]}\n', '      "9": {RMSNorm: [norm]}\n')
    (tmp_path / "course.yml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="builds_on names '9'"):
        load(tmp_path / "course.yml")


def test_the_reference_model_on_stand_ins_is_the_model_on_the_earlier_solutions(refs):
    """The trusted side's probe (stand-ins answered in-process) against the same model
    wired to lessons 10-13's solutions directly: the stand-ins change nothing."""
    from _asm_common import config, model_args

    args = model_args(7, tuple(config(moe=True).items()), "float64", 2, 3, 2, True, True)
    got = refs.reference.call("model_forward", **args)
    source = (ROOT / "solutions" / "13b_assembly.py").read_text(encoding="utf-8")
    sys.modules["model_parts"], stood_in = refs.pieces, sys.modules["model_parts"]
    try:
        direct = load_module("_direct_13b", source, "solution")
    finally:
        sys.modules["model_parts"] = stood_in
    want = refs.probes._model(direct, **args)  # its own blocks, no stand-in
    assert torch.equal(got["logits"], want["logits"]) and torch.equal(got["aux"], want["aux"])
    assert all(torch.allclose(got["grads"][n], g, rtol=0, atol=1e-12)
               for n, g in want["grads"].items())


def test_outside_the_trusted_side_a_stand_in_is_refused(refs):
    """The child's pieces ask the channel; with none, a ContractError (no local
    answer is ever kept in the probes module or probekit)."""
    assert probekit.channel is None
    with pytest.raises(probekit.ContractError, match="no request"):
        refs.probes.repeat_kv(torch.zeros(1, 2, 1, 4), 2)


def test_no_part_earns_its_points_by_calling_the_stand_in_for_itself(refs):
    """The reference Attention answers in the block part's requests only, the reference
    MiniMindBlock in the model part's only (stand_ins.py's NESTED), and nothing stands
    in for the model: the self_attn, block and own-code parts get no stand-in for what
    they grade."""
    lesson = standin.always(TESTS)
    answer = standin.answerer(TESTS, refs.pieces)
    assert "CourseMiniMindForCausalLM" not in lesson.ANSWERS and answer is not None
    for name, allowed in (("Attention", "block_forward"), ("MiniMindBlock", "model_forward")):
        for probe in ("attention_forward", "block_forward", "model_forward", "own_model"):
            said = answer({"stand_in": name, "inputs": [], "given": {}}, probe)
            if probe == allowed:  # its inputs are wrong: refused for them, not for where
                assert "requests only" not in said["error"]
            else:
                assert said == {"ok": False, "error": f"the stand-in for {name} answers in "
                                f"{allowed}'s requests only"}


def test_a_piece_rests_on_parts_of_its_lesson(tmp_path):
    text = (ROOT / "course.yml").read_text(encoding="utf-8").replace(
        '      "10": {RMSNorm: [norm]}\n', '      "10": {RMSNorm: [normalise]}\n')
    (tmp_path / "course.yml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\['normalise'\] are not its parts"):
        load(tmp_path / "course.yml")


def _own(refs, rmsnorm: str) -> dict:
    """The own-code probe as the child runs it (the student's module is named
    "submission" there), on a lesson-10 file `rmsnorm`, the rest stood in for."""
    from _asm_common import config, model_args

    source = (ROOT / "solutions" / "13b_assembly.py").read_text(encoding="utf-8")
    child = load_module("submission", source, "solution")
    args = model_args(9, tuple(config().items()), "float32", 1, 3, 0, True, False)
    trusted, refs.probes.TRUSTED = refs.probes.TRUSTED, None  # the child's copy has none
    probekit.channel = standin.Answerer(refs.pieces, standin.always(TESTS).ANSWERS)
    try:
        return refs.probes.own_model(child, own={"RMSNorm": "10"}, sources={"10": rmsnorm},
                                     **args)
    finally:
        probekit.channel, refs.probes.TRUSTED = None, trusted


def test_the_own_code_part_runs_the_students_own_file(refs):
    """A wrong RMSNorm in the student's lesson-10 file changes the own-code result
    (the wiring parts never run it); a right one gives the reference's."""
    from _asm_common import config, model_args

    right = (ROOT / "solutions" / "10_rmsnorm.py").read_text(encoding="utf-8")
    wrong = right.replace("return self.weight * normed.type_as(x)",
                          "return normed.type_as(x)")  # the weight left out
    assert wrong != right
    want = refs.reference.call("model_forward", **model_args(
        9, tuple(config().items()), "float32", 1, 3, 0, True, False))["logits"]
    assert torch.allclose(_own(refs, right)["logits"], want, atol=1e-5)
    assert not torch.allclose(_own(refs, wrong)["logits"], want, atol=1e-2)


def test_the_trusted_side_never_runs_an_earlier_file(refs):
    """The reference asked the own-code probe (StudentCaller sizes every reply by the
    reference's) computes the plain model: the student's text is not run."""
    from _asm_common import config, model_args

    args = model_args(9, tuple(config().items()), "float32", 1, 3, 0, True, False)
    got = refs.reference.call("own_model", own={"RMSNorm": "10"},
                              sources={"10": "raise SystemExit('ran')"}, **args)
    assert torch.equal(got["logits"], refs.reference.call("model_forward", **args)["logits"])


def _counted_rms() -> tuple[list, object]:
    """The lesson's RMSNorm answer, counting each time it is computed."""
    computed: list = []
    rms = standin.always(TESTS).ANSWERS["RMSNorm"]

    def counted(m, inputs, given):
        computed.append(1)
        return rms(m, inputs, given)
    return computed, counted


def test_a_run_computes_each_stand_in_answer_once_gradients_included(refs):
    """Two sessions' answerers sharing the run's memo: the second call of the same
    content is not computed again, and its backward (the graph made then) gives the
    first's gradients."""
    computed, counted = _counted_rms()
    memo: dict = {}
    x, w = torch.randn(2, 3, 8, dtype=torch.float64), torch.rand(8, dtype=torch.float64)
    frame = {"stand_in": "RMSNorm", "inputs": [x, w], "given": {"eps": 1e-6}}
    grads = {"stand_in": "RMSNorm", "backward": 1, "grads": [torch.ones(2, 3, 8,
                                                                       dtype=torch.float64)]}
    said = []
    for _ in range(2):
        answerer = standin.Answerer(refs.pieces, {"RMSNorm": counted}, memo=memo)
        said.append((answerer(frame), answerer(grads)))
    (first, first_back), (second, second_back) = said
    assert len(computed) == 1
    assert torch.equal(first["outputs"][0], second["outputs"][0])
    assert all(torch.equal(a, b) for a, b in zip(first_back["grads"], second_back["grads"]))
    third = standin.Answerer(refs.pieces, {"RMSNorm": counted}, memo=memo)
    third(frame)  # from the memo; a backward it has not seen makes the graph again
    twice = third({**grads, "grads": [2 * grads["grads"][0]]})["grads"]
    assert len(computed) == 2
    assert torch.allclose(twice[0], 2 * first_back["grads"][0])


# the questions on fresh inputs (questions.py): mutant -> (the solution's text, the
# student's, the part asked, the finding)
QUESTION_MUTANTS = {
    "attention_ignores_padding": (
        "            scores += (1.0 - attention_mask.unsqueeze(1).unsqueeze(2)) * -1e9\n",
        "            pass\n", "self_attn",
        {"kind": "ignores", "function": "Attention", "argument": "attention_mask"}),
    "attention_not_causal": (
        "device=scores.device).triu(1)", "device=scores.device).triu(seq_len)", "self_attn",
        {"kind": "earlier", "function": "Attention"}),
    "attention_float32": (
        "return self.o_proj(output), past_kv", "return self.o_proj(output).float(), past_kv",
        "self_attn", {"kind": "dtype", "function": "Attention", "output": "y",
                      "dtype": "float32"}),
    "block_ignores_padding": (
        "past_key_value, use_cache, attention_mask)", "past_key_value, use_cache, None)",
        "block", {"kind": "ignores", "function": "MiniMindBlock",
                  "argument": "attention_mask"}),
    "model_ignores_cache": (
        "past_key_value=past_key_value,", "past_key_value=None,", "model",
        {"kind": "ignores", "function": "CourseMiniMindForCausalLM",
         "argument": "past_key_values"}),
    "model_ignores_padding": (
        "use_cache=use_cache, attention_mask=attention_mask)",
        "use_cache=use_cache, attention_mask=None)", "model",
        {"kind": "ignores", "function": "CourseMiniMindForCausalLM",
         "argument": "attention_mask"}),
}


@pytest.mark.parametrize("name", list(QUESTION_MUTANTS))
def test_each_question_finds_its_wiring_mistake(refs, name):
    """Lesson 13b's questions on fresh inputs find the mistake each is about, and say
    it in one sentence in each language."""
    from grader.judge import questions
    from grader.judge.reference import Caller
    from grader.pages import explain, feedback

    old, new, part, finding = QUESTION_MUTANTS[name]
    assert refs.source.count(old) == 1, name
    module = load_module(f"_q13b_{name}", refs.source.replace(old, new), "solution")
    found = questions.ask(TESTS, part, Caller(module, refs.probes), refs.reference)
    assert finding in found, found
    for lang in ("en", "zh"):
        assert explain.answer_text(finding, feedback.STRINGS[lang])


def test_the_solution_and_the_correct_variants_get_no_answer(refs):
    from grader.judge import questions
    from grader.judge.reference import Caller

    students = [("solution", refs.reference.twin())]
    for path in sorted((ROOT / "tests" / "fixtures" / "lesson13b" / "correct").glob("*.py")):
        module = load_module(f"_q13b_correct_{path.stem}", path.read_text(encoding="utf-8"),
                             str(path))
        students.append((path.stem, Caller(module, refs.probes)))
    assert len(students) >= 4
    for name, caller in students:
        for part in questions.load(TESTS).QUESTIONS:
            assert questions.ask(TESTS, part, caller, refs.reference) == [], (name, part)


def _practice(refs, probe: str, args: dict, pieces: dict) -> dict:
    """A practice probe as the child runs it in a student bundle: the student's own
    earlier files (`pieces`, Earlier.practice) in place of the stand-ins, and nothing
    to answer a stand-in (no channel, no TRUSTED)."""
    source = (ROOT / "solutions" / "13b_assembly.py").read_text(encoding="utf-8")
    child = load_module("submission", source, "solution")
    trusted, refs.probes.TRUSTED = refs.probes.TRUSTED, None
    try:
        return getattr(refs.probes, probe)(child, pieces=pieces, **args)
    finally:
        refs.probes.TRUSTED = trusted


def test_a_bundle_s_practice_run_is_the_assembly_on_the_students_own_files(refs, tmp_path):
    """Where nothing answers a stand-in (a student bundle), the practice probes run the
    student's own lesson files found beside theirs (earlier.beside): on the earlier
    solutions they give the reference's block, gradients included; a wrong lesson-10
    file changes it; a missing lesson-13 file is named where its piece is called."""
    from _asm_common import config, layer_args

    course = load(ROOT / "course.yml")
    for key in ("10", "11", "12", "13"):
        name = course.lesson(key).exercise
        (tmp_path / name).write_text((ROOT / "solutions" / name).read_text(encoding="utf-8"))
    args = layer_args(10_300, tuple(config().items()), "float32", "block", 1, 3, 0, True,
                      False, True)
    want = refs.reference.call("block_forward", **args)
    found = earlier.beside(course, "13b", tmp_path)
    assert found.alone and set(found.files) == {"10", "11", "12", "13"}
    got = _practice(refs, "block_forward", args, found.practice())
    assert torch.allclose(got["y"], want["y"], atol=1e-6)
    assert torch.allclose(got["x_grad"], want["x_grad"], atol=1e-6)

    ten = tmp_path / "10_rmsnorm.py"
    ten.write_text(ten.read_text().replace("return self.weight * normed.type_as(x)",
                                           "return normed.type_as(x)"))  # the weight left out
    got = _practice(refs, "block_forward", args, earlier.beside(course, "13b", tmp_path)
                    .practice())
    assert not torch.allclose(got["y"], want["y"], atol=1e-2)

    (tmp_path / "13_moe.py").unlink()
    found = earlier.beside(course, "13b", tmp_path)
    assert [p.name for p in found.pieces if not p.own] == ["FeedForward", "MOEFeedForward"]
    with pytest.raises(probekit.ContractError, match="FeedForward comes from your lesson "
                       "13 file, and none was found beside this one"):
        _practice(refs, "block_forward", args, found.practice())


def test_an_answer_from_the_memo_is_sent_as_packed_its_frame_not_decoded(refs, monkeypatch):
    """A call frame answered before (by its bytes) is answered again without decoding
    its tensors and with the first answer's bytes; its backward is found by the
    forward and the gradients, whatever its call number, and computed once."""
    from grader.inside import protocol

    computed, counted = _counted_rms()
    memo: dict = {}
    x, w = torch.randn(2, 3, 8, dtype=torch.float64), torch.rand(8, dtype=torch.float64)
    frame = {"stand_in": "RMSNorm", "inputs": [x, w], "given": {"eps": 1e-6}}
    upstream = torch.ones(2, 3, 8, dtype=torch.float64)
    first = standin.Answerer(refs.pieces, {"RMSNorm": counted}, memo=memo)
    said = first(frame)
    grads = first({"stand_in": "RMSNorm", "backward": said["call"], "grads": [upstream]})
    second = standin.Answerer(refs.pieces, {"RMSNorm": counted}, memo=memo)
    second({**frame, "given": {"eps": 1e-5}})  # another call first: call numbers differ
    sent = protocol.split(protocol.dumps(frame))
    monkeypatch.setattr(protocol.Frame, "value", lambda self: pytest.fail("decoded"))
    sent_back = b"".join(second.answer(sent))
    monkeypatch.undo()
    again = protocol.loads(sent_back)
    assert again["call"] != said["call"] and len(computed) == 2
    assert torch.equal(again["outputs"][0], said["outputs"][0])
    back = second.answer(protocol.split(protocol.dumps(
        {"stand_in": "RMSNorm", "backward": again["call"], "grads": [upstream]})))
    assert len(computed) == 2
    assert all(torch.equal(a, b) for a, b in zip(protocol.loads(b"".join(back))["grads"],
                                                 grads["grads"]))


def test_the_memo_answers_a_nested_stand_in_in_its_own_part_only(refs):
    """An Attention answer kept for the block part's requests (the reference's, in the
    run's memo) is refused in the self_attn part's: `only` is asked before the memo."""
    from _asm_common import config, layer_args

    memo: dict = {}
    frames = []
    lesson = standin.always(TESTS)

    def channel(frame):
        frames.append(frame)
        return standin.Answerer(refs.pieces, lesson.ANSWERS, memo=memo,
                                only=standin.only(lesson))(frame, "block_forward")

    args = layer_args(300, tuple(config().items()), "float32", "block", 1, 3, 0, False,
                      False, True, grads=False)
    with probekit.answered_by(channel):
        refs.probes.block_forward.__wrapped__(refs.reference.module, **args)
    asked = [f for f in frames if f["stand_in"] == "Attention"]
    assert asked and memo
    answer = standin.Answerer(refs.pieces, lesson.ANSWERS, memo=memo, only=standin.only(lesson))
    for probe in ("attention_forward", "own_model"):
        assert answer(asked[0], probe) == {
            "ok": False, "error": "the stand-in for Attention answers in block_forward's "
                                  "requests only"}
    assert answer(asked[0], "block_forward")["ok"]
