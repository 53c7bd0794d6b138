"""grader/judge/standin.py: the trusted side's answers to stand-in call frames, and the
probes' stand-ins they answer (probekit.stand_in), gradients included, against the
solution run whole. The round itself is tested end to end (test_composite_cost.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from grader.judge import standin
from grader.inside import probekit
from grader.judge.reference import lesson_file, load_file

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "hidden_tests" / "13_moe"


@pytest.fixture(scope="module")
def lesson():
    sys.path.insert(0, str(TESTS))
    try:
        yield (lesson_file(TESTS, standin.FILE),
               load_file("standin_solution", ROOT / "solutions" / "13_moe.py"),
               load_file("standin_probes", TESTS / "probes.py"))
    finally:
        sys.path.remove(str(TESTS))


@pytest.fixture
def answered(lesson):
    """probekit's channel answered in-process by an Answerer on the solution, as the
    session does in a round; the frames it saw."""
    answers, solution, _ = lesson
    answerer = standin.Answerer(solution, answers.ANSWERS)
    seen = []

    def channel(frame):
        seen.append(frame)
        return answerer(frame)

    probekit.channel = channel
    yield seen
    probekit.channel = None


def test_the_layer_with_every_part_stood_in_is_the_reference(lesson, answered):
    """The child's module is another copy of the solution: its parts are replaced."""
    _, _, probes = lesson
    solution = load_file("standin_child", ROOT / "solutions" / "13_moe.py")
    torch.manual_seed(0)
    layer = solution.MOEFeedForward(12, 20, num_experts=4, num_experts_per_tok=2).double()
    x = torch.randn(2, 3, 12, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    ((y * y).sum() + layer.aux_loss).backward()
    want = (y.detach(), layer.aux_loss.detach(), x.grad.clone(),
            {n: p.grad.clone() for n, p in layer.named_parameters()})
    layer.zero_grad()
    x.grad = None
    kept = {name: getattr(solution, name) for name in probes.STAND_INS}
    try:
        for name, stand_in in probes.STAND_INS.items():
            setattr(solution, name, stand_in)
        stood = solution.MOEFeedForward(12, 20, num_experts=4, num_experts_per_tok=2).double()
        stood.load_state_dict(layer.state_dict())
        y = stood(x)
        ((y * y).sum() + stood.aux_loss).backward()
    finally:
        for name, value in kept.items():
            setattr(solution, name, value)
    assert {f["stand_in"] for f in answered} == set(probes.STAND_INS)
    assert any("backward" in f for f in answered)
    torch.testing.assert_close(y.detach(), want[0])
    torch.testing.assert_close(stood.aux_loss.detach(), want[1])
    torch.testing.assert_close(x.grad, want[2])
    for name, p in stood.named_parameters():
        torch.testing.assert_close(p.grad, want[3][name], msg=name)


@pytest.mark.parametrize("frame, said", [
    ({"stand_in": "nothing", "inputs": [], "given": {}}, "no stand-in named"),
    ({"stand_in": "route", "inputs": [torch.ones(2, 3), torch.ones(4, 3)],
      "given": {"k": 10**9}}, "between 1 and num_experts"),
    ({"stand_in": "load_balancing_loss", "inputs": [torch.ones(5, 4)],
      "given": {"topk_idx": torch.zeros(5, 1, dtype=torch.int64), "num_experts": 10**9,
                "coef": 1.0}}, "do not fit"),
    ({"stand_in": "dispatch", "inputs": [torch.ones(2, 3, 4), torch.ones(3, 1)],
      "given": {"topk_idx": torch.full((3, 1), 7)}}, "in range"),
    ({"stand_in": "route", "backward": 12345, "grads": []}, "names no forward call"),
    ({"stand_in": "route", "inputs": "x", "given": {}}, "a list of tensors"),
])
def test_what_does_not_fit_is_refused_with_a_reason(lesson, frame, said):
    answers, solution, _ = lesson
    reply = standin.Answerer(solution, answers.ANSWERS)(frame)
    assert reply["ok"] is False and said in reply["error"]


def test_with_no_channel_a_stand_in_raises_a_contract_error(lesson):
    probekit.channel = None
    with pytest.raises(probekit.ContractError, match="no request was being served"):
        probekit.stand_in("route", [torch.ones(2, 3)], k=1, norm=True)


def test_a_refused_call_raises_in_the_child(lesson):
    probekit.channel = lambda frame: {"ok": False, "error": "refused here"}
    try:
        with pytest.raises(probekit.ContractError, match="refused here"):
            probekit.stand_in("FeedForward", [torch.ones(2, 3)])
    finally:
        probekit.channel = None


def test_no_round_in_a_practice_run(monkeypatch):
    """`grader check` runs none (a student bundle has no solution to answer it with):
    the composite part is left as its tests graded it. The autograder zip's run does
    run one (tests/e2e/test_gradescope_layout.py)."""
    from grader.judge import runner

    monkeypatch.setattr(standin, "run", lambda *a, **k: pytest.fail("a round ran"))
    assert runner._stand_in_round(object(), object(), object(), no_round=True) == set()
