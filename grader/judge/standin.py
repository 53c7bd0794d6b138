"""Each mistake charged once: the stand-in round of a composite part (docs/design.md,
"Stand-ins").

A composite part (lesson 13's `moe`) calls the student's earlier parts. When one of
those failed in a way no known mistake explains, the composite part would lose points
for it too. After every other request of the student has been answered, a stand-in
round runs the composite part once more, in a child of its own, with the failing
earlier parts replaced in the student's module by stand-ins (probekit.stand_in):
functions the child calls and this side answers with the reference, gradients
included. The round's inputs are fresh, drawn here per student and run from
os.urandom and kept nowhere; the reference's outputs for them are computed here. If
the layer then matches the reference, its own code (the wiring) is right, and the
composite part's failures are excused: the part keeps its points and the page says
which earlier part's mistake was not charged again. Only the verdict leaves the
round: the child's prints and errors in it are shown to no one.

The lesson says what stands in for what in its tests folder's stand_ins.py (trusted,
never shipped): `COMPOSITE`, `PARTS`, `ANSWERS` and `wiring_round`.
"""
from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.judge.compare import Checks
from grader.judge.reference import Caller, lesson_file, load_module, request_key
from grader.sandbox.limits import SandboxError, StudentError
from grader.sandbox.session import Session

FILE = "stand_ins.py"
MAX_KEPT = 1024  # forward calls whose inputs a backward may still name, per round
MAX_MEMO = 8192  # answers a run keeps by their request's content (`Answerer.memo`)


class Refused(ValueError):
    """What a stand-in was given does not fit its function: said to the child."""


@dataclass
class Answerer:
    """Answers a round's stand-in call frames with the reference `module`.

    A forward frame is {"stand_in": name, "inputs": [tensors], "given": {...}}; the
    answer is {"ok": True, "call": c, "outputs": [tensors]}. A backward frame is
    {"stand_in": name, "backward": c, "grads": [tensor or None per output]}; the
    answer is {"ok": True, "grads": [tensor or None per input]}. Anything else, or
    inputs the function refuses, is answered {"ok": False, "error": text}.

    `memo`, shared by the answerers of one run, keeps answers by their request's
    content: students whose code is right send the very same calls, which are then
    computed once per run (an assembly lesson's hundreds of calls per student).

    `only`: a stand-in for one of the lesson's own parts (stand_ins.py's `NESTED`)
    -> the one probe whose requests may call it (`request`, said by the trusted side),
    so that no part earns its points by calling the stand-in for itself."""

    module: types.ModuleType
    answers: dict[str, Callable]
    # call -> (name, inputs, outputs with their graph or None (answered from the memo:
    # made on a backward), the request's key, what was given)
    kept: dict[int, tuple[str, list, list | None, str, dict]] = field(default_factory=dict)
    calls: int = 0
    memo: dict[str, list] | None = None
    only: dict[str, str] = field(default_factory=dict)

    def __call__(self, frame: dict, request: str = "") -> dict:
        try:
            return {"ok": True, **self._answer(frame, request)}
        except Refused as exc:
            return {"ok": False, "error": str(exc)[:300]}
        except Exception as exc:  # noqa: BLE001 - the reference on the child's inputs
            return {"ok": False, "error": f"the reference raised {type(exc).__name__}"}

    def _answer(self, frame: dict, request: str) -> dict:
        name = frame.get("stand_in")
        if name not in self.answers:
            raise Refused(f"no stand-in named {str(name)[:60]}")
        if name in self.only and request != self.only[name]:
            raise Refused(f"the stand-in for {name} answers in {self.only[name]}'s "
                          "requests only")
        if "backward" in frame:
            return self._backward(name, frame)
        inputs, given = frame.get("inputs"), frame.get("given")
        if not (isinstance(inputs, list) and all(isinstance(t, torch.Tensor) for t in inputs)
                and isinstance(given, dict)):
            raise Refused("a stand-in call sends a list of tensors and a dict")
        key = request_key(str(name), {"inputs": inputs, "given": given})
        remembered = None if self.memo is None else self.memo.get(key)
        graphed = None
        if remembered is None:
            inputs, graphed = self._forward(name, inputs, given)
            remembered = [t.detach() for t in graphed]
            self._remember(key, remembered)
        self.calls += 1
        self.kept[self.calls] = (name, inputs, graphed, key, given)
        if len(self.kept) > MAX_KEPT:
            del self.kept[min(self.kept)]
        return {"call": self.calls, "outputs": remembered}

    def _forward(self, name: str, inputs: list, given: dict) -> tuple[list, list]:
        inputs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        with torch.enable_grad(), torch.random.fork_rng():
            return inputs, list(self.answers[name](self.module, inputs, given))

    def _remember(self, key: str, value: list) -> None:
        if self.memo is not None:
            if len(self.memo) >= MAX_MEMO:
                del self.memo[next(iter(self.memo))]
            self.memo[key] = value

    def _backward(self, name: str, frame: dict) -> dict:
        kept = self.kept.get(frame["backward"]) if isinstance(frame["backward"], int) else None
        if kept is None or kept[0] != name:
            raise Refused("a backward names no forward call of this stand-in")
        _, inputs, outputs, key, given = kept
        grads = frame.get("grads")
        if not isinstance(grads, list):
            raise Refused("a backward sends one gradient (or None) per output")
        back = request_key("backward", {"forward": key, "grads": grads})
        if self.memo is not None and back in self.memo:
            return {"grads": self.memo[back]}
        if outputs is None:  # answered from the memo: its graph is made now
            inputs, outputs = self._forward(name, inputs, given)
            self.kept[frame["backward"]] = (name, inputs, outputs, key, given)
        if len(grads) != len(outputs):
            raise Refused("a backward sends one gradient (or None) per output")
        pairs = []
        for out, g in zip(outputs, grads):
            if g is None or not out.requires_grad:
                continue
            if not isinstance(g, torch.Tensor) or g.shape != out.shape \
                    or not g.is_floating_point():
                raise Refused("a gradient does not fit its output")
            pairs.append((out, g.to(out.dtype)))
        wanted = [t for t in inputs if t.requires_grad]
        found = torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs],
                                    retain_graph=True, allow_unused=True) if pairs else []
        by_input = dict(zip(map(id, wanted), found))
        answer = [None if not t.requires_grad else
                  (g if (g := by_input.get(id(t))) is not None else torch.zeros_like(t))
                  for t in inputs]
        self._remember(back, answer)
        return {"grads": answer}


def _seed() -> int:
    """A fresh seed for one case of the round: never stored, never the same twice."""
    return int.from_bytes(os.urandom(4), "big")


class _Asker:
    """The student's side of the round: probe calls on the round's own session."""

    def __init__(self, session: Session):
        self.session = session

    def call(self, probe: str, **args) -> dict:
        result = self.session.call(probe, args, where="stand-in round")
        if not isinstance(result, dict):
            raise StudentError("protocol", "no results")
        return result


def stood_in_parts(lesson: types.ModuleType, failing: list[str]) -> list[str]:
    """The earlier parts the round stands in for: every failing one, while the composite
    part fails too. The `explained` fixture already excused the composite tests a known
    mistake explains, so a composite part that still fails has an unlisted mistake
    upstream, a test that raised on a known one (top-k + 1 where K = E: a raise is never
    excused there), or a mistake of its own: the round tells which, so that no earlier
    part's mistake is charged twice."""
    if lesson.COMPOSITE not in failing:
        return []
    return [p for p in failing if p in lesson.PARTS]


def run(tests, reference: Caller, tolerances: dict, session: Session,
        failing: list[str]) -> dict[str, dict]:
    """The round for the lesson's composite part, in a child of its own (`session` is
    the graded one, already closed): {composite part: {"parts": [...], "passed": bool}}
    where a round ran; {} where none is needed or the lesson has none."""
    lesson = lesson_file(tests, FILE)
    if lesson is None or getattr(lesson, "ALWAYS", False):  # an assembly lesson: no round
        return {}
    parts = stood_in_parts(lesson, failing)
    if not parts or session.fatal is not None or session.broken is not None:
        return {}
    module = reference.module
    if module is None:  # no solution here (a student bundle): no round
        return {}
    own = session.apart()
    own.stand_in = Answerer(module, lesson.ANSWERS)
    checks = Checks(tolerances, pictures=False)
    try:
        lesson.wiring_round(_Asker(own), Caller(module, reference.probes), checks,
                            [lesson.PARTS[p] for p in parts], _seed)
        passed = bool(checks.items) and not checks.failures
    except SandboxError:  # the grader's own failure: no verdict, the part as it was
        return {}
    except Exception:  # noqa: BLE001 - the student's error or malformed results: its
        passed = False  # message is the round's, shown to no one
    finally:
        own.close()
    return {lesson.COMPOSITE: {"parts": parts, "passed": passed}}


# ---- an assembly lesson: its pieces stood in for in every graded request ---------------
# Where a lesson's stand_ins.py says `ALWAYS`, its stub imports the earlier lessons'
# pieces from `model_parts` (course.yml's `builds_on`), and the graded parts are the
# wiring only: the child's `model_parts` is probes.py's stand-ins, answered here with
# the earlier lessons' references in every request of the graded session, and the
# trusted side's probes answer them in-process with the same code (`local`), so the
# reference and the student see the very same pieces.

def always(tests: Path) -> types.ModuleType | None:
    """The lesson's stand_ins.py when it stands in for its pieces in every request."""
    lesson = lesson_file(tests, FILE)
    return lesson if lesson is not None and getattr(lesson, "ALWAYS", False) else None


def pieces(earlier: dict[str, tuple[Path, Iterable[str]]],
           nested: tuple[Path, Iterable[str]] | None = None) -> types.ModuleType:
    """The trusted side's `model_parts`: each name `builds_on` lists, taken from its
    lesson's solution (lesson key -> (solution, names)); and `nested`, the lesson's
    own solution and the classes of it stood in for in the part that holds them
    (stand_ins.py's `NESTED`), that solution loaded on these pieces themselves, so its
    answers need no stand-in of their own."""
    module = types.ModuleType("model_parts")
    found = [(key, solution, names) for key, (solution, names) in earlier.items()]
    for key, solution, names in found + ([("", *nested)] if nested else []):
        bound = sys.modules.get("model_parts")
        sys.modules["model_parts"] = module  # (the lesson's own solution imports it)
        try:
            source = load_module(f"_piece_{key or 'nested'}",
                                 solution.read_text(encoding="utf-8"), str(solution))
        finally:
            if bound is None:
                del sys.modules["model_parts"]
            else:
                sys.modules["model_parts"] = bound
        for name in names:
            if not hasattr(source, name):
                raise AttributeError(f"lesson {key or 'own'}'s solution has no {name} "
                                     "(course.yml's builds_on or stand_ins.py names it)")
            setattr(module, name, getattr(source, name))
    return module


def answerer(tests: Path, module: types.ModuleType | None,
             memo: dict[str, list] | None = None) -> Answerer | None:
    """A fresh answerer for one graded session of an assembly lesson, sharing the run's
    `memo` (None for any other lesson, or where there are no pieces: a student bundle)."""
    lesson = always(tests)
    if lesson is None or module is None:
        return None
    return Answerer(module, lesson.ANSWERS, memo=memo, only=only(lesson))


def only(lesson: types.ModuleType) -> dict[str, str]:
    """Stand-in -> the probe whose requests may call it (stand_ins.py's `NESTED`)."""
    return {name: probe for name, (_, probe) in getattr(lesson, "NESTED", {}).items()}
