"""Mutants of a lesson's solution, one change each, inside the solution markers only.

A mutant is found on the syntax tree (`ast`) and written back into the solution's
own text: only the changed expression or statement is replaced (by `ast.unparse` of
its new form), so the file keeps its comments and the diff shows just the change.
Each splice is checked by parsing it again; where precedence would change the
meaning, the new expression is parenthesised.
"""
from __future__ import annotations

import ast
import copy
import difflib
import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from grader.lesson.operators import OPERATORS
from grader.lesson.release import MARKER


@dataclass(frozen=True)
class Mutant:
    id: str          # operator-line.col-index: stable while the solution is unchanged
    operator: str
    line: int
    col: int
    source: str      # the whole mutated file

    def diff(self, solution: str, name: str) -> str:
        return "".join(difflib.unified_diff(
            solution.splitlines(keepends=True), self.source.splitlines(keepends=True),
            f"{name} (solution)", f"{name} ({self.id})", n=1))

    def change(self, solution: str) -> str:
        """The changed lines, one `- old` / `+ new` each: short enough for a table or
        the equivalents file."""
        lines = [line.rstrip("\n") for line in difflib.unified_diff(
            solution.splitlines(keepends=True), self.source.splitlines(keepends=True), n=0)]
        return "\n".join(f"{line[0]} {line[1:].strip()}" for line in lines[2:]
                         if line[:1] in "+-")


@dataclass
class Mutants:
    mutants: list[Mutant] = field(default_factory=list)
    uncompilable: int = 0  # a change the compiler refuses: skipped, counted
    duplicates: int = 0    # the same text as the solution or an earlier mutant


def solution_lines(source: str) -> list[tuple[int, int]]:
    """(begin, end) marker line numbers of each `### BEGIN/END SOLUTION` block."""
    blocks, begin = [], None
    for number, line in enumerate(source.splitlines(), start=1):
        m = MARKER.match(line)
        if m and m.group(3) == "SOLUTION":
            if m.group(2) == "BEGIN":
                begin = number
            elif begin is not None:
                blocks.append((begin, number))
                begin = None
    return blocks


def _walk(node: ast.AST, parent: ast.AST | None = None, path: tuple = ()
          ) -> Iterator[tuple[ast.AST, ast.AST | None, tuple]]:
    """Every node in source order, with its parent and its path from the root."""
    yield node, parent, path
    for name, value in ast.iter_fields(node):
        items = value if isinstance(value, list) else [value]
        for i, child in enumerate(items):
            if isinstance(child, ast.AST):
                yield from _walk(child, node, (*path, (name, i if isinstance(value, list)
                                                       else None)))


def _inside(node: ast.AST, blocks: list[tuple[int, int]]) -> bool:
    line, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    return line is not None and end is not None and any(b < line and end < e for b, e in blocks)


def _position(node: ast.AST) -> tuple[int, int, int, int]:
    """Where a target is: (line, column, end line, end column), as the parser placed it
    (every node an operator targets is an expression, a statement or a keyword)."""
    if not isinstance(node, (ast.expr, ast.stmt, ast.keyword)) or node.end_lineno is None \
            or node.end_col_offset is None:
        raise ValueError(f"an operator targeted a node with no position: {ast.dump(node)}")
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


def _replaced(tree: ast.Module, path: tuple, new: ast.AST) -> ast.Module:
    """A copy of the tree with the node at `path` replaced."""
    tree = copy.deepcopy(tree)
    parent = tree
    for name, index in path[:-1]:
        parent = getattr(parent, name) if index is None else getattr(parent, name)[index]
    name, index = path[-1]
    if index is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[index] = new
    return tree


def _splice(source: str, node: ast.AST, text: str) -> str:
    """Replace the node's span (positions are UTF-8 byte columns) with `text`."""
    lines = source.encode("utf-8").splitlines(keepends=True)
    line, column, end_line, end_column = _position(node)
    start = sum(map(len, lines[:line - 1])) + column
    end = sum(map(len, lines[:end_line - 1])) + end_column
    first = lines[line - 1].decode("utf-8")
    indent = first[:len(first) - len(first.lstrip())]
    text = text.replace("\n", "\n" + indent)
    data = source.encode("utf-8")
    return (data[:start] + text.encode("utf-8") + data[end:]).decode("utf-8")


def _same_tree(source: str, expected: str) -> bool:
    try:
        return ast.dump(ast.parse(source)) == expected
    except SyntaxError:
        return False


def mutated_source(source: str, tree: ast.Module, path: tuple, target: ast.AST,
                   new: ast.AST) -> str:
    """The solution's text with one change; the whole file is unparsed only where a
    splice cannot express it."""
    expected = _replaced(tree, path, new)
    dump = ast.dump(expected)
    text = ast.unparse(new)
    for candidate in (text, f"({text})"):
        spliced = _splice(source, target, candidate)
        if _same_tree(spliced, dump):
            return spliced
    return ast.unparse(expected) + "\n"


def _compiles(source: str) -> bool:
    try:
        compile(source, "<mutant>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def generate(source: str, operators: Iterable[str] = OPERATORS) -> Mutants:
    """Every mutant the operators make of the code inside the solution markers."""
    tree = ast.parse(source)
    blocks = solution_lines(source)
    paths = {id(node): path for node, _, path in _walk(tree)}
    result, seen, index = Mutants(), {source}, Counter[tuple[str, int, int]]()
    for node, parent, _ in _walk(tree):
        if not _inside(node, blocks):
            continue
        for name in operators:
            for target, new in OPERATORS[name](node, parent):
                line, column, _, _ = _position(target)
                key = (name, line, column)
                mutant_id = f"{name}-{line}.{column}-{index[key]}"
                index[key] += 1
                text = mutated_source(source, tree, paths[id(target)], target, new)
                if text in seen:
                    result.duplicates += 1
                elif not _compiles(text):
                    result.uncompilable += 1
                else:
                    seen.add(text)
                    result.mutants.append(Mutant(mutant_id, name, line, column, text))
    return result


def sample(mutants: list[Mutant], n: int | None) -> list[Mutant]:
    """A deterministic sample of n (by a hash of each id), in source order."""
    if n is None or n >= len(mutants):
        return list(mutants)
    chosen = set(sorted((m.id for m in mutants),
                        key=lambda i: hashlib.sha256(i.encode()).hexdigest())[:n])
    return [m for m in mutants if m.id in chosen]
