"""A Ctrl-C during torch's import is delivered after it, never lost (grader/interrupts.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from grader import interrupts


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
    from grader import interrupts
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
