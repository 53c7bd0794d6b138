"""The finding: the first statement of the student's that produces a value none of
the reference's traces computes (or runs where the reference's runs another), a
layer the reference lacks, or a gradient cut or added; None where no line can be
named honestly."""
from __future__ import annotations

import ast
import re

import torch

from grader.judge.divergence.matching import (
    Reference, match, same_forward, same_gradients, same_values)
from grader.judge.divergence.quoting import quoted, shown
from grader.judge.divergence.statements import (
    Run, Statements, assigned, default_of, first_difference, quote)
from grader.judge.divergence.untrusted import Event, Trace
from grader.record import MAX_MATCHED, Where

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
    return Where("extra", span[0], span[1], quote(source.splitlines(), span), name)


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
    default = _default(student, ref, source, tols)
    if default is not None:
        return default
    # a parameter bound at a call from outside is the probe's argument on both sides,
    # or a default, which `_default` compared: neither a match nor a difference here
    flags = ["param" if e.step == -1 else match(e, ref, tols) for e in student.events]
    first = next((i for i, f in enumerate(flags) if f is None), None)
    mine = Run.of(student.lines, mine_statements)
    base = ref.traces[0]
    theirs = Run.of(base.lines, ref_statements)
    if "ref" not in flags and not (set(mine.texts) | mine.built) & (set(theirs.texts)
                                                                    | theirs.built):
        return None  # nothing in common with the reference: no line can be named honestly
    limit = mine.at(student.events[first].step) if first is not None else len(mine.spans)
    differ = first_difference(mine, theirs)

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
        ref_here: dict[str, Event] = {}  # the reference's first value of each name here
        for r in base.events:
            if ref_spans.get(r.line) == ref_span and theirs.at(r.step) >= differ:
                ref_here.setdefault(r.name, r)
        for e in student.events:  # this statement's first values (a call may come between)
            if (spans.get(e.line) != span or mine.at(e.step) < differ
                    or e.name.startswith("return") or e.name in seen):
                continue
            seen.add(e.name)
            here = ref_here.get(e.name)
            if here is not None and not same_values(e.value, here.value, tols):
                return Where("line", span[0], span[1], quote(source_lines, span), e.name,
                             matched_before(differ), **quoted(e.value, here.value, tols))
        kept = _kept(student, mine, differ, limit, assigned(source, span[0]) - seen,
                     ref_here, tols)
        if kept is not None:
            return Where("line", span[0], span[1], quote(source_lines, span), kept[0].name,
                         matched_before(differ), **quoted(kept[0].value, kept[1], tols))
        head = quote(source_lines, span).split(" ", 1)[0].rstrip(":")
        if not produced and head in _BRANCH:
            return Where("path", span[0], span[1], quote(source_lines, span),
                         matched=matched_before(differ))
        if not produced and differ > 0:  # (at the first statement: nothing ran alike
            # before it to say "here" of; code written otherwise, such as a wrapper that
            # first fetches its block, computes nothing there and is no mistake)
            names = [e.name for e in base.events if theirs.at(e.step) == differ
                     and not e.name.startswith("return")]
            if names:
                return Where("skip", span[0], span[1], quote(source_lines, span),
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
                     quote(source_lines, at), event.name, [], ", ".join(added or []),
                     ", ".join(missing or []))
    event = student.events[first]
    if event.name.startswith("return"):
        # a result returned in another shape (its contract) that an earlier line of the
        # function built as it is, in a shape the reference's value of that name never
        # has: that line built it (a cat along the wrong dim, matched as a transpose
        # until returned), not the return
        built = next((i for i, e in enumerate(student.events[:first])
                      if e.func == event.func and not e.name.startswith("return")
                      and e.value.shape == event.value.shape
                      and e.value.dtype == event.value.dtype
                      and torch.equal(e.value, event.value) and ref.named(e.name)
                      and not any(r.shape == e.value.shape for r in ref.named(e.name))),
                     None)
        if built is not None:
            first, event = built, student.events[built]
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
    return Where("line", at[0], at[1], quote(source_lines, at), event.name,
                 matched_before(mine.at(event.step)), **quoted(event.value, ref_value, tols))


def _kept(student: Trace, mine: Run, differ: int, limit: int, names: frozenset[str],
          ref_here: dict[str, Event], tols: dict) -> tuple[Event, torch.Tensor] | None:
    """A name the differing statement assigns without changing it (`xq, xk =
    self.q_norm(xq), xk` where the reference's has `self.k_norm(xk)`: nothing new to
    trace there) while the reference's statement gives it a new value: the student's
    value as it was, and the reference's new one, where the two differ and no value of
    the student's before its first that the reference never computes is that new one
    (a k norm on the next line is code laid out otherwise). `names`: those the
    statement assigns and produced no value for."""
    for name in sorted(names):
        theirs = ref_here.get(name)
        if theirs is None or theirs.value.dim() == 0:
            continue
        before = [e for e in student.events if e.name == name and e.func == theirs.func
                  and mine.at(e.step) < differ]
        if not before or same_values(before[-1].value, theirs.value, tols):
            continue
        if any(same_values(e.value, theirs.value, tols) for e in student.events
               if mine.at(e.step) < limit):
            continue
        return before[-1], theirs.value
    return None


def _default(student: Trace, ref: Reference, source: str, tols: dict) -> Where | None:
    """A number the grader's call left at a default of the student's own that is not
    the reference's: the line of that default, and the two values (the lesson's
    signature, which the stub shows, holds the reference's). Compared with the
    reference's parameter of that function and name only: none, no finding."""
    for e in student.events:
        if e.step != -1:
            continue
        theirs = [next((r.value for r in t.events if r.step == -1 and r.func == e.func
                        and r.name == e.name), None) for t in ref.traces]
        found = [v for v in theirs if v is not None]
        if not found or any(same_values(e.value, v, tols) for v in found):
            continue
        span = default_of(source, e.line, e.name)
        if span is None:
            continue
        return Where("default", span[0], span[1], quote(source.splitlines(), span), e.name,
                     got=shown(e.value), ref=shown(found[0]))
    return None


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
