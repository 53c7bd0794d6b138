"""Ctrl-C held back while torch initialises, then delivered; Ctrl-C noted where
Python could drop it; and a kill (SIGTERM) or a closed terminal (SIGHUP) taken as Ctrl-C
where a command must clean up after itself (`as_ctrl_c`).

torch's C extension imports numpy from C and, when that import raises, clears the
exception and goes on without numpy. A Ctrl-C that lands there is a KeyboardInterrupt
raised inside numpy's import: torch drops it, so the run went on to the end as if no
key had been pressed (and with a torch that believes numpy is missing). Held, the
Ctrl-C is raised as soon as the import is over, in our code, where the CLI turns it
into "stopped (Ctrl-C)".
"""
from __future__ import annotations

import importlib
import signal
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# The signals `as_ctrl_c` turns into KeyboardInterrupt, besides Ctrl-C's own
OTHER_STOPS = (signal.SIGTERM, signal.SIGHUP)
_last_stop: list[int] = [signal.SIGINT]  # the signal that raised the last KeyboardInterrupt
_pressed = threading.Event()  # set by `_stop`: what `noted` asks


def _stop(signum: int, frame: object) -> None:
    """A stop signal, raised as Ctrl-C is, and remembered (`status`, `noted`)."""
    _last_stop[0] = signum
    _pressed.set()
    raise KeyboardInterrupt


def status() -> int:
    """The exit status of a command a stop signal ended: 128 + its number (130 for
    Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), as a shell reports a process it killed."""
    return 128 + _last_stop[0]


def stop_name() -> str:
    """The stop signal as a user knows it: "Ctrl-C", "SIGTERM" or "SIGHUP"."""
    signum = _last_stop[0]
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


@contextmanager
def as_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the block, as Ctrl-C does, so what
    the command cleans up on Ctrl-C (a check's sandbox and temporary folders) is cleaned
    up when it is killed or its terminal closes too. A signal the command was started
    with ignored (`nohup`) stays ignored; off the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in OTHER_STOPS}
    for signum, handler in before.items():
        if handler is signal.SIG_DFL:
            signal.signal(signum, _stop)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@contextmanager
def held() -> Iterator[None]:
    """A Ctrl-C during the block is noted, not raised, and raised again after it (and so
    is a stop `as_ctrl_c` raises as Ctrl-C). Blocking the signal would not do: the
    kernel hands a process's signal to any thread not blocking it (a progress bar's,
    the sandbox's), and Python then raises in the main thread all the same. Only the
    main thread can set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    # Ctrl-C, and the stops `as_ctrl_c` raises as it: torch would drop those too
    held_back = [signal.SIGINT, *(s for s in OTHER_STOPS if signal.getsignal(s) is _stop)]
    previous = {s: signal.signal(s, lambda signum, frame: noted.append(signum))
                for s in held_back}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if noted:  # delivered again, to whatever handled it before (Python's: raises)
            signal.raise_signal(noted[0])


@contextmanager
def noted() -> Iterator[Callable[[], bool]]:
    """Ctrl-C raised as Python raises it, and noted too: Python prints and drops one
    raised inside an object's finalizer, so a loop that must end on Ctrl-C asks the
    yielded function as well (`grader check --watch`'s poll). The stops `as_ctrl_c`
    raises are noted alike. Off the main thread, or where Ctrl-C is not Python's (a
    process started in the background ignores it), Ctrl-C's handler is left as it is."""
    _pressed.clear()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield _pressed.is_set
        return
    previous = signal.signal(signal.SIGINT, _stop)
    try:
        yield _pressed.is_set
    finally:
        signal.signal(signal.SIGINT, previous)


def import_module(name: str) -> types.ModuleType:
    """Import `name` (torch, or a module of ours that imports it first) with Ctrl-C
    held, so a Ctrl-C during the import stops the run instead of being lost."""
    with held():
        return importlib.import_module(name)
