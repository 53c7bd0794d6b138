"""Where a failing part's values first leave the reference's: the line a TA would
point at after running a small input through both programs side by side.

For a failing part, the student's function runs once more in its sandbox on a
fresh small input (grader/judge/trace_inputs.py: no graded case), under the tracer
(grader/inside/tracer.py), which returns each value its lines produced. The
solution and the lesson's correct variants (its equivalent mutants) are traced the
same way here, on the trusted side, once per run. The first statement of the
student's that produces a value none of them computes (within the lesson's
tolerance, in the same shape or another view of the same values) is named, with
the values matched before it. A trace feeds the student's own page only, never a
verdict: everything in it came from the child and is checked, capped and escaped
before it is shown. Where no line can be named honestly, none is.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import itertools
import re
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.judge import trace_inputs
from grader.inside import protocol, tracer
from grader.judge.reference import request_key
from grader.record import MAX_CODE, MAX_MATCHED, Where
from grader.sandbox.limits import StudentError

SHOWN = 4              # values of a tensor quoted on the page
_NAME = re.compile(r"(self\.)?[A-Za-z_][A-Za-z0-9_]{0,54}|return(\[[0-7]\])?")
_GRADIENT = re.compile(r".*grads?$")
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


# ---------------------------------------------------------------- tracing code

def run_traced(module: types.ModuleType, probes: types.ModuleType, probe: str,
               args: dict) -> Trace:
    """A trusted module's trace (the solution, a correct variant), as the child's. A
    variant's deprecation warnings (`x.T` on 3 dims) are the project's, not news for
    the staff running a class: not printed."""
    with torch.random.fork_rng(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if module.__file__ is None:  # (the solution and its variants are compiled with one)
            raise ValueError(f"{module.__name__} has no file name to trace")
        result, events, lines, error, leaves = tracer.trace(
            module.__file__, getattr(probes, probe), module, **args)
    return Trace(_events(events, None), result, error, lines, _leaves(leaves))


def _events(raw: object, lines: int | None) -> list[Event]:
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


def _leaves(raw: object) -> dict[int, str]:
    """[leaf id, name] pairs as the tracer sends them, checked."""
    if not isinstance(raw, list):
        return {}
    return {p[0]: p[1] for p in raw[:tracer.MAX_EVENTS]
            if isinstance(p, list) and len(p) == 2 and type(p[0]) is int
            and isinstance(p[1], str) and _LEAF.fullmatch(p[1])}


def _lines(raw: object, lines: int) -> list[int]:
    """The lines a child says it ran, checked."""
    if not isinstance(raw, list):
        return []
    return [n for n in raw[:tracer.MAX_LINES] if type(n) is int and 1 <= n <= lines]


# ---------------------------------------------------------------- matching values

@dataclass
class Tolerance:
    atol: float
    rtol: float


def _tolerance(tols: dict, *dtypes: torch.dtype) -> Tolerance:
    """The lesson's tolerance for the least precise float dtype of the two."""
    names = [str(d).removeprefix("torch.") for d in dtypes if d.is_floating_point]
    for name in ("float16", "bfloat16", "float32", "float64"):
        if name in names and name in tols:
            return Tolerance(tols[name].atol, tols[name].rtol)
    if not names:
        return Tolerance(0.0, 0.0)
    t = tols.get("float32")
    return Tolerance(t.atol, t.rtol) if t else Tolerance(1e-5, 1e-4)


def _near(a: torch.Tensor, b: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Per element, grader/judge/closeness.py's rule in torch: a non-finite `b` is matched
    only by itself."""
    same = (a == b) | (a.isnan() & b.isnan())
    return same | (b.isfinite() & ((a - b).abs() <= tol.atol + tol.rtol * b.abs()))


def _close(a: torch.Tensor, b: torch.Tensor, tol: Tolerance) -> bool:
    return bool(_near(a, b, tol).all())


def same_values(s: torch.Tensor, r: torch.Tensor, tols: dict) -> bool:
    """`s` holds `r`'s values: in the same shape, flattened in another (a view), or
    with its dimensions permuted (a transpose)."""
    if s.numel() != r.numel() or s.numel() == 0:
        return False
    if s.is_floating_point() and r.is_floating_point() and s.dtype != r.dtype:
        return False  # the same numbers in another precision are another value
    tol = _tolerance(tols, s.dtype, r.dtype)
    a, b = s.double().reshape(-1), r.double().reshape(-1)
    if _close(a, b, tol):
        return True
    if 2 <= r.dim() <= 4 and s.dim() == r.dim() and sorted(s.shape) == sorted(r.shape):
        for p in itertools.permutations(range(r.dim())):
            if p != tuple(range(r.dim())) and r.permute(p).shape == s.shape:
                if _close(a, r.permute(p).double().reshape(-1), tol):
                    return True
    return False


def _tensors(value: object) -> list[torch.Tensor]:
    """The tensors and numbers of a probe's arguments: the inputs."""
    if isinstance(value, torch.Tensor):
        return [value.detach()] if value.numel() <= tracer.MAX_NUMEL else []
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [torch.tensor(value, dtype=torch.float64)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


@dataclass
class Reference:
    """The values the reference and its correct variants computed on one request."""
    request: trace_inputs.Request
    traces: list[Trace]
    inputs: list[torch.Tensor]
    _distinct: dict[int, list] | None = None

    def returns(self, func: str, name: str) -> list[torch.Tensor]:
        return [e.value for t in self.traces for e in t.events
                if e.func == func and e.name == name]

    def named(self, name: str) -> list[torch.Tensor]:
        return [e.value for t in self.traces for e in t.events if e.name == name]

    def distinct(self, numel: int) -> list[tuple[torch.Tensor, frozenset[int] | None]]:
        """The distinct values of `numel` elements the traces hold (only those can hold
        another's values), each with where its gradient reaches: the variants repeat
        most of the reference's, and comparing with each copy cost a second a part."""
        if self._distinct is None:
            self._distinct = {}
            seen: set[tuple] = set()
            for e in (e for t in self.traces for e in t.events):
                key = (e.value.dtype, tuple(e.value.shape), e.reach,
                       tuple(e.value.reshape(-1).tolist()) if e.value.numel() <= 512
                       else id(e))
                if key not in seen:
                    seen.add(key)
                    self._distinct.setdefault(e.value.numel(), []).append((e.value, e.reach))
        return self._distinct.get(numel, [])


def _match(event: Event, ref: Reference, tols: dict) -> str | None:
    """"ref" when the reference computes this value, "input" when it is an input's,
    None when neither. A function's return is checked against what the reference's
    function of that name returned (its contract), a number against the reference's
    numbers of the same name where it has one (a small integer matches too much)."""
    v = event.value
    named = False
    if event.name.startswith("return") and ref.returns(event.func, event.name):
        # a function's result is its contract: the dtype too
        pool, named = [r for r in ref.returns(event.func, event.name)
                       if r.dtype == v.dtype], True
    elif v.dim() == 0 and ref.named(event.name):
        pool, named = ref.named(event.name), True
    else:
        pool = [r for r, _ in ref.distinct(v.numel())]
    if any(same_values(v, r, tols) for r in pool):
        return "ref"
    if not named and any(same_values(v, r, tols) for r in ref.inputs):
        return "input"
    return None


# ---------------------------------------------------------------- statements

def statements(source: str) -> dict[int, tuple[int, int]]:
    """Each line -> (first, last) line of the simple statement or compound header it
    belongs to (a multi-line call is one statement)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            end = max(body[0].lineno - 1, node.lineno)  # the header only
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
        else:
            end = node.end_lineno or node.lineno
        for line in range(node.lineno, end + 1):
            old = spans.get(line)
            if old is None or (old[1] - old[0]) >= (end - node.lineno):
                spans[line] = (node.lineno, end)
    return spans


def _quote(source_lines: list[str], span: tuple[int, int]) -> str:
    text = " ".join(line.strip() for line in source_lines[span[0] - 1:span[1]])
    return text if len(text) <= MAX_CODE else text[:MAX_CODE - 1] + "…"


def _items(flat: torch.Tensor, digits: int) -> list[str]:
    if flat.dtype == torch.bool:
        return ["True" if bool(x) else "False" for x in flat]
    if flat.is_floating_point():
        return [f"{float(x):.{digits}g}" for x in flat]
    return [str(int(x)) for x in flat]


def shown(t: torch.Tensor, start: int = 0, digits: int = 4) -> str:
    """A value as the page quotes it: a few numbers from flat position `start` on
    (`…` where some are left out). Its shape and that position are the sentence's to
    say, in the page's language (`Where.got_shape`, `got_at`)."""
    flat = t.detach().reshape(-1)
    items = _items(flat[start:start + SHOWN], digits)
    if t.dim() == 0:
        return items[0] if items else "[]"
    before = "…, " if start > 0 else ""
    more = ", …" if flat.numel() > start + SHOWN else ""
    return f"[{before}{', '.join(items)}{more}]"


def _index(t: torch.Tensor, flat: int) -> list[int]:
    """The index, in `t`'s own shape, of its element at flat position `flat`."""
    out = []
    for size in reversed(t.shape):
        out.append(flat % size)
        flat //= size
    return out[::-1]


def _apart(s: torch.Tensor, r: torch.Tensor, tols: dict) -> int:
    """The first flat position where `s` and `r` differ (values in the order they are
    stored, so a flatten after a transpose shows where the orders part); 0 when their
    sizes differ or no element does."""
    if s.numel() != r.numel() or s.numel() == 0:
        return 0
    a, b = s.detach().double().reshape(-1), r.detach().double().reshape(-1)
    off = (~_near(a, b, _tolerance(tols, s.dtype, r.dtype))).nonzero()
    return int(off[0]) if len(off) else 0


def _digits(s: torch.Tensor, r: torch.Tensor, at: int) -> int:
    """Significant digits enough that the first values quoted read differently (4, or
    up to 17 where they differ only further on)."""
    if not (s.is_floating_point() and r.is_floating_point()) or s.numel() != r.numel() \
            or s.numel() == 0:
        return 4
    a, b = float(s.detach().reshape(-1)[at]), float(r.detach().reshape(-1)[at])
    digits = 4
    while a != b and digits < 17 and f"{a:.{digits}g}" == f"{b:.{digits}g}":
        digits += 1
    return digits


def _quoted(s: torch.Tensor, r: torch.Tensor | None, tols: dict) -> dict:
    """The `Where` fields quoting a student's value and the reference's, from the first
    position where they differ, with enough digits that they visibly differ."""
    if r is None:
        return {"got": shown(s), "got_shape": _shape(s)}
    first = _apart(s, r, tols)
    digits = _digits(s, r, first)
    at = first if s.numel() > SHOWN else 0  # a short value is quoted whole
    return {"got": shown(s, at, digits), "ref": shown(r, at, digits),
            "got_shape": _shape(s), "ref_shape": _shape(r),
            "got_at": _index(s, at) if at else [], "ref_at": _index(r, at) if at else []}


def _shape(t: torch.Tensor) -> list[int]:
    """The shape the sentence names: only where a value has more than it quotes."""
    return list(t.shape) if t.numel() > SHOWN or t.dim() > 1 else []


# ---------------------------------------------------------------- the finding

def _same_result(a: object, b: object, tols: dict, keep: Callable[[str], bool]) -> bool:
    """Two probe results agree on the keys `keep` selects (recursively)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in b if keep(k)]
        return all(k in a and _same_result(a[k], b[k], tols, lambda _: True) for k in keys)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and (a.numel() == 0 or same_values(a, b, tols))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_result(x, y, tols, keep) for x, y in zip(a, b))
    return a == b


def same_forward(a: object, b: object, tols: dict) -> bool:
    """Two probe results agree on every value but the gradients."""
    return _same_result(a, b, tols, lambda k: not _GRADIENT.match(k))


def same_gradients(a: object, b: object, tols: dict) -> bool:
    """Two probe results agree on their gradients."""
    return _same_result(a, b, tols, lambda k: bool(_GRADIENT.match(k)))


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", text)


@dataclass
class Statements:
    """A program's statements as two runs are compared: each line's statement span,
    and each span's digest (of its text without blanks), which tells only whether two
    statements are written alike: a student bundle holds the reference's digests
    (`anonymous`), never its text."""
    spans: dict[int, tuple[int, int]]
    digests: dict[tuple[int, int], str]

    @classmethod
    @functools.lru_cache(maxsize=8)  # a student's source is read for each failing part
    def of(cls, source: str) -> Statements:
        """(Shared between callers: none changes it.)"""
        spans = statements(source)
        lines = source.splitlines()
        every = set(spans.values()) | {(n, n) for n in range(1, len(lines) + 1)}
        return cls(spans, {span: hashlib.sha256(_norm(_quote(lines, span)).encode())
                           .hexdigest()[:16] for span in every})

    def span(self, line: int) -> tuple[int, int]:
        return self.spans.get(line, (line, line))

    def anonymous(self) -> tuple[dict[int, str], dict[int, int]]:
        """The digests numbered 1, 2, … in the order of their spans, without the
        source's line numbers; and each line's number."""
        number = {span: i for i, span in enumerate(sorted(self.digests), start=1)}
        lines = {n: number[self.span(n)] for n in range(1, max(s[1] for s in number) + 1)
                 if self.span(n) in number} if number else {}
        return {i: self.digests[span] for span, i in number.items()}, lines

    @classmethod
    def numbered(cls, digests: dict[int, str]) -> Statements:
        """`anonymous`'s digests as statements of one line each, at their numbers."""
        return cls({i: (i, i) for i in digests}, {(i, i): d for i, d in digests.items()})


@dataclass
class _Run:
    """A trace's statements in the order they ran (a statement's consecutive line
    events merged): their spans and digests, and each line event's position."""
    spans: list[tuple[int, int]]
    texts: list[str]
    position: list[int]

    @classmethod
    def of(cls, lines: list[int], stmts: Statements) -> _Run:
        run = cls([], [], [])
        for n in lines:
            span = stmts.span(n)
            if not run.spans or run.spans[-1] != span:
                run.spans.append(span)
                run.texts.append(stmts.digests.get(span, ""))
            run.position.append(len(run.spans) - 1)
        return run

    def at(self, step: int) -> int:
        return self.position[step] if 0 <= step < len(self.position) else len(self.spans)


def _first_difference(mine: _Run, theirs: _Run) -> int | None:
    """The first position where the statements run differ in text, or where one run
    ends before the other; None when they ran the same statements."""
    for i, (a, b) in enumerate(zip(mine.texts, theirs.texts)):
        if a != b:
            return i
    return None if len(mine.texts) == len(theirs.texts) else min(len(mine.texts),
                                                                  len(theirs.texts))


_BRANCH = ("if", "elif", "while", "for", "else")
_EXTRA = re.compile(r"[A-Za-z_][\w.]{0,80}")


def _lacking(name: str, theirs: set[str]) -> str:
    """The attribute that builds what the reference lacks in parameter `name`: the
    outermost module none of the reference's parameters lies in (a shared expert), or,
    when the module is the reference's too or the reference's names are unknown, the
    layer that holds the parameter (a bias: the line that builds that layer)."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i])
        if theirs and not any(n == prefix or n.startswith(prefix + ".") for n in theirs):
            named = [p for p in parts[:i] if not p.isdigit()]
            if named:
                return named[-1]
    return next((p for p in reversed(parts[:-1]) if not p.isdigit()), "")


def _extra(student: Trace, ref: Reference, source: str, spans: dict) -> Where | None:
    """A layer built with a parameter the reference lacks: the line in __init__ that
    builds it, where the probe's layout names it (the values cannot: the grader
    fills such a parameter with fixed values, so the forward line only looks wrong).
    The line is named only where one assignment in the file builds it."""
    layout = student.result.get("layout") if isinstance(student.result, dict) else None
    base = ref.traces[0].result
    theirs = base.get("layout", {}).get("extra") if isinstance(base, dict) else None
    extra = layout.get("extra") if isinstance(layout, dict) else None
    if not isinstance(extra, list) or not extra or theirs:
        return None
    name = extra[0]
    if not isinstance(name, str) or not _EXTRA.fullmatch(name):
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    state = ref.request[1].get("state") if isinstance(ref.request[1], dict) else None
    attr = _lacking(name, set(state) if isinstance(state, dict) else set())
    found = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Attribute) and t.attr == attr
                     and isinstance(t.value, ast.Name) and t.value.id == "self"
                     for t in node.targets)]
    span = spans.get(found[0].lineno) if len(found) == 1 else None
    if span is None:
        return None
    return Where("extra", span[0], span[1], _quote(source.splitlines(), span), name)


def find(student: Trace, ref: Reference, source: str, tols: dict,
         ref_statements: Statements) -> Where | None:
    """The first divergence of a failing part on one traced request, or None.
    `ref_statements`: the reference's (its source's, or a student bundle's digests)."""
    source_lines = source.splitlines()
    mine_statements = Statements.of(source)
    spans = mine_statements.spans
    extra = _extra(student, ref, source, spans)
    if extra is not None:
        return extra
    flags = [_match(e, ref, tols) for e in student.events]
    first = next((i for i, f in enumerate(flags) if f is None), None)
    mine = _Run.of(student.lines, mine_statements)
    base = ref.traces[0]
    theirs = _Run.of(base.lines, ref_statements)
    if "ref" not in flags and not set(mine.texts) & set(theirs.texts):
        return None  # nothing in common with the reference: no line can be named honestly
    limit = mine.at(student.events[first].step) if first is not None else len(mine.spans)
    differ = _first_difference(mine, theirs)

    def matched_before(position: int) -> list[str]:
        """The tensors matched before `position`, the nearest last (numbers and
        throwaway names say little)."""
        names = [e.name for e, f in zip(student.events, flags)
                 if f == "ref" and mine.at(e.step) < position and e.value.dim() > 0
                 and not e.name.startswith(("return", "_"))]
        return list(dict.fromkeys(names))[-MAX_MATCHED:]

    if differ is not None and differ < len(mine.spans) and differ <= limit:
        produced = [f for e, f in zip(student.events, flags) if mine.at(e.step) == differ]
        span = mine.spans[differ]
        # the code ran as the reference's up to this statement: what it computes here
        # is compared with what the reference computed here, name by name
        ref_span = theirs.spans[differ] if differ < len(theirs.spans) else None
        ref_spans = ref_statements.spans
        seen: set[str] = set()
        for e in student.events:  # this statement's first values (a call may come between)
            if (spans.get(e.line) != span or mine.at(e.step) < differ
                    or e.name.startswith("return") or e.name in seen):
                continue
            seen.add(e.name)
            here = [r.value for r in base.events if ref_spans.get(r.line) == ref_span
                    and theirs.at(r.step) >= differ and r.name == e.name][:1]
            if here and not any(same_values(e.value, r, tols) for r in here):
                return Where("line", span[0], span[1], _quote(source_lines, span), e.name,
                             matched_before(differ), **_quoted(e.value, here[0], tols))
        head = _quote(source_lines, span).split(" ", 1)[0].rstrip(":")
        if not produced and head in _BRANCH:
            return Where("path", span[0], span[1], _quote(source_lines, span),
                         matched=matched_before(differ))
        if not produced:
            names = [e.name for e in base.events if theirs.at(e.step) == differ
                     and not e.name.startswith("return")]
            if names:
                return Where("skip", span[0], span[1], _quote(source_lines, span),
                             ", ".join(dict.fromkeys(names)), matched_before(differ))
    if first is None:
        if student.error or not isinstance(student.result, dict):
            return None
        result = base.result
        if not same_forward(student.result, result, tols) or same_gradients(
                student.result, result, tols):
            return None
        cut = _backward(student, flags, ref, tols)
        if cut is None:
            return Where("gradient")
        event, missing, added = cut
        at = spans.get(event.off or event.line)
        if at is None:
            return Where("gradient")
        return Where("cut" if missing is not None else "added", at[0], at[1],
                     _quote(source_lines, at), event.name, [], ", ".join(added or []),
                     ", ".join(missing or []))
    event = student.events[first]
    at = spans.get(event.line)
    if at is None:
        return None
    before = student.events[:first]
    same_name = (ref.returns(event.func, event.name) if event.name.startswith("return")
                 else ref.named(event.name))
    if (not any(f == "ref" and e.value.dim() > 0 for e, f in zip(before, flags))
            and (not same_name or event.value.dim() == 0)):
        # no tensor of the reference's before it, and this is no tensor the reference
        # computes under that name: code written otherwise from its first value (weights
        # packed for a fused kernel, a constructor's own arguments), where "up to here
        # every value matches" would say nothing true
        return None
    occurrence = sum(1 for e in before if e.name == event.name and e.func == event.func)
    ref_value = same_name[min(occurrence, len(same_name) - 1)] if same_name else None
    return Where("line", at[0], at[1], _quote(source_lines, at), event.name,
                 matched_before(mine.at(event.step)), **_quoted(event.value, ref_value, tols))


def _backward(student: Trace, flags: list[str | None], ref: Reference, tols: dict
              ) -> tuple[Event, list[str] | None, list[str] | None] | None:
    """Every forward value matches: the first of the student's values whose gradient
    flows back to other leaves (inputs, parameters) than every value of the
    reference's that equals it, with the names of the leaves it misses (None: it
    misses none) and adds (the reference's trace names them); None when each
    reaches what one of the reference's does, or a reach is unknown (a recording of
    an earlier version)."""
    names = {k: v for t in ref.traces for k, v in t.leaves.items()}
    for e, f in zip(student.events, flags):
        if f != "ref" or e.reach is None or not e.value.is_floating_point():
            continue
        theirs = [reach for value, reach in ref.distinct(e.value.numel())
                  if value.is_floating_point() and same_values(e.value, value, tols)]
        reaches = [r for r in theirs if r is not None]
        if not theirs or len(reaches) < len(theirs):  # one's reach is unknown
            continue
        if e.reach in reaches:
            continue
        missing = frozenset.intersection(*(r - e.reach for r in reaches))
        added = frozenset.intersection(*(e.reach - r for r in reaches))
        if not missing and not added:
            return None  # its reach is another's of the same value, mixed: say no line
        return (e, sorted(names[k] for k in missing if k in names) if missing else None,
                sorted(names[k] for k in added if k in names))
    return None


# ---------------------------------------------------------------- a lesson's references

@dataclass
class Variant:
    """A correct variant of the solution: its text and the lines where it differs."""
    source: str
    lines: frozenset[int]


@dataclass
class LessonTraces:
    """The reference's and its correct variants' traces of one lesson, per part:
    computed on a part's first failure in a run, then reused for every student.
    `source` None: a student bundle's, from its recording (values only, `for_students`)."""
    key: str
    source: str | None
    # the correct variants, or how to find them on first need (`correct`)
    variants: list[Variant] | Callable[[], list[Variant]]
    probes: types.ModuleType
    tolerances: dict
    tests: Path                 # the lesson's tests folder: its fresh inputs live there
    # request key -> a Reference as plain data (`_plain`), packed (`_packed`): the
    # lesson's references' (LessonRefs.traces, recorded with its results), read first
    # and filled here
    recorded: dict[str, torch.Tensor] = field(default_factory=dict)
    compute: bool = True        # False: from the recording only, the solution never run
    # part -> its fresh requests ([probe, args]), and the reference's statements'
    # digests by number (`Statements.anonymous`): a student bundle's, whose tests
    # folder has no trace_inputs.py and which holds no solution (`for_students`)
    fresh: dict[str, list] | None = None
    digests: dict[int, str] | None = None
    _statements: Statements | None = None
    _modules: dict[int, types.ModuleType] = field(default_factory=dict)
    _cache: dict[str, list[Reference]] = field(default_factory=dict)

    def correct(self) -> list[Variant]:
        """The correct variants, found when a trace is first computed: generating the
        mutants they are takes seconds, which a run whose traces are all recorded
        (a check after the first, a watch that warmed) never needs."""
        if callable(self.variants):
            self.variants = self.variants()
        return self.variants

    def module(self, i: int) -> types.ModuleType:
        """The solution (0) or variant i - 1, compiled under a name of its own."""
        if i not in self._modules:
            text = self.source if i == 0 else self.correct()[i - 1].source
            if text is None:  # a student bundle: the trusted side has no solution
                raise ValueError(f"lesson {self.key}: no solution text to trace")
            name = f"<traced {self.key} {i}>"
            module = types.ModuleType(f"_traced_{self.key}_{i}")
            module.__file__ = name
            exec(compile(text, name, "exec"), module.__dict__)
            self._modules[i] = module
        return self._modules[i]

    def statements(self) -> Statements:
        """The reference's statements, read once a run."""
        if self._statements is None:
            self._statements = (Statements.of(self.source) if self.source is not None
                                else Statements.numbered(self.digests or {}))
        return self._statements

    def references(self, part: str) -> list[Reference]:
        """The part's traced fresh inputs (the lesson's trace_inputs.py), each once a run."""
        if part not in self._cache:
            found = (self.reference(probe, args) for probe, args in self.requests(part))
            self._cache[part] = [ref for ref in found if ref is not None]
        return self._cache[part]

    def requests(self, part: str) -> list:
        """The part's fresh requests ([probe, args]): its trace_inputs.py's, or a
        student bundle's, recorded."""
        return (trace_inputs.fresh_inputs(self.tests, self.key, part)
                if self.fresh is None else self.fresh.get(part, []))

    def reference(self, probe: str, args: dict) -> Reference | None:
        """The reference's and the agreeing variants' traces of one request; None when
        the reference cannot take it (not a request to trace on), or when it is not
        recorded and this run computes nothing."""
        key = request_key(probe, args)
        if key not in self.recorded:
            if not self.compute:
                return None
            found = self._traced(probe, args)
            self.recorded[key] = _packed(_plain(found) if found is not None else {"traces": []})
            return found  # computed here: no need to decode what was just packed
        plain = protocol.loads(self.recorded[key].numpy().tobytes())
        if not isinstance(plain, dict):  # not a packed trace (another version's): none
            return None
        traces = [Trace(_events(t.get("events"), None), t.get("result"),
                        str(t.get("error") or ""), [int(n) for n in t.get("lines") or []],
                        _leaves(t.get("leaves")))
                  for t in plain.get("traces") or []]
        return Reference((probe, args), traces, _tensors(args)) if traces else None

    def _traced(self, probe: str, args: dict) -> Reference | None:
        base = run_traced(self.module(0), self.probes, probe, args)
        if base.error:
            return None
        # only variants that differ on a line this request runs can differ here; a
        # variant is correct for the inputs the contract allows, so on this one its
        # values count only where its results are the reference's
        ran = set(base.lines)
        traces = [base]
        for i, v in enumerate(self.correct(), start=1):
            if v.lines & ran:
                t = run_traced(self.module(i), self.probes, probe, args)
                if not t.error and _same_result(t.result, base.result, self.tolerances,
                                                lambda _: True):
                    traces.append(t)
        return Reference((probe, args), traces, _tensors(args))


def _packed(plain: dict) -> torch.Tensor:
    """A request's traces as they are kept and recorded: one encoded frame, as a byte
    tensor. Decoded, the recording's 26,000 values were as many tensor objects in the
    trusted process of every run, which a Gradescope container could not spare; packed,
    they are one object per request, decoded only when a part is traced on it."""
    return torch.frombuffer(bytearray(protocol.dumps(plain)), dtype=torch.uint8)


def _plain(ref: Reference) -> dict:
    """A Reference's traces as the protocol's plain data (a recording's), events as
    the tracer sends them."""
    return {"traces": [{"events": [[e.line, e.name, e.value, e.func, e.step,
                                    None if e.reach is None else sorted(e.reach), e.off]
                                   for e in t.events],
                        "result": t.result, "error": t.error, "lines": t.lines,
                        "leaves": [[k, n] for k, n in t.leaves.items()]}
                       for t in ref.traces]}


def fresh_for_recording(ctx, stop: Callable[[], bool] = lambda: False) -> int:
    """Compute, for a recording, the reference's side of every fresh input a failing
    part's feedback asks about: the lesson's trace inputs, the candidates of its
    smallest examples (their results into the reference's cache, their traces into the
    lesson's) and its questions' inputs (grader/judge/questions.py). A run from that
    recording then shows all three without the solution. `stop` is asked between
    requests (`grader check --watch` computes this while the student edits, and stops
    when a save comes). How many requests were traced."""
    from grader.judge import questions, smallest
    lessons = lesson_traces(ctx)
    if lessons is None:
        return 0

    def trace(probe: str, args: dict) -> None:  # a recorded one is not decoded now
        if request_key(probe, args) not in lessons.recorded:
            lessons.reference(probe, args)

    for part in trace_inputs.builders(Path(ctx.tests)):
        for probe, args in lessons.requests(part):
            if stop():
                return len(lessons.recorded)
            trace(probe, args)
    for _, probe, args in smallest.requests(Path(ctx.tests)):
        if stop():
            return len(lessons.recorded)
        ctx.refs.reference.call(probe, **args)
        trace(probe, args)
    for probe, args in questions.requests(Path(ctx.tests)):
        if stop():
            break
        ctx.refs.reference.call(probe, **args)
    return len(lessons.recorded)


def for_students(ctx) -> dict:
    """What a student bundle's check needs to name a line: each part's fresh requests
    (inputs of the lesson's trace_inputs.py, no graded case's), the reference's traces
    of them and of its smallest examples' candidates (traced first, on the example
    shown), kept in the lesson's recording (`LessonRefs.traces`), and its statements'
    digests. No text and no line number of the solution: a statement is a number and
    a digest (`Statements.anonymous`), the reference's path and values are told by
    those numbers, and its correct variants' traces keep their values only.
    {"requests": part -> [[probe, args], ...], "statements": [[number, digest], ...]}."""
    lessons = lesson_traces(ctx)
    if lessons is None or lessons.source is None:
        return {}
    from grader.judge import smallest
    digests, number = lessons.statements().anonymous()
    requests: dict[str, list] = {}
    kept: dict[str, torch.Tensor] = {}

    def keep(ref: Reference) -> None:
        plain = _plain(ref)
        for i, t in enumerate(plain["traces"]):
            base = i == 0  # the variants' paths are never compared
            t["lines"] = [number.get(n, 0) for n in t["lines"]] if base else []
            t["events"] = [[number.get(line, 0) if base else 0, name, value, func,
                            step if base else 0, reach, 0]
                           for line, name, value, func, step, reach, _ in t["events"]]
        kept[request_key(*ref.request)] = _packed(plain)

    for part in trace_inputs.builders(Path(ctx.tests)):
        requests[part] = []
        for ref in lessons.references(part):
            requests[part].append(list(ref.request))
            keep(ref)
    for _, probe, args in smallest.requests(Path(ctx.tests)):  # traced first (`where`)
        found = lessons.reference(probe, args)
        if found is not None:
            keep(found)
    ctx.refs.traces.clear()  # nothing else: another recording's traces hold lines
    ctx.refs.traces.update(kept)
    return {"requests": requests, "statements": [[i, d] for i, d in digests.items()]}


def correct_variants(source: str, tests) -> list[Variant]:
    """The lesson's equivalent mutants (equivalent_mutants.yml): correct code written
    otherwise, so that their values count as the reference's too."""
    from grader.lesson import equivalents, mutants
    listed = equivalents.load(tests)
    if not listed:
        return []
    operators = sorted({mutant_id.split("-", 1)[0] for mutant_id in listed})
    lines = source.splitlines()
    out = []
    for m in mutants.generate(source, operators).mutants:
        if m.id in listed:
            new = m.source.splitlines()
            changed = {n for n, (a, b) in enumerate(zip(lines, new), start=1) if a != b}
            out.append(Variant(m.source, frozenset(changed or {m.line})))
    return out


def lesson_traces(ctx, compute: bool = True) -> LessonTraces | None:
    """The run's LessonTraces (kept on the lesson context), or None without a solution
    nor a student bundle's recorded traces (`for_students`). `compute` False: the
    recorded traces only (a run from the autograder zip's recording, which must not
    import the solution)."""
    found = getattr(ctx, "_lesson_traces", None)
    if found is None and ctx.refs.source is None and ctx.refs.fresh:
        fresh = ctx.refs.fresh
        found = LessonTraces(ctx.key, None, [], ctx.refs.probes, ctx.course.tolerances(ctx.key),
                             ctx.tests, ctx.refs.traces, False, fresh["requests"],
                             fresh["statements"])
        ctx._lesson_traces = found
    if found is None:
        source = ctx.refs.source
        if source is None:
            return None
        found = LessonTraces(ctx.key, source,
                             (lambda: correct_variants(source, ctx.tests)) if compute else [],
                             ctx.refs.probes, ctx.course.tolerances(ctx.key), ctx.tests,
                             ctx.refs.traces, compute)
        ctx._lesson_traces = found
    return found


def where(call: Callable[[str, dict], object], lessons: LessonTraces, part: str,
          source: str, first: tuple[str, dict] | None = None) -> Where | None:
    """Trace `part` of a failing submission through `call(probe, args)` (the child's
    traced call, returning {"result", "trace", "error"}) on each fresh request until
    one shows it differing; the finding there, or None. `first`: the part's smallest
    failing example (grader/judge/smallest.py), tried before the lesson's fresh inputs, so
    that the values a page quotes are those of the snippet it shows."""
    lines = len(source.splitlines())
    mine = lessons.reference(*first) if first is not None else None
    for ref in ([mine] if mine is not None else []) + lessons.references(part):
        probe, args = ref.request
        try:
            reply = call(probe, args)
        except StudentError:  # the child failed: its tests say how
            return None
        if not isinstance(reply, dict):
            return None
        student = Trace(_events(reply.get("trace"), lines), reply.get("result"),
                        str(reply.get("error") or "")[:200], _lines(reply.get("lines"), lines))
        differs = student.error or not _same_result(student.result, ref.traces[0].result,
                                                    lessons.tolerances, lambda _: True)
        if not differs:
            continue
        return find(student, ref, source, lessons.tolerances, lessons.statements())
    return None


def failing_parts(raw: dict) -> list[str]:
    """The parts with a failing test in a raw log, in their order."""
    from grader.lesson.testfile import part_of
    parts: dict[str, None] = {}
    for t in raw.get("tests", []):
        if t.get("outcome") != "passed":
            parts[part_of(t["nodeid"].split("::", 1)[0])] = None
    return list(parts)


def trace_failing(ctx, session, raw: dict, first: dict[str, tuple[str, dict]] | None = None,
                  compute: bool = True) -> tuple[dict[str, dict], float]:
    """Each failing part's finding (as JSON) for a graded submission whose session is
    still open, and the seconds it took. Feedback only: no verdict reads it. `first`:
    per part, the request of its smallest failing example, traced first (`where`);
    `compute`: as `lesson_traces`.

    The trace runs in the graded child while it is alive (no second child to fork and
    import the submission in: a mistaken student's dearest cost), its calls aside
    (`Session.aside`: a budget of their own). Once that child is gone, or it dies in a
    trace, the rest runs in a session of its own: a fresh child of the same slot, closed
    before this returns. A trace never restarts the graded child: that imported the
    submission again (its prints once more in the student's output), could set its
    fatal import error or spend its budget: what the student's record says. Only the
    child's failures (StudentError) are the trace's to swallow; a fault of the slot
    itself is raised, as in a test, and never leaves the slot out of step for the next
    student."""
    started = time.monotonic()
    parts = failing_parts(raw)
    if not parts or session is None or session.fatal is not None:
        return {}, 0.0
    lessons = lesson_traces(ctx, compute)
    if lessons is None:
        return {}, 0.0
    from grader.sandbox.session import Session

    own: list[Session] = []  # the trace's own session, once the graded child is gone

    def call(probe: str, args: dict) -> object:
        frame = protocol.dumps({"probe": probe, "args": args, "trace": True})
        if not own and session.alive:
            with session.aside():
                return session.call(probe, args, "tracing", frame=frame)
        if not own:
            own.append(session.apart())
        return own[0].call(probe, args, "tracing", frame=frame)

    found: dict[str, dict] = {}
    try:
        for part in parts:
            w = where(call, lessons, part, session.source, (first or {}).get(part))
            if w is not None:
                found[part] = w.to_json()
    finally:
        for traced in own:
            traced.close()
    return found, time.monotonic() - started
