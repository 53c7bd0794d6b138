"""Questions instead of guesses: when a part fails and no known mistake explains it,
the trusted side asks the student's function a few more questions on fresh inputs
(never a graded case) and states what the answers prove about it:

- `ignores`: an argument with no effect. Two inputs that differ in that argument
  alone: the reference's outputs differ, the student's are the same.
- `rows`: rows that depend on other rows. Two inputs that differ in one token alone:
  the reference's outputs for the other tokens are the same, the student's are not.
- `earlier`: the same for a causal function: two inputs that differ in the last token
  alone, the reference's outputs for the earlier tokens are the same, the student's
  are not.
- `dtype`: float64 in, another dtype out, where the reference keeps float64.

Each holds only when it holds on every one of ROUNDS fresh inputs, so a finding is a
fact about the function, never a coincidence of one input. What is asked is the
lesson's: its tests folder's `questions.py` (`load`) maps a part to its `Question`s;
this module holds the asking and the verdicts, and names nothing of any lesson. The
student's calls go through the run's session (its limits hold), as the smallest
example's do (grader/judge/smallest.py); the reference's run on the trusted side.
"""
from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from grader.judge.plugin import GraderFault
from grader.judge.reference import lesson_file
from grader.judge.smallest import differs

FILE = "questions.py"  # in a lesson's tests folder; a student bundle ships it (grader/deliver/bundle.py)
ROUNDS = 3             # fresh inputs per question: a finding holds on every one


@dataclass(frozen=True)
class Question:
    """One question about a part's function.

    kind: ignores, rows, earlier or dtype; function: the student's function or class as
    the page names it; probe: the probe called; outputs: the probe's outputs compared;
    inputs(i): the i-th fresh input, a pair of argument dicts for `ignores` (differing
    in `argument` alone), `rows` and `earlier` (differing in one token alone: the
    first, the last), one dict for `dtype`, or None (no input: then nothing is
    claimed); argument: for `ignores`, the argument the pair changes; others: for
    `rows` and `earlier`, an output's values for the tokens the pair leaves alone;
    canonical: outputs as the tests compare them (top-k as sets)."""

    kind: str
    function: str
    probe: str
    outputs: tuple[str, ...]
    inputs: Callable[[int], object]
    argument: str = ""
    others: Callable[[torch.Tensor], torch.Tensor] | None = None
    canonical: Callable[[dict], dict] = lambda out: out


def load(tests: Path) -> types.ModuleType | None:
    """The lesson's questions module from its tests folder, or None when it has none."""
    return lesson_file(Path(tests), FILE)


def _same(a: dict, b: dict, outputs: tuple[str, ...],
          view: Callable[[torch.Tensor], torch.Tensor] = lambda t: t) -> bool:
    return all(not differs(view(a[o]) if isinstance(a.get(o), torch.Tensor) else a.get(o),
                           view(b[o]) if isinstance(b.get(o), torch.Tensor) else b.get(o))
               for o in outputs)


class _Refused(Exception):
    """The student's call raised: the question's answer is no."""


def _round(q: Question, given: object, student, reference) -> dict | None | Literal[False]:
    """One round's verdict: a finding (dict), False (the answer is no), or None (the
    lesson made no input for it)."""
    if given is None:
        return None

    def theirs(args: dict) -> dict:
        try:
            return q.canonical(student.call(q.probe, **args))
        except GraderFault:
            raise
        except Exception as exc:  # noqa: BLE001 - the student's error (StudentError in
            raise _Refused() from exc  # the sandbox, anything in-process)

    def ours(args: dict) -> dict:
        return q.canonical(reference.call(q.probe, **args))

    if q.kind == "dtype":
        if not isinstance(given, dict):
            raise TypeError(f"the {q.function} question's inputs give {type(given).__name__}:"
                            " a dtype question's are one dict of arguments")
        ref, got = ours(given), theirs(given)
        for o in q.outputs:
            want, have = ref.get(o), got.get(o)
            if isinstance(want, torch.Tensor) and isinstance(have, torch.Tensor) \
                    and want.dtype == torch.float64 and have.dtype != torch.float64:
                return {"kind": "dtype", "function": q.function, "output": o,
                        "dtype": str(have.dtype).removeprefix("torch.")}
        return False
    if not (isinstance(given, (tuple, list)) and len(given) == 2
            and all(isinstance(g, dict) for g in given)):
        raise TypeError(f"the {q.function} question's inputs give {type(given).__name__}:"
                        f" a {q.kind} question's are two dicts of arguments")
    first, second = given
    refs, gots = (ours(first), ours(second)), (theirs(first), theirs(second))
    if q.kind == "ignores":
        if _same(*refs, q.outputs) or not _same(*gots, q.outputs):
            return False
        return {"kind": "ignores", "function": q.function, "argument": q.argument}
    others = q.others or (lambda t: t)
    if not _same(*refs, q.outputs, others) or _same(*gots, q.outputs, others):
        return False
    return {"kind": q.kind, "function": q.function}


def answer(q: Question, student, reference) -> dict | None:
    """The finding `q` proves on every one of ROUNDS fresh inputs, or None. A call of
    the student's that raises answers no: nothing is claimed about code that fails
    (the tests already show its error); the grader's own fault propagates."""
    found = None
    for i in range(ROUNDS):
        try:
            verdict = _round(q, q.inputs(i), student, reference)
        except _Refused:
            return None
        if not verdict:
            return None  # no, or no input made: not proved on every round
        found = verdict
    return found


def ask(tests: Path, part: str, student, reference) -> list[dict]:
    """What the part's questions prove about the student's function: each finding
    once, in the lesson's order; empty for a lesson without questions."""
    lesson = load(Path(tests))
    if lesson is None:
        return []
    found: list[dict] = []
    for q in lesson.QUESTIONS.get(part, []):
        finding = answer(q, student, reference)
        if finding is not None and finding not in found:
            found.append(finding)
    return found


def requests(tests: Path) -> list[tuple[str, dict]]:
    """Every (probe, arguments) the lesson's questions may ask the reference, for a
    recording (grader/judge/divergence/'s `fresh_for_recording`); none without questions."""
    lesson = load(Path(tests))
    found: list[tuple[str, dict]] = []
    for qs in (lesson.QUESTIONS.values() if lesson is not None else ()):
        for q in qs:
            for i in range(ROUNDS):
                given = q.inputs(i)
                pair = given if isinstance(given, (tuple, list)) else (given,)
                found += [(q.probe, args) for args in pair if isinstance(args, dict)]
    return found
