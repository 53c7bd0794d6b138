"""The child's trace, parsed: the one place where what the student's process sent
about its own run (grader/inside/tracer.py's events, leaves and lines) enters the
trusted side. Everything in it came from untrusted code, so each field is checked
against its type and caps here, and whatever fails a check is dropped: the trace
feeds the student's own page only, never a verdict. The solution's traces, made on
the trusted side, are read through the same parser (a recording is data too).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from grader.inside import tracer
from grader.record import MAX_ERROR

_NAME = re.compile(r"((self\.)?[A-Za-z_][A-Za-z0-9_]{0,54}|return)(\[[0-7]\]){0,3}")
_LEAF = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,59}")


@dataclass
class Event:
    line: int
    name: str
    value: torch.Tensor
    func: str = ""
    step: int = 0  # index in Trace.lines of the statement that produced it
    # the leaves its gradient reaches (tracer.Reach: [] none), None when unknown
    reach: frozenset[int] | None = None
    off: int = 0  # the line that turned gradient recording off for it (0: it was on)


@dataclass
class Trace:
    events: list[Event]
    result: object
    error: str
    lines: list[int] = field(default_factory=list)  # the lines run, in order
    leaves: dict[int, str] = field(default_factory=dict)  # leaf id -> its argument's name


def events(raw: object, lines: int | None) -> list[Event]:
    """Events as the tracer sends them ([line, name, value, func, step, reach, off]; a
    recording of an earlier version's has neither of the last two), checked: anything
    else (a hostile child's) is dropped."""
    out: list[Event] = []
    if not isinstance(raw, list):
        return out
    for e in raw[:tracer.MAX_EVENTS]:
        if not (isinstance(e, list) and len(e) in (5, 7) and type(e[0]) is int
                and isinstance(e[1], str) and isinstance(e[2], torch.Tensor)
                and isinstance(e[3], str) and type(e[4]) is int):
            continue
        if lines is not None and not 1 <= e[0] <= lines:
            continue
        if not _NAME.fullmatch(e[1]) or e[2].numel() > tracer.MAX_NUMEL:
            continue
        reach, off = (_reach(e[5]), e[6]) if len(e) == 7 else (None, 0)
        if type(off) is not int or off < 0 or (lines is not None and off > lines):
            continue
        out.append(Event(e[0], e[1], e[2], e[3][:60], e[4], reach, off))
    return out


def _reach(raw: object) -> frozenset[int] | None:
    if not isinstance(raw, list) or len(raw) > tracer.MAX_LEAVES:
        return None
    if not all(type(k) is int for k in raw):
        return None
    return frozenset(raw)


def leaves(raw: object) -> dict[int, str]:
    """[leaf id, name] pairs as the tracer sends them, checked."""
    if not isinstance(raw, list):
        return {}
    return {p[0]: p[1] for p in raw[:tracer.MAX_EVENTS]
            if isinstance(p, list) and len(p) == 2 and type(p[0]) is int
            and isinstance(p[1], str) and _LEAF.fullmatch(p[1])}


def lines_run(raw: object, lines: int) -> list[int]:
    """The lines a child says it ran, checked."""
    if not isinstance(raw, list):
        return []
    return [n for n in raw[:tracer.MAX_LINES] if type(n) is int and 1 <= n <= lines]


def raised(raw: object, lines: int) -> tuple[int, str] | None:
    """The line the child says raised, and the error ("Type: message"), checked: a
    line of the file, a short text; None for anything else."""
    if not (isinstance(raw, list) and len(raw) == 2 and type(raw[0]) is int
            and 1 <= raw[0] <= lines and isinstance(raw[1], str)):
        return None
    return raw[0], raw[1][:MAX_ERROR]
