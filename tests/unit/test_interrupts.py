"""A Ctrl-C during torch's import is delivered after it, never lost (grader/run/interrupts.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from grader.run import interrupts


@pytest.fixture
def interruptible():
    """SIGINT as a terminal's Python has it: a run started in the background
    (`make test &`) inherits it ignored, and Python then leaves it ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_sigint_inside_is_raised_after_the_block(interruptible):
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.held():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("rest of the block")  # not interrupted halfway
        reached.append("after the block")
    assert reached == ["rest of the block"]


def test_the_handler_is_restored():
    before = signal.getsignal(signal.SIGINT)
    with interrupts.held():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before


# A fresh interpreter that is sent SIGINT while it imports torch: `held` makes the
# import finish whole (numpy usable from torch) and the KeyboardInterrupt come after.
CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's Python has it
    from grader.run import interrupts
    threading.Timer({delay}, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        torch = interrupts.import_module("torch")
        import time
        time.sleep(30)  # the SIGINT, if it came after the import, lands here
        print("not interrupted")
    except KeyboardInterrupt:
        torch = sys.modules["torch"]
        print("interrupted", torch.from_numpy(__import__("numpy").zeros(2)).sum().item())
""")


@pytest.mark.parametrize("delay", [0.5])  # torch takes seconds to import: well inside it
def test_a_sigint_during_torchs_import_stops_after_it(delay):
    done = subprocess.run([sys.executable, "-c", CHILD.format(delay=delay)],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "interrupted 0.0", done.stderr[-2000:]


def test_as_ctrl_c_raises_a_sigterm_or_sighup_as_ctrl_c_and_says_which():
    for signum, code, name in ((signal.SIGTERM, 143, "SIGTERM"), (signal.SIGHUP, 129, "SIGHUP")):
        # as a terminal's command has it, whatever the test run was started with
        # (`nohup` ignores SIGHUP: test_as_ctrl_c_leaves_an_ignored_signal_ignored)
        started = signal.signal(signum, signal.SIG_DFL)
        try:
            with pytest.raises(KeyboardInterrupt):
                with interrupts.as_ctrl_c():
                    os.kill(os.getpid(), signum)
                    signal.sigtimedwait([], 0.1)  # hold here until Python runs the handler
            assert (interrupts.status(), interrupts.stop_name()) == (code, name)
            assert signal.getsignal(signum) is signal.SIG_DFL  # restored
        finally:
            signal.signal(signum, started)


def test_as_ctrl_c_leaves_an_ignored_signal_ignored():
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interrupts.as_ctrl_c():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing is raised
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_sigterm_taken_as_ctrl_c_is_held_like_it_and_noted():
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.as_ctrl_c():
            with interrupts.held():
                os.kill(os.getpid(), signal.SIGTERM)
                reached.append("rest of the block")
            reached.append("after the block")
    assert reached == ["rest of the block"]
    with interrupts.as_ctrl_c(), interrupts.noted() as stopped:
        assert not stopped()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.1)
        assert stopped()
