"""Ctrl-C held back while torch initialises, then delivered; and Ctrl-C noted where
Python could drop it.

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


@contextmanager
def held() -> Iterator[None]:
    """A Ctrl-C during the block is noted, not raised, and raised again after it.
    Blocking the signal would not do: the kernel hands a process's signal to any
    thread not blocking it (a progress bar's, the sandbox's), and Python then raises
    in the main thread all the same. Only the main thread can set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if noted:  # delivered again, to whatever handled it before (Python's: raises)
            signal.raise_signal(signal.SIGINT)


@contextmanager
def noted() -> Iterator[Callable[[], bool]]:
    """Ctrl-C raised as Python raises it, and noted too: Python prints and drops one
    raised inside an object's finalizer, so a loop that must end on Ctrl-C asks the
    yielded function as well (`grader check --watch`'s poll). Off the main thread, or
    where Ctrl-C is not Python's (a process started in the background ignores it),
    nothing changes and nothing is noted."""
    pressed = threading.Event()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield pressed.is_set
        return

    def ctrl_c(signum: int, frame: object) -> None:
        pressed.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        yield pressed.is_set
    finally:
        signal.signal(signal.SIGINT, previous)


def import_module(name: str) -> types.ModuleType:
    """Import `name` (torch, or a module of ours that imports it first) with Ctrl-C
    held, so a Ctrl-C during the import stops the run instead of being lost."""
    with held():
        return importlib.import_module(name)
