"""Line by line, the values a submission's own code produces: for the student's
feedback only ("where your values first leave the reference's"), never a verdict.

Runs on both sides: in the child on the student's module (harness.py loads it by
path, like protocol.py) and on the trusted side on the solution and its correct
variants (grader/divergence.py). So only the standard library and torch here.

`sys.settrace` (Python 3.10 has no sys.monitoring) traces only frames whose code
comes from one file: every other call (torch's, the probes') gets no local tracer.
At each line event of a traced frame, the statement that just ran is the frame's
previous line; what it produced is each local whose object or in-place version
changed since, and at a return the value returned. Each value is kept as a small
detached copy, within caps on the count of values and the size of each.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import torch

MAX_EVENTS = 600        # values recorded per traced call
MAX_NUMEL = 4096        # elements of one tensor value (a larger one is left out)
MAX_TOTAL = 200_000     # elements of all values together
MAX_NAME = 60
MAX_LINES = 5000        # lines executed, in order, kept per traced call


def _copy(value: object) -> torch.Tensor | None:
    """A plain, detached float64/int64 copy of a tensor or a number; None for anything
    else, or a tensor over the caps."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return torch.tensor(value, dtype=torch.float64)
    if not isinstance(value, torch.Tensor):
        return None
    t = value.detach().as_subclass(torch.Tensor)
    if t.numel() > MAX_NUMEL or t.is_complex() or t.is_sparse:
        return None
    return t.to("cpu").clone()


def _stamp(value: object) -> tuple:
    """What tells a local changed: its object, and a tensor's in-place version."""
    if isinstance(value, torch.Tensor):
        try:
            return (id(value), value._version)
        except Exception:  # noqa: BLE001 - an inference tensor, a subclass's property
            return (id(value), -1)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (id(value), value)
    return (id(value), None)


def _values(frame) -> list[tuple[str, object]]:
    """A frame's locals, and the attributes its `self` holds directly (a tensor a
    layer sets on self; parameters live elsewhere and are inputs)."""
    items = list(frame.f_locals.items())
    owner = frame.f_locals.get("self")
    attrs = getattr(owner, "__dict__", None) if owner is not None else None
    if isinstance(attrs, dict):
        items += [(f"self.{k}", v) for k, v in list(attrs.items())[:50]
                  if isinstance(v, torch.Tensor)]
    return items


class Tracer:
    """Records [line, name, value, function, step] for frames of `filename`'s code:
    line numbers of that file, names of locals (or "return" / "return[i]"), and how
    many lines had run by then (`lines`, the path taken, in order)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.events: list[list] = []
        self.lines: list[int] = []  # each line event's line, in order (the path taken)
        self.total = 0
        self.full = False
        self._state: dict[int, tuple[int, dict]] = {}  # frame id -> (line, stamps)

    def _record(self, line: int, name: str, value: object, func: str) -> None:
        if self.full:
            return
        copy = _copy(value)
        if copy is None:
            return
        if len(self.events) >= MAX_EVENTS or self.total + copy.numel() > MAX_TOTAL:
            self.full = True
            return
        self.total += copy.numel()
        self.events.append([line, name[:MAX_NAME], copy, func[:MAX_NAME],
                            len(self.lines) - 1])

    def _changed(self, frame, line: int) -> dict:
        """Record the locals that changed since the frame's last event; its new stamps."""
        old = self._state.get(id(frame), (line, {}))[1]
        stamps = {}
        for name, value in _values(frame):
            stamp = _stamp(value)
            stamps[name] = stamp
            if old.get(name) != stamp:
                self._record(line, name, value, frame.f_code.co_name)
        return stamps

    def global_trace(self, frame, event, arg):
        if event != "call" or frame.f_code.co_filename != self.filename:
            return None
        try:
            self._arguments(frame)
            self._state[id(frame)] = (0, {n: _stamp(v) for n, v in _values(frame)})
        except Exception:  # noqa: BLE001 - a hostile local must not break the call
            self.full = True
        return self.local_trace

    def _arguments(self, frame) -> None:
        """What the submission's own code passes to its own function: its values."""
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename == self.filename:
            code = frame.f_code
            for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
                if name != "self" and name in frame.f_locals:
                    self._record(caller.f_lineno, name, frame.f_locals[name],
                                 caller.f_code.co_name)

    def local_trace(self, frame, event, arg):
        try:
            previous, _ = self._state.get(id(frame), (0, {}))
            if event == "line":
                if previous:
                    stamps = self._changed(frame, previous)
                else:
                    stamps = self._state[id(frame)][1]
                self._state[id(frame)] = (frame.f_lineno, stamps)
                if len(self.lines) < MAX_LINES:
                    self.lines.append(frame.f_lineno)
            elif event == "return":
                line = previous or frame.f_lineno
                self._changed(frame, line)
                if isinstance(arg, (tuple, list)):
                    for i, item in enumerate(arg[:8]):
                        self._record(line, f"return[{i}]", item, frame.f_code.co_name)
                else:
                    self._record(line, "return", arg, frame.f_code.co_name)
                self._state.pop(id(frame), None)
        except Exception:  # noqa: BLE001 - a hostile local must not break the call
            self.full = True
        return self.local_trace


def trace(filename: str, fn: Callable, *args, **kwargs
          ) -> tuple[object, list[list], list[int], str]:
    """Call fn under a tracer of `filename`'s code: (its result or None, the events,
    the lines run, the error's type or "")."""
    tracer = Tracer(filename)
    previous = sys.gettrace()
    sys.settrace(tracer.global_trace)
    try:
        result, error = fn(*args, **kwargs), ""
    except Exception as exc:  # noqa: BLE001 - the trace up to the error still tells
        result, error = None, f"{type(exc).__name__}"
    finally:
        sys.settrace(previous)
    return result, tracer.events, tracer.lines, error
