"""Line by line, the values a submission's own code produces: for the student's
feedback only ("where your values first leave the reference's"), never a verdict.

Runs on both sides: in the child on the student's module (harness.py loads it by
path, like protocol.py) and on the trusted side on the solution and its correct
variants (grader/judge/divergence/). So only the standard library and torch here.

`sys.settrace` (Python 3.10 has no sys.monitoring) traces only frames whose code
comes from one file: every other call (torch's, the probes') gets no local tracer.
At each line event of a traced frame, the statement that just ran is the frame's
previous line; what it produced is each local whose object or in-place version
changed since, and at a return the value returned (a list or tuple: each tensor it
holds, `_items`, as "presents[0][1]" or "return[1][0][1]"). Each value is kept as a small
detached copy, within caps on the count of values and the size of each, with where
its gradient would flow back to (`Reach`): the leaves (the call's inputs and
parameters that require grad) its autograd graph reaches, so that a gradient cut
(a `.detach()`, a `torch.no_grad()`, a `.data`) shows on the line that made it.
"""
from __future__ import annotations

import sys
import zlib
from collections.abc import Callable

import torch

# What a recording of traces is kept with (grader/judge/divergence/lesson.py): a
# change in what is recorded, or how it is named, makes an older recording unread
VERSION = 2             # 2: lists and tuples followed to their tensors (`_items`)
MAX_EVENTS = 600        # values recorded per traced call
MAX_NUMEL = 4096        # elements of one tensor value (a larger one is left out)
MAX_TOTAL = 200_000     # elements of all values together
MAX_NAME = 60
MAX_ERROR = 200         # characters of the error a line raised
MAX_LINES = 5000        # lines executed, in order, kept per traced call
MAX_NODES = 20_000      # autograd nodes walked per traced call (more: reach unknown)
MAX_LEAVES = 64         # leaves kept in one value's reach (more: reach unknown)
MAX_ITEMS = 8           # elements followed in a list or tuple, a level, and values kept of one
MAX_DEPTH = 3           # levels of lists and tuples followed ("return[1][0][1]")


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


def _items(name: str, value: object, tensors_only: bool = True) -> list[tuple[str, object]]:
    """A value as the values it holds: a list or tuple (exactly those types, whose
    indexing runs no code of the student's) as its elements, `name[i]`, down to
    MAX_DEPTH levels and MAX_ITEMS a level, its tensors only (`tensors_only`; a
    function's result keeps the numbers it holds directly too, `return[i]`); anything
    else as itself. So a cache kept and returned as a list of (k, v) tuples is compared
    tensor by tensor, as any other value is."""
    out: list[tuple[str, object]] = []
    todo = [(name, value, 0)]  # depth first, in order
    while todo and len(out) < MAX_ITEMS:
        here, v, depth = todo.pop()
        if isinstance(v, (list, tuple)) and type(v) in (list, tuple) and depth < MAX_DEPTH:
            todo += reversed([(f"{here}[{i}]", item, depth + 1)
                              for i, item in enumerate(v[:MAX_ITEMS])])
        elif depth == 0 or isinstance(v, torch.Tensor) or (depth == 1 and not tensors_only):
            out.append((here, v))
    return out


def _values(frame) -> list[tuple[str, object]]:
    """A frame's locals (a list or tuple of tensors as its tensors, `_items`), and the
    attributes its `self` holds directly (a tensor a layer sets on self; parameters
    live elsewhere and are inputs)."""
    items: list[tuple[str, object]] = []
    for name, value in list(frame.f_locals.items()):
        if type(value) in (list, tuple):  # (on every line: the common case kept cheap)
            items += _items(name, value)
        else:
            items.append((name, value))
    owner = frame.f_locals.get("self")
    attrs = getattr(owner, "__dict__", None) if owner is not None else None
    if isinstance(attrs, dict):
        items += [(f"self.{k}", v) for k, v in list(attrs.items())[:50]
                  if isinstance(v, torch.Tensor)]
    return items


def leaf_id(t: torch.Tensor) -> int:
    """A leaf's identity on either side: its dtype, shape and first values, which are
    the request's own numbers (an input's copy, a loaded weight), exact on any machine."""
    head = [float(x) for x in t.detach().reshape(-1)[:4].tolist()]
    return zlib.crc32(f"{t.dtype}{tuple(t.shape)}{head!r}".encode())


class Reach:
    """Which leaves each value's gradient flows back to: its autograd graph walked once
    per node (memoised over the call), within MAX_NODES."""

    def __init__(self):
        self.nodes: dict[object, frozenset[int]] = {}  # node -> its leaves (kept alive)
        self.leaves: dict[int, torch.Tensor] = {}      # leaf id -> the leaf (kept alive)
        self.names: dict[int, str] = {}                # id(tensor) -> the name it came by
        self.over = False

    def name(self, name: str, value: object) -> None:
        """Remember what a call's argument (a tensor, or a module's parameters) is called."""
        if isinstance(value, torch.Tensor):
            self.names.setdefault(id(value), name)
        elif isinstance(value, torch.nn.Module):
            prefix = "" if name == "self" else f"{name}."
            for i, (pname, p) in enumerate(value.named_parameters()):
                if i >= 200:
                    break
                self.names.setdefault(id(p), prefix + pname)

    def _leaf(self, t: torch.Tensor) -> int:
        key = leaf_id(t)
        self.leaves.setdefault(key, t)
        return key

    def of(self, value: object) -> list[int] | None:
        """The sorted leaf ids `value`'s gradient reaches ([] for none: a number, an
        integer tensor, a detached one), or None when unknown (over the caps)."""
        if not isinstance(value, torch.Tensor) or not value.requires_grad:
            return []
        if value.grad_fn is None:
            return [self._leaf(value)]
        found = self._walk(value.grad_fn)
        if found is None or len(found) > MAX_LEAVES:
            return None
        return sorted(found)

    def _walk(self, root) -> frozenset[int] | None:
        stack = [(root, False)]
        while stack and not self.over:
            node, expanded = stack.pop()
            if node in self.nodes:
                continue
            if len(self.nodes) >= MAX_NODES:
                self.over = True
                break
            variable = getattr(node, "variable", None)
            if isinstance(variable, torch.Tensor):
                self.nodes[node] = frozenset({self._leaf(variable)})
                continue
            children = [n for n, _ in node.next_functions if n is not None]
            if expanded:
                self.nodes[node] = frozenset().union(*(self.nodes.get(c, frozenset())
                                                       for c in children))
                continue
            stack.append((node, True))
            stack.extend((c, False) for c in children if c not in self.nodes)
        return None if self.over else self.nodes.get(root)

    def named(self) -> list[list]:
        """[leaf id, name] of each leaf reached whose name a call's arguments told."""
        return [[key, self.names[id(t)][:MAX_NAME]] for key, t in self.leaves.items()
                if id(t) in self.names][:MAX_EVENTS]


class Tracer:
    """Records [line, name, value, function, step, reach, off] for frames of
    `filename`'s code: line numbers of that file, names of locals (or "return" /
    "return[i]"), how many lines had run by then (`lines`, the path taken, in order;
    -1 for the numbers a call from outside binds to its parameters, `_bound`),
    the leaves the value's gradient reaches (`Reach.of`), and, for a value computed
    with gradient recording off, the line of the file that turned it off (0: none)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.events: list[list] = []
        self.lines: list[int] = []  # each line event's line, in order (the path taken)
        self.total = 0
        self.full = False
        self._state: dict[int, tuple[int, dict]] = {}  # frame id -> (line, stamps)
        self.reach = Reach()
        self._on: dict[int, bool] = {}   # frame id -> gradient recording on as its line began
        self._off: dict[int, int] = {}   # frame id -> the line of it that turned recording off

    def _record(self, frame, line: int, name: str, value: object, func: str,
                step: int | None = None) -> None:
        if self.full:
            return
        copy = _copy(value)
        if copy is None:
            return
        if len(self.events) >= MAX_EVENTS or self.total + copy.numel() > MAX_TOTAL:
            self.full = True
            return
        self.total += copy.numel()
        try:
            reach = self.reach.of(value)
        except Exception:  # noqa: BLE001 - a hostile tensor's property: reach unknown
            reach = None
        off = 0 if torch.is_grad_enabled() else self._turned_off(frame)
        self.events.append([line, name[:MAX_NAME], copy, func[:MAX_NAME],
                            len(self.lines) - 1 if step is None else step, reach, off])

    def _turned_off(self, frame) -> int:
        """The line of this file that turned gradient recording off (a `torch.no_grad()`
        around a call, a `with` before): this frame's, else its callers' (of this
        file) whose current line began with it on; 0 when it was off from outside."""
        f = frame
        while f is not None and f.f_code.co_filename == self.filename:
            if self._off.get(id(f)):
                return self._off[id(f)]
            caller = f.f_back
            if caller is None or caller.f_code.co_filename != self.filename:
                return 0
            if self._on.get(id(caller)):
                return caller.f_lineno
            f = caller
        return 0

    def _changed(self, frame, line: int) -> dict:
        """Record the locals that changed since the frame's last event; its new stamps."""
        old = self._state.get(id(frame), (line, {}))[1]
        stamps = {}
        for name, value in _values(frame):
            stamp = _stamp(value)
            stamps[name] = stamp
            if old.get(name) != stamp:
                self._record(frame, line, name, value, frame.f_code.co_name)
        return stamps

    def _grad_mode(self, frame, previous: int) -> None:
        """Note whether gradient recording is on as the frame's next line begins, and
        the line that turned it off, if the one that just ran did."""
        now = torch.is_grad_enabled()
        if not now and previous and self._on.get(id(frame)):
            self._off[id(frame)] = previous
        elif now:
            self._off.pop(id(frame), None)
        self._on[id(frame)] = now

    def global_trace(self, frame, event, arg):
        if event != "call" or frame.f_code.co_filename != self.filename:
            return None
        try:
            self._name_arguments(frame)
            self._on[id(frame)] = torch.is_grad_enabled()
            self._arguments(frame)
            self._bound(frame)
            self._state[id(frame)] = (0, {n: _stamp(v) for n, v in _values(frame)})
        except Exception:  # noqa: BLE001 - a hostile local must not break the call
            self.full = True
        return self.local_trace

    def _name_arguments(self, frame) -> None:
        """Tell the reach what this call's arguments are called (a module being built
        has no parameters yet: nothing to tell)."""
        code = frame.f_code
        for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            try:
                self.reach.name(name, frame.f_locals.get(name))
            except Exception:  # noqa: BLE001 - a module in its __init__, a hostile one
                continue

    def _arguments(self, frame) -> None:
        """What the submission's own code passes to its own function: its values."""
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename == self.filename:
            code = frame.f_code
            for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
                if name != "self" and name in frame.f_locals:
                    self._record(caller, caller.f_lineno, name, frame.f_locals[name],
                                 caller.f_code.co_name)

    def _bound(self, frame) -> None:
        """The numbers a call from outside the file (the grader's probe) binds to the
        function's parameters, at its first line and step -1 (before any line): where
        one is left at a default of the student's own, its value shows there."""
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename == self.filename:
            return
        code = frame.f_code
        for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            value = frame.f_locals.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._record(frame, code.co_firstlineno, name, value, code.co_name, -1)

    def local_trace(self, frame, event, arg):
        try:
            previous, _ = self._state.get(id(frame), (0, {}))
            if event == "line":
                self._grad_mode(frame, previous)
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
                for name, item in _items("return", arg, tensors_only=False):
                    self._record(frame, line, name, item, frame.f_code.co_name)
                self._state.pop(id(frame), None)
                self._on.pop(id(frame), None)
                self._off.pop(id(frame), None)
        except Exception:  # noqa: BLE001 - a hostile local must not break the call
            self.full = True
        return self.local_trace


def raised_at(exc: BaseException, filename: str) -> list:
    """[line, "Type: message"] of the innermost line of `filename` an error passed
    through (the line that raised it, in the submission's own code), or [] when none
    did; the message capped. A hostile exception's __str__ may raise: guarded."""
    try:
        tb, line = exc.__traceback__, 0
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        if not line:
            return []
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001 - a hostile __str__
            message = ""
        kind = type(exc).__name__
        return [line, (f"{kind}: {message}" if message else kind)[:MAX_ERROR]]
    except Exception:  # noqa: BLE001 - a hostile traceback
        return []


def trace(filename: str, fn: Callable, *args, **kwargs
          ) -> tuple[object, list[list], list[int], str, list[list], list]:
    """Call fn under a tracer of `filename`'s code: (its result or None, the events,
    the lines run, the error's type or "", the names of the leaves reached, and
    `raised_at`'s [line, error] where a line of `filename` raised)."""
    tracer = Tracer(filename)
    previous = sys.gettrace()
    sys.settrace(tracer.global_trace)
    raised: list = []
    try:
        result, error = fn(*args, **kwargs), ""
    except Exception as exc:  # noqa: BLE001 - the trace up to the error still tells
        result, error = None, f"{type(exc).__name__}"
        sys.settrace(previous)  # (the exception's own __str__ is not the traced code's)
        raised = raised_at(exc, filename)
    finally:
        sys.settrace(previous)
    try:
        leaves = tracer.reach.named()
    except Exception:  # noqa: BLE001 - a hostile tensor's property
        leaves = []
    return result, tracer.events, tracer.lines, error, leaves, raised
