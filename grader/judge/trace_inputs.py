"""Fresh, small inputs to trace a failing part on (grader/judge/divergence/).

Not graded cases: their seeds lie far above any a hidden or practice test draws
(those are small integers), so the values a page shows for them reveal no case. Each
part gets a short list, tried in order until one shows the student's function
differing from the reference: float64 first (the comparison is then sharp), then
what only another dtype or another setting shows.

What the inputs are is the lesson's: its tests folder's `trace_inputs.py` holds
`BUILDERS`, part -> a function of a seeded generator returning requests. This module
holds only the seeds and the loading; a lesson without that file is traced on nothing.
"""
from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import torch

from grader.judge.reference import lesson_file
from grader.lesson import seeds

SEED_BASE = seeds.TRACES      # no hidden or practice test draws a seed this large
Request = tuple[str, dict]     # (probe, args), as a probe call takes them
Builder = Callable[[torch.Generator], list[Request]]
FILE = "trace_inputs.py"       # in a lesson's tests folder; never shipped to students


def _gen(lesson: str, part: str, i: int) -> torch.Generator:
    return torch.Generator().manual_seed(SEED_BASE + zlib.crc32(f"{lesson}:{part}".encode())
                                         + i)


def randn(g: torch.Generator, *shape: int, scale: float = 1.0,
          dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Normal values drawn in float64 (the same numbers whatever `dtype`), then cast."""
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def builders(tests: Path) -> dict[str, Builder]:
    """The lesson's builders by part, from its tests folder; none when it has no file."""
    module = lesson_file(Path(tests), FILE)
    return dict(module.BUILDERS) if module is not None else {}


def lesson_number(key: str) -> str:
    """A lesson key or its folder's name (e.g. "13_moe") -> its number ("13")."""
    return key.split("_", 1)[0]


def fresh_inputs(tests: Path, lesson: str, part: str) -> list[Request]:
    """The requests to trace `part` of `lesson` on, in order; none for a part its tests
    folder does not build. The same every call (the reference's traces are cached)."""
    builder = builders(Path(tests)).get(part)
    if builder is None:
        return []
    return builder(_gen(lesson_number(lesson), part, 0))
