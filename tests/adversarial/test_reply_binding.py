"""Every reply is bound to its request: each request carries a fresh nonce that its
reply must echo. A fork that carries on into the harness ends silently there (so a
correct file forked at import still gets its marks); a second writer (a thread that
found the socket, a reply sent twice) is the student's clear protocol error, and
never a verdict shifted onto another test.

Each holds whether the child is sent a request's inputs or asked for one of the graded
requests its sandbox holds by index (`held`, as a class's run asks): the reply is the
answer to the request the trusted side sent, whatever the child claims.

Scores are compared with the solution graded in the same run, so the checks hold
whatever the hidden tests' points are.
"""
from __future__ import annotations

import pytest

from conftest import (ONE_PROCESS, SOLUTION, alone, context, failed_messages, grade_all, hostile,
                      wait_no_processes)

WRONG_REQUEST = "answered for another request"

FIND_SOCKET = '''
import os, socket, stat
def _data_socket():
    """The channel to the trusted side: the only socket the child holds."""
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return socket.socket(fileno=fd)
        except OSError:
            pass
'''

SOURCES = {
    "honest": SOLUTION.read_text(),
    # Both processes carry on after the fork: the copy returns into the harness.
    "fork-at-import": SOLUTION.read_text() + "\n\nimport os\nos.fork()\n",
    # The copy returns into the harness only after the original has started serving.
    "late-fork-at-import": SOLUTION.read_text() + (
        "\n\nimport os, time\nif os.fork() == 0:\n    time.sleep(0.5)\n"),
    # A fork inside a graded function (once per process: each copy stays a zombie
    # until the child ends, and RLIMIT_NPROC counts zombies).
    "fork-in-dispatch": hostile(at_import="_forked = []", dispatch='''
        import os
        if not _forked:
            _forked.append(os.fork())
    '''),
    # A thread writes a well-formed reply with a guessed nonce before the real one.
    "forged-nonce": hostile(at_import=FIND_SOCKET, dispatch='''
        import json, struct, threading
        def _forge():
            head = json.dumps({"v": {"ok": True, "result": {"y": None}}, "t": []}).encode()
            head += b" " * (-(4 + len(head)) % 8)
            body = struct.pack(">I", len(head)) + head
            for guess in (0, 1, 2):
                _data_socket().sendall(struct.pack(">QQ", len(body), guess) + body)
        worker = threading.Thread(target=_forge)
        worker.start()
        worker.join()
    '''),
    # Every reply sent twice: the second answers no request.
    "double-reply": SOLUTION.read_text() + '''

import sys as _sys
_f = _sys._getframe()
while not hasattr(_f.f_locals.get("self"), "protocol"):  # the child's harness
    _f = _f.f_back
_proto = _f.f_locals["self"].protocol
_send = _proto.send
def _twice(sock, obj, nonce=0):
    _send(sock, obj, nonce)
    _send(sock, obj, nonce)
_proto.send = _twice
''',
    # Every reply carries the nonce of the child's first request (its import): an
    # answer claimed for an earlier request.
    "stale-nonce": SOLUTION.read_text() + '''

import sys as _sys
_f = _sys._getframe()
while not hasattr(_f.f_locals.get("self"), "protocol"):  # the child's harness
    _f = _f.f_back
_proto = _f.f_locals["self"].protocol
_send, _first = _proto.send, []
def _stale(sock, obj, nonce=0):
    _first.append(nonce)
    _send(sock, obj, _first[0])
_proto.send = _stale
''',
}


@pytest.fixture(scope="module", params=["sent", "held"])
def slot_of(request):
    """The slot whose children are sent each request, or asked for it by index."""
    slot = request.getfixturevalue("held_slot" if request.param == "held" else "slot")
    assert bool(slot.held) == (request.param == "held")
    return slot


@pytest.fixture(scope="module")
def records(course, slot_of, tmp_path_factory):
    return grade_all(course, slot_of, tmp_path_factory.mktemp("binding"), SOURCES)


def outcomes(record: dict) -> dict[str, str]:
    return {t["name"]: t["outcome"] for t in record["tests"]}


def test_honest_baseline(records):
    assert records["honest"]["status"] == "graded"
    assert failed_messages(records["honest"]) == []


@pytest.mark.parametrize("sid", ["fork-at-import", "late-fork-at-import", "fork-in-dispatch"])
def test_fork_that_carries_on_scores_like_the_solution(records, slot_of, sid):
    rec = records[sid]
    if alone(slot_of):  # no second process at all: the fork is refused, with the reason
        said = [rec["problem"] or "", *failed_messages(rec)]
        assert any(ONE_PROCESS in m for m in said), said[:3]
        assert rec["score"] < records["honest"]["score"]
        return
    assert failed_messages(rec) == [], failed_messages(rec)[:3]
    assert (rec["score"], rec["status"]) == (records["honest"]["score"], "graded")
    assert wait_no_processes(slot_of) == []


def test_forged_nonce_costs_its_part_with_a_clear_message(records):
    rec, honest = records["forged-nonce"], records["honest"]
    assert rec["parts"]["dispatch"]["score"] == 0
    assert {n: p["score"] for n, p in rec["parts"].items() if n != "dispatch"} == \
        {n: p["score"] for n, p in honest["parts"].items() if n != "dispatch"}
    messages = failed_messages(rec)
    assert messages and all(WRONG_REQUEST in m and "dispatch" in m for m in messages), \
        messages[:3]


def test_second_reply_is_a_protocol_error_never_a_shifted_verdict(records):
    rec = records["double-reply"]
    messages = failed_messages(rec)
    # Every test's first call meets the extra copy of the reply before it.
    assert len(messages) == len(rec["tests"]), [m for m in messages][:3]
    assert all(WRONG_REQUEST in m for m in messages), messages[:3]
    assert rec["score"] == 0


def test_an_answer_claimed_for_an_earlier_request_is_refused(records):
    rec = records["stale-nonce"]
    messages = failed_messages(rec)
    assert len(messages) == len(rec["tests"]) and rec["score"] == 0, messages[:3]
    assert all(WRONG_REQUEST in m for m in messages), messages[:3]


def test_next_student_is_unaffected(records, course, slot_of, tmp_path):
    rec = grade_all(course, slot_of, tmp_path, {"after": SOLUTION.read_text()})["after"]
    assert outcomes(rec) == outcomes(records["honest"])


def test_a_slot_asks_by_the_requests_held_when_it_was_forked(course, tmp_path):
    """A later hold (the same requests in another order) is the later slots' alone: a
    slot forked before it still asks its children by the indices they inherited."""
    from grader.judge import runner
    from grader.sandbox import slot as slots

    lesson = course.lesson("13")
    requests = runner.grade_solution(context(course))
    with slots.Sandbox(course.path(lesson.probes), True, tuple(lesson.preload)) as sandbox:
        sandbox.hold(requests)
        first = sandbox.slot()
        sandbox.hold(dict(reversed(requests.items())))
        second = sandbox.slot()
        try:
            assert first.held != second.held
            for s in (first, second):
                rec = grade_all(course, s, tmp_path / str(s.uid), {"honest": SOLUTION.read_text()})
                assert failed_messages(rec["honest"]) == [], failed_messages(rec["honest"])[:3]
        finally:
            first.close()
            second.close()
