"""A program's statements, as two runs are compared: each line's statement, its
digest, and the statements a trace ran, in order."""
from __future__ import annotations

import ast
import functools
import hashlib
import re
from dataclasses import dataclass, field

from grader.record import MAX_CODE


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


def constructors(source: str) -> frozenset[int]:
    """The lines of every `__init__`, and of the file's functions an `__init__` calls
    (a helper building a config): what they build, the grader's state replaces, so how
    a student lays them out says nothing of where their values differ."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    defs = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    inits = [node for node in defs if node.name == "__init__"]
    called = {c.func.id if isinstance(c.func, ast.Name) else c.func.attr
              for node in inits for c in ast.walk(node) if isinstance(c, ast.Call)
              and isinstance(c.func, (ast.Name, ast.Attribute))}
    built = inits + [node for node in defs if node.name in called and node.name != "forward"]
    return frozenset(n for node in built
                     for n in range(node.lineno, (node.end_lineno or node.lineno) + 1))


def quote(source_lines: list[str], span: tuple[int, int]) -> str:
    text = " ".join(line.strip() for line in source_lines[span[0] - 1:span[1]])
    return text if len(text) <= MAX_CODE else text[:MAX_CODE - 1] + "…"


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", text)


@dataclass
class Statements:
    """A program's statements as two runs are compared: each line's statement span,
    and each span's digest (of its text without blanks), which tells only whether two
    statements are written alike: a student bundle holds the reference's digests
    (`anonymous`), never its text. The statements of a constructor (`__init__`) are
    left out of the comparison (`constructors`): a student who builds the same layers
    in another order, or without the reference's `self.act_fn`, runs the same forward."""
    spans: dict[int, tuple[int, int]]
    digests: dict[tuple[int, int], str]
    constructor: frozenset[tuple[int, int]] = frozenset()

    @classmethod
    @functools.lru_cache(maxsize=8)  # a student's source is read for each failing part
    def of(cls, source: str) -> Statements:
        """(Shared between callers: none changes it.)"""
        spans = statements(source)
        lines = source.splitlines()
        every = set(spans.values()) | {(n, n) for n in range(1, len(lines) + 1)}
        built = constructors(source)
        return cls(spans, {span: hashlib.sha256(_norm(quote(lines, span)).encode())
                           .hexdigest()[:16] for span in every},
                   frozenset(s for s in every if s[0] in built))

    def span(self, line: int) -> tuple[int, int]:
        return self.spans.get(line, (line, line))

    def anonymous(self) -> tuple[dict[int, str], dict[int, int]]:
        """The digests numbered 1, 2, … in the order of their spans, without the
        source's line numbers; and each line's number (none for a constructor's)."""
        number = {span: i for i, span in enumerate(
            sorted(s for s in self.digests if s not in self.constructor), start=1)}
        lines = {n: number[self.span(n)] for n in range(1, max(s[1] for s in number) + 1)
                 if self.span(n) in number} if number else {}
        return {i: self.digests[span] for span, i in number.items()}, lines

    @classmethod
    def numbered(cls, digests: dict[int, str]) -> Statements:
        """`anonymous`'s digests as statements of one line each, at their numbers."""
        return cls({i: (i, i) for i in digests}, {(i, i): d for i, d in digests.items()})


@dataclass
class Run:
    """A trace's statements in the order they ran (a statement's consecutive line
    events merged): their spans and digests, and each line event's position; a
    constructor's line (or one a student bundle numbers not) is no statement of the
    run, its position -1, before all."""
    spans: list[tuple[int, int]]
    texts: list[str]
    position: list[int]
    built: set[str] = field(default_factory=set)  # the constructors' statements run

    @classmethod
    def of(cls, lines: list[int], stmts: Statements) -> Run:
        run = cls([], [], [])
        for n in lines:
            span = stmts.span(n)
            if span in stmts.constructor or span not in stmts.digests:
                run.position.append(-1)
                if span in stmts.digests:
                    run.built.add(stmts.digests[span])
                continue
            if not run.spans or run.spans[-1] != span:
                run.spans.append(span)
                run.texts.append(stmts.digests.get(span, ""))
            run.position.append(len(run.spans) - 1)
        return run

    def at(self, step: int) -> int:
        """The position of the statement that ran `step`; -1 for a parameter bound at a
        call from outside (before all), the end for a step past the lines run."""
        if step == -1:
            return -1
        return self.position[step] if 0 <= step < len(self.position) else len(self.spans)


def first_difference(mine: Run, theirs: Run) -> int | None:
    """The first position where the statements run differ in text, or where one run
    ends before the other; None when they ran the same statements."""
    for i, (a, b) in enumerate(zip(mine.texts, theirs.texts)):
        if a != b:
            return i
    return None if len(mine.texts) == len(theirs.texts) else min(len(mine.texts),
                                                                  len(theirs.texts))


def assigned(source: str, line: int) -> frozenset[str]:
    """The plain names an assignment starting on `line` binds (`xq, xk = …` binds xq
    and xk), so that one left as it was (`xk = xk`) is known as assigned there too."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    targets = [t for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and node.lineno == line for t in node.targets]
    return frozenset(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))


def default_of(source: str, line: int, name: str) -> tuple[int, int] | None:
    """The span of the default of parameter `name` in the function whose `def` (or
    first decorator) is on `line`: where a student's own default is written; None
    when that parameter has no default there."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if line not in (node.lineno, *(d.lineno for d in node.decorator_list)):
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if arg.arg == name:
                return default.lineno, default.end_lineno or default.lineno
    return None
