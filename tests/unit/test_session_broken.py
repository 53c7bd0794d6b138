"""A session whose child the machine could not hold stays broken: each later call
raises the grader's error at once instead of starting another child, which the
machine could not hold either (each one took the container to its limit again, and
the kernel then killed the grader itself)."""
import os
import socket

import pytest

from grader.sandbox.limits import Limits, SandboxError
from grader.sandbox.session import Session


class _SlotTheMachineCannotHold:
    """A slot whose child is gone at once, killed for memory it stayed under."""

    def __init__(self) -> None:
        self.spawned = 0

    def spawn(self, limits: Limits) -> tuple[socket.socket, int]:
        self.spawned += 1
        ours, theirs = socket.socketpair()
        theirs.close()
        out_r, out_w = os.pipe()
        os.close(out_w)
        return ours, out_r

    def kill(self) -> dict:
        return {"killed": True, "oom_outside": True}


def test_a_machine_out_of_memory_starts_no_second_child():
    slot = _SlotTheMachineCannotHold()
    session = Session(slot, "x = 1\n", "13_moe.py", [], Limits(memory_mb=256))
    for _ in range(3):
        with pytest.raises(SandboxError, match="stayed under its 256 MiB"):
            session.call("route", {})
    assert slot.spawned == 1
    session.close()
