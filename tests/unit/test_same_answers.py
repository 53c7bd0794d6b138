"""Students answered alike are judged alike once: a failing check's structure and a
failing test's diagnosis are kept by the content they were computed from (a class's
copies of one mistake), never by who answered."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from grader.judge import compare, structure
from grader.judge.plugin import StudentCaller
from grader.sandbox.limits import StudentError


def test_a_failing_checks_structure_is_described_once_per_content(monkeypatch):
    calls = []
    real = structure.describe
    monkeypatch.setattr(structure, "describe", lambda *a: calls.append(1) or real(*a))
    kept: dict = {}
    ref = torch.arange(12.0).reshape(3, 4) + 1
    first = compare.described(kept, ref * 2, ref, 1e-6, 1e-6, {})
    assert first["kind"] == "factor" and len(calls) == 1
    first["kind"] = "changed by a caller"  # what is kept is not the caller's to change
    again = compare.described(kept, ref.clone() * 2, ref.clone(), 1e-6, 1e-6, {})
    assert again["kind"] == "factor" and len(calls) == 1
    assert compare.described(kept, -ref, ref, 1e-6, 1e-6, {})["kind"] == "sign"
    assert compare.described(kept, ref * 2, ref, 1e-6, 1e-3, {}) is not None
    assert len(calls) == 3  # other numbers, or another tolerance: described again


def test_a_cache_by_content_keeps_at_most_its_bound_dropping_the_oldest(monkeypatch):
    monkeypatch.setattr(compare, "KEPT", 2)
    kept: dict = {}
    for key in ("a", "b", "c"):
        compare.kept_by_content(kept, key, lambda key=key: [key])
    assert list(kept) == ["b", "c"]
    assert compare.kept_by_content(kept, "a", lambda: ["again"]) == ["again"]


class _Session:
    """Answers each probe with a given result, or raises a given error."""

    def __init__(self, answers: dict):
        self.answers, self.last_reply_bytes = answers, 0
        self.slot = SimpleNamespace(held={})

    def call(self, probe, args, where="", frame=None):
        answer = self.answers[probe]
        if isinstance(answer, StudentError):
            raise answer
        return {"y": answer.clone()}


def _served(answers: dict, asked=("a", "b")) -> str:
    ctx = SimpleNamespace(frames={}, expected={}, refs=SimpleNamespace(
        reference=SimpleNamespace(call=lambda probe, **args: {"y": torch.zeros(3)})))
    caller = StudentCaller(_Session(answers), ctx)
    caller.start("part (test)")
    for probe in asked:
        try:
            caller.call(probe, x=1)
        except StudentError:
            pass
    return caller.served_digest()


def test_what_a_test_was_answered_is_one_content_hash():
    y = torch.tensor([1.0, 2.0, 3.0])
    same = _served({"a": y, "b": y * 2})
    assert same == _served({"a": y.clone(), "b": y * 2})  # another student, alike
    assert same != _served({"a": y, "b": y * 3})
    assert same != _served({"a": y, "b": StudentError("exception", "boom")})
    assert same != _served({"a": y, "b": y * 2}, asked=("a",))  # another test's asks
