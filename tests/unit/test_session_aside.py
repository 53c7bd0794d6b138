"""A trace's calls in the graded child are set aside (`Session.aside`): they spend a
budget of their own, and the graded run's budget, hangs and byte count are as they
were after them, so that a trace never changes what the student's record says."""
import socket

from grader.sandbox.limits import Limits, StudentError
from grader.sandbox.session import Session


def test_calls_aside_have_their_own_budget_and_leave_the_graded_one_as_it_was():
    session = Session(None, "x = 1\n", "13_moe.py", [], Limits())
    session.waited, session.received = 12.5, 1000
    session.timed_out = {"route": "test_route"}
    with session.aside():
        # the graded run's hangs are known aside too: the same code is not run again
        assert (session.waited, session.received, session.timed_out) == (
            0.0, 0, {"route": "test_route"})
        session.waited, session.received = 3.0, 50
        session.timed_out["dispatch"] = "tracing"
        session.over_budget = StudentError("protocol", "sent too much")
    assert (session.waited, session.received) == (12.5, 1000)
    assert session.timed_out == {"route": "test_route"}
    assert session.over_budget is None


def test_alive_only_with_a_child_that_imported_and_was_not_cut_off():
    session = Session(None, "x = 1\n", "13_moe.py", [], Limits())
    assert not session.alive
    ours, theirs = socket.socketpair()
    try:
        session.sock = ours
        assert session.alive
        session.fatal = StudentError("import", "no module")
        assert not session.alive
    finally:
        ours.close()
        theirs.close()
