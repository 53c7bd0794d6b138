"""A program's statements, as two runs are compared: each line's statement, its
digest, and the statements a trace ran, in order."""
from __future__ import annotations

import ast
import functools
import hashlib
import re
from dataclasses import dataclass

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
        return cls(spans, {span: hashlib.sha256(_norm(quote(lines, span)).encode())
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
class Run:
    """A trace's statements in the order they ran (a statement's consecutive line
    events merged): their spans and digests, and each line event's position."""
    spans: list[tuple[int, int]]
    texts: list[str]
    position: list[int]

    @classmethod
    def of(cls, lines: list[int], stmts: Statements) -> Run:
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


def first_difference(mine: Run, theirs: Run) -> int | None:
    """The first position where the statements run differ in text, or where one run
    ends before the other; None when they ran the same statements."""
    for i, (a, b) in enumerate(zip(mine.texts, theirs.texts)):
        if a != b:
            return i
    return None if len(mine.texts) == len(theirs.texts) else min(len(mine.texts),
                                                                  len(theirs.texts))
