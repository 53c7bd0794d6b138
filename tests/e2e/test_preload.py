"""The run's probe inputs are given to the sandbox once: a submission's calls then
name a request by its key instead of carrying megabytes of the same tensors."""
from pathlib import Path

from grader import pool, runner
from grader.sandbox import bwrap
from grader.sandbox.session import Session
from grader.sandbox.slot import Sandbox

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "13_moe.py"


def test_preloaded_requests_are_named_not_sent(course, ctx13, monkeypatch, tmp_path):
    lesson = course.lesson("13")
    requests = pool.self_check(ctx13)
    assert len(requests) > 10 and all(set(r) == {"probe", "args"} for r in requests.values())
    sandbox = Sandbox(course.path(lesson.probes), bwrap.probe().reason is None,
                      tuple(lesson.preload))
    slot = None
    try:
        sandbox.preload(requests)
        assert sandbox.preloaded == frozenset(requests)
        slot = sandbox.slot()
        sent: list[tuple[str, int]] = []
        real = Session.call

        def spy(self, probe, args, where="", frame=None):
            sent.append((probe, len(frame)))
            return real(self, probe, args, where, frame)

        monkeypatch.setattr(Session, "call", spy)
        wrong = tmp_path / "13_moe.py"  # a wrong result still comes back through a key
        wrong.write_text(SOLUTION.read_text().replace(
            "scores = F.softmax(gate(x_flat), dim=-1)", "scores = F.softmax(gate(x_flat), dim=0)"))
        good = runner.grade(ctx13, runner.Submission("good", SOLUTION), slot)
        bad = runner.grade(ctx13, runner.Submission("bad", wrong), slot)
    finally:
        if slot is not None:
            slot.close()
        sandbox.close()
    assert good.score == good.max_score
    assert bad.parts["router"].score == 0 and bad.parts["ffn"].score == 2.0
    # every request goes as a key: a wrong layer is excused only by trusted code (the
    # solution with the router's established mistake), never by asking the student's
    # code anything beyond the graded requests
    assert bad.parts["moe"].score == bad.parts["moe"].max_score
    assert {probe for probe, _ in sent} <= {r["probe"] for r in requests.values()}
    assert sent and max(n for _, n in sent) < 300
