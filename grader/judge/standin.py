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

import hashlib
import json
import os
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.judge.compare import Checks
from grader.inside import protocol
from grader.judge.reference import Caller, lesson_file, load_module
from grader.sandbox.limits import SandboxError, StudentError
from grader.sandbox.session import Session

FILE = "stand_ins.py"
MAX_KEPT = 1024  # forward calls whose inputs a backward may still name, per round
MAX_MEMO = 8192  # answers a run keeps by their request's content (`Answerer.memo`)


class Refused(ValueError):
    """What a stand-in was given does not fit its function: said to the child."""


@dataclass
class Kept:
    """A forward call a backward may name: its call frame, its key in the memo, and,
    once computed here, its inputs and outputs with their graph (None for an answer
    from the memo: made on a backward, from the frame)."""

    name: str
    frame: protocol.Frame
    key: str
    inputs: list | None = None
    outputs: list | None = None


def _decoded(frame: protocol.Frame) -> dict:
    value = frame.value()
    if not isinstance(value, dict):
        raise Refused("a stand-in call sends a dict")
    return value


def _key(*parts: protocol.Buffer) -> str:
    """The memo's key: a content hash of a call frame as sent (the same code asking the
    same sends the same bytes), never decoded to be hashed."""
    h = hashlib.blake2b(digest_size=32)
    for part in parts:
        h.update(part)
    return h.hexdigest()


@dataclass
class Answerer:
    """Answers a round's stand-in call frames with the reference `module`.

    A forward frame is {"stand_in": name, "inputs": [tensors], "given": {...}}; the
    answer is {"ok": True, "call": c, "outputs": [tensors]}. A backward frame is
    {"stand_in": name, "backward": c, "grads": [tensor or None per output]}; the
    answer is {"ok": True, "grads": [tensor or None per input]}. Anything else, or
    inputs the function refuses, is answered {"ok": False, "error": text}.

    `memo`, shared by the answerers of one run, keeps answers by their call frame's
    bytes: students whose code is right send the very same calls (an assembly lesson's
    hundreds of calls per student), which are then computed once per run, and sent
    as packed then, the frame decoded no further than its JSON.

    `only`: a stand-in for one of the lesson's own parts (stand_ins.py's `NESTED`)
    -> the one probe whose requests may call it (`request`, said by the trusted side),
    so that no part earns its points by calling the stand-in for itself."""

    module: types.ModuleType
    answers: dict[str, Callable]
    kept: dict[int, Kept] = field(default_factory=dict)
    calls: int = 0
    memo: dict[str, protocol.Packed] | None = None
    only: dict[str, str] = field(default_factory=dict)

    def __call__(self, frame: dict, request: str = "") -> dict:
        """The answer to `frame`, in this process (the trusted side's probes on the
        reference, whose pieces are the very answers the child gets: the same bytes,
        so the same key in the memo)."""
        reply = self._reply(protocol.split(protocol.dumps(frame)), request)
        return {k: v.values if isinstance(v, protocol.Packed) else v for k, v in reply.items()}

    def answer(self, frame: protocol.Frame, request: str = "") -> list[protocol.Buffer]:
        """The session's (`Session.stand_in`): the answer to a call frame the child
        sent, as the frame to send back."""
        return protocol.encode(self._reply(frame, request))

    def _reply(self, frame: protocol.Frame, request: str) -> dict:
        try:
            return {"ok": True, **self._answer(frame, request)}
        except protocol.ProtocolError:
            raise  # a malformed frame: the session stops the child, as for any reply
        except Refused as exc:
            return {"ok": False, "error": str(exc)[:300]}
        except Exception as exc:  # noqa: BLE001 - the reference on the child's inputs
            return {"ok": False, "error": f"the reference raised {type(exc).__name__}"}

    def _answer(self, frame: protocol.Frame, request: str) -> dict:
        asked = frame.head["v"]
        name = asked.get("stand_in") if isinstance(asked, dict) else None
        if name not in self.answers:
            raise Refused(f"no stand-in named {str(name)[:60]}")
        if name in self.only and request != self.only[name]:
            raise Refused(f"the stand-in for {name} answers in {self.only[name]}'s "
                          "requests only")
        if "backward" in asked:
            return self._backward(name, asked, frame)
        key = _key(b"forward", frame.data)
        answer = None if self.memo is None else self.memo.get(key)
        kept = Kept(name, frame, key)
        if answer is None:
            decoded = _decoded(frame)
            inputs, given = decoded.get("inputs"), decoded.get("given")
            if not (isinstance(inputs, list)
                    and all(isinstance(t, torch.Tensor) for t in inputs)
                    and isinstance(given, dict)):
                raise Refused("a stand-in call sends a list of tensors and a dict")
            kept.inputs, kept.outputs = self._forward(name, inputs, given)
            answer = protocol.pack([t.detach() for t in kept.outputs])
            self._remember(key, answer)
        self.calls += 1
        self.kept[self.calls] = kept
        if len(self.kept) > MAX_KEPT:
            del self.kept[min(self.kept)]
        return {"call": self.calls, "outputs": answer}

    def _forward(self, name: str, inputs: list, given: dict) -> tuple[list, list]:
        inputs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        with torch.enable_grad(), torch.random.fork_rng():
            return inputs, list(self.answers[name](self.module, inputs, given))

    def _remember(self, key: str, value: protocol.Packed) -> None:
        if self.memo is not None:
            if len(self.memo) >= MAX_MEMO:
                del self.memo[next(iter(self.memo))]
            self.memo[key] = value

    def _backward(self, name: str, asked: dict, frame: protocol.Frame) -> dict:
        call = asked["backward"]
        kept = self.kept.get(call) if isinstance(call, int) else None
        if kept is None or kept.name != name:
            raise Refused("a backward names no forward call of this stand-in")
        if not isinstance(asked.get("grads"), list):
            raise Refused("a backward sends one gradient (or None) per output")
        # the forward's key, and the gradients' JSON and bytes: not the call's number
        back = _key(b"backward", kept.key.encode(),
                    json.dumps([asked["grads"], frame.head["t"]]).encode(), frame.body)
        if self.memo is not None and back in self.memo:
            return {"grads": self.memo[back]}
        grads = _decoded(frame)["grads"]
        if kept.outputs is None:  # answered from the memo: its graph is made now
            forward = _decoded(kept.frame)
            kept.inputs, kept.outputs = self._forward(name, forward["inputs"],
                                                      forward["given"])
        inputs, outputs = kept.inputs or [], kept.outputs
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
        answer = protocol.pack([None if not t.requires_grad else
                                (g if (g := by_input.get(id(t))) is not None
                                 else torch.zeros_like(t)) for t in inputs])
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
    own.stand_in = Answerer(module, lesson.ANSWERS).answer
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
             memo: dict[str, protocol.Packed] | None = None) -> Answerer | None:
    """A fresh answerer for one graded session of an assembly lesson, sharing the run's
    `memo` (None for any other lesson, or where there are no pieces: a student bundle)."""
    lesson = always(tests)
    if lesson is None or module is None:
        return None
    return Answerer(module, lesson.ANSWERS, memo=memo, only=only(lesson))


def only(lesson: types.ModuleType) -> dict[str, str]:
    """Stand-in -> the probe whose requests may call it (stand_ins.py's `NESTED`)."""
    return {name: probe for name, (_, probe) in getattr(lesson, "NESTED", {}).items()}
