"""Ctrl-C held back while torch initialises, then delivered.

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
from collections.abc import Iterator
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


def import_module(name: str) -> types.ModuleType:
    """Import `name` (torch, or a module of ours that imports it first) with Ctrl-C
    held, so a Ctrl-C during the import stops the run instead of being lost."""
    with held():
        return importlib.import_module(name)
