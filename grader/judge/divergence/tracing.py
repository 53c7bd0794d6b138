"""A failing part traced in the student's sandbox, on fresh requests, and its finding
for the page."""
from __future__ import annotations

import ast
import dataclasses
import time
from collections.abc import Callable

from grader.inside import protocol
from grader.judge.divergence import untrusted
from grader.judge.divergence.finding import find
from grader.judge.divergence.lesson import LessonTraces, lesson_traces
from grader.judge.divergence.matching import same_result
from grader.judge.divergence.statements import Statements, quote
from grader.judge.divergence.untrusted import Trace
from grader.record import Where
from grader.sandbox.limits import StudentError


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
        student = Trace(untrusted.events(reply.get("trace"), lines), reply.get("result"),
                        str(reply.get("error") or "")[:200], untrusted.lines_run(reply.get("lines"), lines))
        differs = student.error or not same_result(student.result, ref.traces[0].result,
                                                    lessons.tolerances, lambda _: True)
        if not differs:
            continue
        return with_raise(find(student, ref, source, lessons.tolerances, lessons.statements()),
                          untrusted.raised(reply.get("raised"), lines), source)
    return None


def with_raise(found: Where | None, raised: tuple[int, str] | None, source: str
               ) -> Where | None:
    """The finding with the line that raised, where one did: its own box, after the
    finding's when the values differed before it; the only box when nothing differed
    before it, or when the finding is that same statement (which "computes nothing"
    only because it raised)."""
    if raised is None:
        return found
    line, error = raised
    span = Statements.of(source).span(line)
    code = quote(source.splitlines(), span)
    if found is None or not found.line or found.line <= line <= found.end:
        found = Where("raised")
    return dataclasses.replace(found, raise_line=span[0], raise_end=span[1],
                               raise_code=code, raise_error=error)


def _owner(source: str, line: int) -> str:
    """The name of the top-level function or class holding `line` ("" for none)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ""
    return next((node.name for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                 and node.lineno <= line <= (node.end_lineno or node.lineno)), "")


def upstream(found: dict[str, Where], failing: list[str], source: str,
             composite: str, names: dict[str, str]) -> dict[str, Where]:
    """The composite part's finding pointed upstream: where its values first differ (or
    a line raises) in the code of an earlier part (`names`: part -> its function or
    class), its box names that part and the line that part's own box names, rather
    than tracing inside the composite part. Where that earlier part passed its own
    tests, the difference cannot be told apart from one the composite part's wiring
    causes: no line is named."""
    w = found.get(composite)
    if w is None or not names:
        return found
    part_of = {name: part for part, name in names.items()}
    main = w.raise_line if w.kind == "raised" else w.line
    raise_in = part_of.get(_owner(source, w.raise_line)) if w.raise_line else None
    part = part_of.get(_owner(source, main)) if main else None
    out = dict(found)
    if part is None:
        if raise_in is not None and w.kind != "raised":  # the raise is that part's to tell
            out[composite] = dataclasses.replace(w, raise_line=0, raise_end=0, raise_code="",
                                                 raise_error="")
        return out
    if part not in failing:
        del out[composite]
        return out
    theirs = found.get(part)
    if theirs is not None and theirs.kind == "raised":
        line, last, code = theirs.raise_line, theirs.raise_end, theirs.raise_code
    elif theirs is not None and theirs.line:
        line, last, code = theirs.line, theirs.end, theirs.code
    else:
        span = Statements.of(source).span(main)
        line, last, code = span[0], span[1], quote(source.splitlines(), span)
    own = w.kind != "raised" and raise_in is None  # a raise in the composite's own code
    out[composite] = Where("upstream", line, last, code, names[part], part=part,
                           raise_line=w.raise_line if own else 0,
                           raise_end=w.raise_end if own else 0,
                           raise_code=w.raise_code if own else "",
                           raise_error=w.raise_error if own else "")
    return out


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

    found: dict[str, Where] = {}
    try:
        for part in parts:
            w = where(call, lessons, part, session.source, (first or {}).get(part))
            if w is not None:
                found[part] = w
    finally:
        for traced in own:
            traced.close()
    found = upstream(found, parts, session.source, *lessons.composite())
    return {part: w.to_json() for part, w in found.items()}, time.monotonic() - started
