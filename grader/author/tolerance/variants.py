"""The correct variants the advice rests on: a folder of them, and three generated from
the solution, so that a lesson with no hand-written variant still gets a measurement.
Precision is not a mistake: `grader selftest` holds the lesson's tolerances to these.

- `no-downcast`: the solution with every float32 cast made a float64 one, on the
  inputs as given, its results cast back to the reference's dtypes: the rounding a
  down-cast adds (MiniMind's `.float()` on float64 inputs) taken away.
- `float64-inside`: the solution with every float32 cast made a float64 one, given
  float64 copies of its floating inputs, its results cast back to the reference's
  dtypes: the same mathematics computed with more bits, rounded once at the end.
- `reassociated`: every chain `a + b + c` / `a * b * c` inside the solution blocks
  summed or multiplied the other way round, `a + (b + c)`: a different order of the
  same arithmetic, as a student may well write it.
"""
from __future__ import annotations

import ast
import re
import types
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.lesson.mutants import solution_lines
from grader.judge.reference import Caller, load_module

FLOAT32 = [(re.compile(r"\.float\(\)"), ".double()"),
           (re.compile(r"\btorch\.float32\b"), "torch.float64"),
           (re.compile(r"\btorch\.float\b(?!\d)"), "torch.float64")]


_FLOATS = ("torch.float", "torch.bfloat", "torch.half", "torch.double")


@dataclass
class Variant:
    name: str
    about: str
    caller: object  # a Caller, or a wrapper with the same `call`


def from_folder(folder: Path | None, probes: types.ModuleType) -> list[Variant]:
    """Each *.py of `folder` as a module (an empty list without a folder)."""
    if folder is None:
        return []
    return [Variant(p.stem, f"{folder.name}/{p.name}",
                    Caller(load_module(f"_correct_{p.stem}", p.read_text(encoding="utf-8"),
                                       str(p)), probes))
            for p in sorted(folder.glob("*.py"))]


def _cast(value, like):
    """`value` with each floating tensor cast to the dtype of its place in `like`."""
    if isinstance(value, torch.Tensor) and isinstance(like, torch.Tensor):
        return value.to(like.dtype) if like.is_floating_point() else value
    if isinstance(value, dict) and isinstance(like, dict):
        return {k: _cast(v, like.get(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and isinstance(like, (list, tuple)):
        return type(value)(_cast(v, w) for v, w in zip(value, like))
    if isinstance(value, str) and isinstance(like, str) and value.startswith(_FLOATS) \
            and like.startswith(_FLOATS):
        return like  # a dtype a probe reports by name is cast back too
    return value


def _wide(value):
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: _wide(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_wide(v) for v in value)
    return value


class Widened:
    """Calls the float64 module (on float64 inputs, if `widen`); results in the
    reference's dtypes."""

    def __init__(self, inner: Caller, reference: Caller, widen: bool = True):
        self.inner, self.reference, self.widen = inner, reference, widen

    def call(self, probe: str, **args) -> dict:
        given = _wide(args) if self.widen else args
        return _cast(self.inner.call(probe, **given), self.reference.call(probe, **args))


class _Reassociate(ast.NodeTransformer):
    def __init__(self, lines: list[tuple[int, int]]):
        self.lines, self.changed = lines, 0

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        inner = node.left
        inside = any(a < node.lineno < b for a, b in self.lines)
        if (inside and isinstance(node.op, (ast.Add, ast.Mult)) and isinstance(inner, ast.BinOp)
                and type(inner.op) is type(node.op)):
            self.changed += 1
            return ast.copy_location(ast.BinOp(inner.left, node.op,
                                               ast.BinOp(inner.right, node.op, node.right)), node)
        return node


def reassociated(source: str) -> str | None:
    """The solution with its + and * chains re-associated (None: it has none)."""
    tree = ast.parse(source)
    fix = _Reassociate(solution_lines(source))
    tree = ast.fix_missing_locations(fix.visit(tree))
    return ast.unparse(tree) if fix.changed else None


def float64_inside(source: str) -> str:
    for pattern, new in FLOAT32:
        source = pattern.sub(new, source)
    return source


GENERATED = ("no-downcast", "float64-inside", "reassociated")


def generated(source: str, reference: Caller, probes: types.ModuleType,
              key: str) -> tuple[list[Variant], list[str]]:
    """The generated variants, and a note for each that could not be made."""
    out, notes = [], []
    wide_source = float64_inside(source)
    wide = load_module(f"_tolerance_{key}_float64", wide_source, "solution")
    if wide_source != source:
        out.append(Variant("no-downcast", "the solution's float32 casts made float64 ones, "
                           "rounded once at the end",
                           Widened(Caller(wide, probes), reference, widen=False)))
    else:
        notes.append("no-downcast: the solution has no float32 cast to remove")
    out.append(Variant("float64-inside", "the solution computed in float64, rounded once",
                       Widened(Caller(wide, probes), reference)))
    text = reassociated(source)
    if text is None:
        notes.append("reassociated: the solution has no + or * chain to reorder")
    else:
        out.append(Variant("reassociated", "the solution's + and * chains summed the other "
                           "way round", Caller(load_module(f"_tolerance_{key}_reassoc", text,
                                                           "solution"), probes)))
    return out, notes
