"""A lesson's references: the solution's and its correct variants' traces of each
fresh request, computed on the trusted side once a run (or read from a recording),
and what a recording and a student bundle keep of them."""
from __future__ import annotations

import ast
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.inside import protocol, tracer
from grader.judge import trace_inputs
from grader.judge.divergence import untrusted
from grader.judge.divergence.matching import Reference, same_result, tensors
from grader.judge.divergence.statements import Statements
from grader.judge.divergence.untrusted import Trace
from grader.judge.reference import request_key


@dataclass
class Variant:
    """A correct variant of the solution: its text and the lines where it differs."""
    source: str
    lines: frozenset[int]


@dataclass
class LessonTraces:
    """The reference's and its correct variants' traces of one lesson, per part:
    computed on a part's first failure in a run, then reused for every student.
    `source` None: a student bundle's, from its recording (values only, `for_students`)."""
    key: str
    source: str | None
    # the correct variants, or how to find them on first need (`correct`)
    variants: list[Variant] | Callable[[], list[Variant]]
    probes: types.ModuleType
    tolerances: dict
    tests: Path                 # the lesson's tests folder: its fresh inputs live there
    # request key -> a Reference as plain data (`_plain`), packed (`_packed`): the
    # lesson's references' (LessonRefs.traces, recorded with its results), read first
    # and filled here
    recorded: dict[str, torch.Tensor] = field(default_factory=dict)
    compute: bool = True        # False: from the recording only, the solution never run
    # part -> its fresh requests ([probe, args]), and the reference's statements'
    # digests by number (`Statements.anonymous`): a student bundle's, whose tests
    # folder has no trace_inputs.py and which holds no solution (`for_students`)
    fresh: dict[str, list] | None = None
    digests: dict[int, str] | None = None
    # the composite part and, per earlier part, the name of the student's function or
    # class that is it (stand_ins.py's COMPOSITE and PARTS; a student bundle's, recorded)
    layers: tuple[str, dict[str, str]] | None = None
    _statements: Statements | None = None
    _modules: dict[int, types.ModuleType] = field(default_factory=dict)
    _cache: dict[str, list[Reference]] = field(default_factory=dict)

    def correct(self) -> list[Variant]:
        """The correct variants, found when a trace is first computed: generating the
        mutants they are takes seconds, which a run whose traces are all recorded
        (a check after the first, a watch that warmed) never needs."""
        if callable(self.variants):
            self.variants = self.variants()
        return self.variants

    def composite(self) -> tuple[str, dict[str, str]]:
        """The composite part and its earlier parts' names in the student's module
        (`layers`), read once; ("", {}) for a lesson without stand_ins.py."""
        if self.layers is None:
            self.layers = composite_of(Path(self.tests))
        return self.layers

    def module(self, i: int) -> types.ModuleType:
        """The solution (0) or variant i - 1, compiled under a name of its own."""
        if i not in self._modules:
            text = self.source if i == 0 else self.correct()[i - 1].source
            if text is None:  # a student bundle: the trusted side has no solution
                raise ValueError(f"lesson {self.key}: no solution text to trace")
            name = f"<traced {self.key} {i}>"
            module = types.ModuleType(f"_traced_{self.key}_{i}")
            module.__file__ = name
            exec(compile(text, name, "exec"), module.__dict__)
            self._modules[i] = module
        return self._modules[i]

    def statements(self) -> Statements:
        """The reference's statements, read once a run."""
        if self._statements is None:
            self._statements = (Statements.of(self.source) if self.source is not None
                                else Statements.numbered(self.digests or {}))
        return self._statements

    def references(self, part: str) -> list[Reference]:
        """The part's traced fresh inputs (the lesson's trace_inputs.py), each once a run."""
        if part not in self._cache:
            found = (self.reference(probe, args) for probe, args in self.requests(part))
            self._cache[part] = [ref for ref in found if ref is not None]
        return self._cache[part]

    def requests(self, part: str) -> list:
        """The part's fresh requests ([probe, args]): its trace_inputs.py's, or a
        student bundle's, recorded."""
        return (trace_inputs.fresh_inputs(self.tests, self.key, part)
                if self.fresh is None else self.fresh.get(part, []))

    def reference(self, probe: str, args: dict) -> Reference | None:
        """The reference's and the agreeing variants' traces of one request; None when
        the reference cannot take it (not a request to trace on), or when it is not
        recorded and this run computes nothing."""
        key = request_key(probe, args)
        if key not in self.recorded:
            if not self.compute:
                return None
            found = self._traced(probe, args)
            self.recorded[key] = _packed(_plain(found) if found is not None
                                         else {"traces": [], "tracer": tracer.VERSION})
            return found  # computed here: no need to decode what was just packed
        plain = protocol.loads(self.recorded[key].numpy().tobytes())
        if not isinstance(plain, dict) or plain.get("tracer") != tracer.VERSION:
            return None  # not a packed trace, or another tracer's (another version's): none
        traces = [Trace(untrusted.events(t.get("events"), None), t.get("result"),
                        str(t.get("error") or ""), [int(n) for n in t.get("lines") or []],
                        untrusted.leaves(t.get("leaves")))
                  for t in plain.get("traces") or []]
        return Reference((probe, args), traces, tensors(args)) if traces else None

    def _traced(self, probe: str, args: dict) -> Reference | None:
        base = run_traced(self.module(0), self.probes, probe, args)
        if base.error:
            return None
        # only variants that differ on a line this request runs can differ here; a
        # variant is correct for the inputs the contract allows, so on this one its
        # values count only where its results are the reference's
        ran = set(base.lines)
        traces = [base]
        for i, v in enumerate(self.correct(), start=1):
            if v.lines & ran:
                t = run_traced(self.module(i), self.probes, probe, args)
                if not t.error and same_result(t.result, base.result, self.tolerances,
                                                lambda _: True):
                    traces.append(t)
        return Reference((probe, args), traces, tensors(args))


def _packed(plain: dict) -> torch.Tensor:
    """A request's traces as they are kept and recorded: one encoded frame, as a byte
    tensor. Decoded, the recording's 26,000 values were as many tensor objects in the
    trusted process of every run, which a Gradescope container could not spare; packed,
    they are one object per request, decoded only when a part is traced on it."""
    return torch.frombuffer(bytearray(protocol.dumps(plain)), dtype=torch.uint8)


def _plain(ref: Reference) -> dict:
    """A Reference's traces as the protocol's plain data (a recording's), events as
    the tracer sends them, with the tracer's VERSION: a child's trace is compared only
    with traces its own tracer would have made (a recording outlives its grader)."""
    return {"tracer": tracer.VERSION,
            "traces": [{"events": [[e.line, e.name, e.value, e.func, e.step,
                                    None if e.reach is None else sorted(e.reach), e.off]
                                   for e in t.events],
                        "result": t.result, "error": t.error, "lines": t.lines,
                        "leaves": [[k, n] for k, n in t.leaves.items()]}
                       for t in ref.traces]}


def fresh_for_recording(ctx, stop: Callable[[], bool] = lambda: False) -> int:
    """Compute, for a recording, the reference's side of every fresh input a failing
    part's feedback asks about: the lesson's trace inputs, the candidates of its
    smallest examples (their results into the reference's cache, their traces into the
    lesson's) and its questions' inputs (grader/judge/questions.py). A run from that
    recording then shows all three without the solution. `stop` is asked between
    requests (`grader check --watch` computes this while the student edits, and stops
    when a save comes). How many requests were traced."""
    from grader.judge import questions, smallest
    lessons = lesson_traces(ctx)
    if lessons is None:
        return 0

    def trace(probe: str, args: dict) -> None:  # a recorded one is not decoded now
        if request_key(probe, args) not in lessons.recorded:
            lessons.reference(probe, args)

    for part in trace_inputs.builders(Path(ctx.tests)):
        for probe, args in lessons.requests(part):
            if stop():
                return len(lessons.recorded)
            trace(probe, args)
    for _, probe, args in smallest.requests(Path(ctx.tests)):
        if stop():
            return len(lessons.recorded)
        ctx.refs.reference.call(probe, **args)
        trace(probe, args)
    for probe, args in questions.requests(Path(ctx.tests)):
        if stop():
            break
        ctx.refs.reference.call(probe, **args)
    return len(lessons.recorded)


def for_students(ctx) -> dict:
    """What a student bundle's check needs to name a line: each part's fresh requests
    (inputs of the lesson's trace_inputs.py, no graded case's), the reference's traces
    of them and of its smallest examples' candidates (traced first, on the example
    shown), kept in the lesson's recording (`LessonRefs.traces`), and its statements'
    digests. No text and no line number of the solution: a statement is a number and
    a digest (`Statements.anonymous`), the reference's path and values are told by
    those numbers, and its correct variants' traces keep their values only.
    {"requests": part -> [[probe, args], ...], "statements": [[number, digest], ...],
    "composite": [composite part, {earlier part: its name in the module}]}."""
    lessons = lesson_traces(ctx)
    if lessons is None or lessons.source is None:
        return {}
    from grader.judge import smallest
    digests, number = lessons.statements().anonymous()
    requests: dict[str, list] = {}
    kept: dict[str, torch.Tensor] = {}

    def keep(ref: Reference) -> None:
        plain = _plain(ref)
        for i, t in enumerate(plain["traces"]):
            base = i == 0  # the variants' paths are never compared
            t["lines"] = [number.get(n, 0) for n in t["lines"]] if base else []
            t["events"] = [[number.get(line, 0) if base else 0, name, value, func,
                            step if base else 0, reach, 0]
                           for line, name, value, func, step, reach, _ in t["events"]]
        kept[request_key(*ref.request)] = _packed(plain)

    for part in trace_inputs.builders(Path(ctx.tests)):
        requests[part] = []
        for ref in lessons.references(part):
            requests[part].append(list(ref.request))
            keep(ref)
    for _, probe, args in smallest.requests(Path(ctx.tests)):  # traced first (`where`)
        found = lessons.reference(probe, args)
        if found is not None:
            keep(found)
    ctx.refs.traces.clear()  # nothing else: another recording's traces hold lines
    ctx.refs.traces.update(kept)
    composite, names = lessons.composite()
    return {"requests": requests, "statements": [[i, d] for i, d in digests.items()],
            "composite": [composite, names]}


def correct_variants(source: str, tests) -> list[Variant]:
    """The lesson's equivalent mutants (equivalent_mutants.yml): correct code written
    otherwise, so that their values count as the reference's too."""
    from grader.lesson import equivalents, mutants
    listed = equivalents.load(tests)
    if not listed:
        return []
    operators = sorted({mutant_id.split("-", 1)[0] for mutant_id in listed})
    lines = source.splitlines()
    out = []
    for m in mutants.generate(source, operators).mutants:
        if m.id in listed:
            new = m.source.splitlines()
            changed = {n for n, (a, b) in enumerate(zip(lines, new), start=1) if a != b}
            out.append(Variant(m.source, frozenset(changed or {m.line})))
    return out


def lesson_traces(ctx, compute: bool = True) -> LessonTraces | None:
    """The run's LessonTraces (kept on the lesson context), or None without a solution
    nor a student bundle's recorded traces (`for_students`). `compute` False: the
    recorded traces only (a run from the autograder zip's recording, which must not
    import the solution)."""
    found = getattr(ctx, "_lesson_traces", None)
    if found is None and ctx.refs.source is None and ctx.refs.fresh:
        fresh = ctx.refs.fresh
        found = LessonTraces(ctx.key, None, [], ctx.refs.probes, ctx.course.tolerances(ctx.key),
                             ctx.tests, ctx.refs.traces, False, fresh["requests"],
                             fresh["statements"], _layers(fresh.get("composite")))
        ctx._lesson_traces = found
    if found is None:
        source = ctx.refs.source
        if source is None:
            return None
        found = LessonTraces(ctx.key, source,
                             (lambda: correct_variants(source, ctx.tests)) if compute else [],
                             ctx.refs.probes, ctx.course.tolerances(ctx.key), ctx.tests,
                             ctx.refs.traces, compute)
        ctx._lesson_traces = found
    return found


def composite_of(tests: Path) -> tuple[str, dict[str, str]]:
    """stand_ins.py's `COMPOSITE` and `PARTS` (part -> the name of the student's
    function or class it is), read as literals, the file not run: the trace needs
    only these names, and the file imports the lesson's test helpers."""
    path = tests / "stand_ins.py"
    if not path.is_file():
        return "", {}
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("COMPOSITE", "PARTS")):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return _layers([found.get("COMPOSITE"), found.get("PARTS")])


def _layers(raw: object) -> tuple[str, dict[str, str]]:
    """A student bundle's recorded `LessonTraces.layers` ([composite, {part: name}])."""
    if (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], str)
            and isinstance(raw[1], dict)):
        return raw[0], {str(p): str(n) for p, n in raw[1].items()}
    return "", {}


def run_traced(module: types.ModuleType, probes: types.ModuleType, probe: str,
               args: dict) -> Trace:
    """A trusted module's trace (the solution, a correct variant), as the child's. A
    variant's deprecation warnings (`x.T` on 3 dims) are the project's, not news for
    the staff running a class: not printed."""
    with torch.random.fork_rng(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if module.__file__ is None:  # (the solution and its variants are compiled with one)
            raise ValueError(f"{module.__name__} has no file name to trace")
        result, events, lines, error, leaves, _ = tracer.trace(
            module.__file__, getattr(probes, probe), module, **args)
    return Trace(untrusted.events(events, None), result, error, lines, untrusted.leaves(leaves))
