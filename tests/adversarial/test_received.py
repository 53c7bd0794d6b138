"""The trusted side trusts nothing it receives. A child that sends its own replies
(it patches the harness's `protocol.send` at import) tries lone surrogates, error
reports of megabytes, a 60M-element tensor and an extra tensor in every reply:
each costs the student its own tests with a clear message, the records stay
small and writable, and the trusted worker's peak memory stays within the
submission's byte budget.

The worker's peak is measured per student: VmHWM after grading it, with the
peak reset (`/proc/self/clear_refs`) just before.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SOLUTION, failed_messages, grade_all, hostile
from grader.pages.feedback import render_student
from grader.record import GradeRecord
from grader.judge.plugin import StudentCaller
from grader.inside.protocol import MAX_TEXT
from grader.sandbox.limits import Limits, StudentError
from grader.store import Store, write_atomic

MIB = 1 << 20
BUDGET = Limits().received_mb * MIB
OVER_BUDGET = "MiB of results a submission may send"

# Every reply the harness sends goes through `_rewrite(reply)` first.
REWRITE = '''
import sys as _sys
import torch as _torch
_f = _sys._getframe()
while not hasattr(_f.f_locals.get("self"), "protocol"):  # the child's harness
    _f = _f.f_back
_proto = _f.f_locals["self"].protocol
_send = _proto.send
def _patched(sock, obj, *nonce):
    _send(sock, _rewrite(obj), *nonce)
_proto.send = _patched
'''

SOURCES = {
    "warm-up": SOLUTION.read_text(),  # the run's first student pays for the reference
    "honest": SOLUTION.read_text(),
    "surrogate": hostile(dispatch='raise ValueError("lone \\udc80 surrogate")'),
    "4mb-errors": SOLUTION.read_text() + REWRITE + '''
def _rewrite(reply):
    if "error" in reply or "y" in (reply.get("result") or {}):
        return {"ok": False, "error": {"kind": "timeout", "type": "T" * 4_000_000,
                                       "message": "M" * 4_000_000, "traceback": "x"}}
    return reply
''',
    "600kb-errors": SOLUTION.read_text() + REWRITE + '''
def _rewrite(reply):
    if "y" in (reply.get("result") or {}):
        return {"ok": False, "error": {"kind": "grader", "type": "T" * 200_000,
                                       "message": "M" * 200_000, "traceback": "x" * 200_000}}
    return reply
''',
    "60m-tensor": SOLUTION.read_text() + REWRITE + '''
def _rewrite(reply):
    result = reply.get("result")
    if isinstance(result, dict):  # one tensor of 60M elements, in place of the first
        first = next(k for k, v in result.items() if isinstance(v, _torch.Tensor))
        return {**reply, "result": {**result, first: _torch.zeros(60_000_000)}}
    return reply
''',
    "extra-60mb": SOLUTION.read_text() + REWRITE + '''
_JUNK = _torch.zeros(15_000_000)
def _rewrite(reply):
    if isinstance(reply.get("result"), dict):
        return {**reply, "result": {**reply["result"], "junk": _JUNK}}
    return reply
''',
    "extra-8mb": SOLUTION.read_text() + REWRITE + '''
_JUNK = _torch.zeros(2_000_000)
def _rewrite(reply):
    if isinstance(reply.get("result"), dict):
        return {**reply, "result": {**reply["result"], "junk": _JUNK}}
    return reply
''',
}


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


@pytest.fixture(scope="module")
def graded(course, slot, tmp_path_factory) -> dict[str, tuple[dict, int]]:
    """{student: (record, the worker's peak memory while grading it, above its start)}"""
    root = tmp_path_factory.mktemp("received")
    out = {}
    for sid, source in SOURCES.items():
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        start = _status("VmRSS")
        record = grade_all(course, slot, root / sid, {sid: source})[sid]
        out[sid] = record, _status("VmHWM") - start
    print("\npeak worker memory above its start, per student (MiB):",
          {sid: round(peak / MIB, 1) for sid, (_, peak) in out.items()})
    return out


def record_of(graded, sid: str) -> dict:
    return graded[sid][0]


def test_lone_surrogate_is_kept_as_valid_text_and_written(graded, course, tmp_path):
    rec = record_of(graded, "surrogate")
    messages = failed_messages(rec, "dispatch")
    assert messages and all("\ufffd" in m for m in messages), messages[:2]
    json.dumps(rec, ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere
    typed = GradeRecord.from_json(rec)
    Store(tmp_path).save(typed, render_student(typed, course, "13"))  # used to kill the worker
    assert "lone \ufffd surrogate" in (tmp_path / "results" / "surrogate.json").read_text()


def test_write_atomic_survives_a_lone_surrogate(tmp_path):
    write_atomic(tmp_path / "f.json", '{"m": "a\udc80b"}')
    assert (tmp_path / "f.json").read_text() == '{"m": "a?b"}'


def test_4mb_error_reports_are_refused_with_a_message(graded):
    rec = record_of(graded, "4mb-errors")
    messages = failed_messages(rec)
    assert messages and all("a result whose JSON is" in m or OVER_BUDGET in m
                            for m in messages), messages[:2]
    assert len(json.dumps(rec)) < 1 * MIB


def test_long_error_strings_are_capped_and_kinds_are_the_graders(graded):
    rec = record_of(graded, "600kb-errors")
    failing = [t for t in rec["tests"] if t["outcome"] != "passed"]
    assert failing
    for t in failing:
        err = t["error"]
        assert err["kind"] == "exception"  # a child cannot claim another kind
        assert len(err["message"]) <= 2 * MAX_TEXT and len(err["traceback"]) <= 2 * MAX_TEXT
        assert len(t["message"]) <= 2 * MAX_TEXT
    assert len(json.dumps(rec)) < 2 * MIB


@pytest.mark.parametrize("sid", ["60m-tensor", "extra-60mb"])
def test_oversized_replies_are_refused_unread(graded, sid):
    rec, peak = graded[sid]
    messages = failed_messages(rec)
    assert len(messages) == len(rec["tests"]), messages[:2]  # every reply had the tensor
    assert all("a result may be at most" in m for m in messages), messages[:2]
    assert len(json.dumps(rec)) < 1 * MIB
    assert peak < graded["honest"][1] + 64 * MIB, peak / MIB


def test_what_a_submission_sends_is_capped_in_all(graded):
    rec, peak = graded["extra-8mb"]
    messages = failed_messages(rec)
    assert any(OVER_BUDGET in m for m in messages), messages[:2]
    assert peak < graded["honest"][1] + BUDGET + 32 * MIB, peak / MIB


def test_honest_is_unaffected(graded):
    assert failed_messages(record_of(graded, "honest")) == []


# -- StudentCaller keeps only what the reference's result says it may -------------

class _Session:
    """Stands in for a sandboxed session: answers with a given result."""

    def __init__(self, result: dict, reply_bytes: int):
        from types import SimpleNamespace
        self.result, self.last_reply_bytes = result, reply_bytes
        self.slot = SimpleNamespace(held={})  # its sandbox holds no request

    def call(self, probe, args, where="", frame=None):
        return self.result


class _Reference:
    def call(self, probe, **args):
        import torch
        return {"y": torch.zeros(4, 8), "grads": {"w": torch.zeros(8, 8)}}


def _context():
    """What a StudentCaller reads of its lesson context: caches and the reference."""
    from types import SimpleNamespace
    return SimpleNamespace(frames={}, expected={}, refs=SimpleNamespace(reference=_Reference()))


def test_caller_drops_keys_the_reference_lacks_and_copies_what_it_keeps():
    import torch
    reply = torch.zeros(300_000)  # one buffer, as a decoded reply is
    y, junk = reply[:32].view(4, 8), reply[32:]
    session = _Session({"y": y, "grads": {"w": torch.ones(8, 8), "b": torch.ones(8)},
                        "junk": junk}, reply_bytes=reply.nbytes)
    got = StudentCaller(session, _context()).call("p", a=1)
    assert set(got) == {"y", "grads"} and set(got["grads"]) == {"w", "b"}  # extras named
    assert got["y"].untyped_storage().nbytes() == 32 * 4  # not a view of the whole reply


def test_caller_refuses_a_value_far_larger_than_the_references():
    import torch
    session = _Session({"y": torch.zeros(1_000_000), "grads": {}}, reply_bytes=4_000_100)
    caller = StudentCaller(session, _context())
    with pytest.raises(StudentError, match="'y'.*far too large"):
        caller.call("p", a=1)
    with pytest.raises(StudentError):  # the verdict is cached like any other
        caller.call("p", a=1)
