"""The trusted side's callers: the reference solution, and known-mistake variants.

Both run a lesson's probe functions in-process on trusted code. Results are
memoised by the request's content, so the reference outputs of a lesson are
computed once per run (and inherited by forked workers), not once per student.
Known mistakes are declared per lesson in `mistakes.yml` as text edits of the
solution; the same edit makes a variant module here and a submission in tests.
"""
from __future__ import annotations

import hashlib
import importlib.util
import itertools
import struct
import sys
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch
import yaml
from torch import Tensor

from grader.config import inputs
from grader.inside import protocol
from grader.text.yamlread import LOADER


def request_key(probe: str, args: dict) -> str:
    """A content hash of a probe call: same inputs, same key."""
    h = hashlib.sha256(probe.encode())

    def feed(obj) -> None:
        if isinstance(obj, torch.Tensor):
            h.update(_tensor_digest(obj))
        elif isinstance(obj, dict):
            h.update(b"{")
            for k in sorted(obj):
                h.update(str(k).encode() + b":")
                feed(obj[k])
            h.update(b"}")
        elif isinstance(obj, (list, tuple)):
            h.update(b"[")
            for item in obj:
                feed(item)
            h.update(b"]")
        elif isinstance(obj, float):
            h.update(b"f" + struct.pack(">d", obj))
        else:
            h.update(f"{type(obj).__name__}:{obj!r}".encode())

    feed(args)
    return h.hexdigest()


def _tensor_digest(t: torch.Tensor) -> bytes:
    """A tensor's content hash, kept on the tensor: hidden tests' inputs are cached and
    never modified, so each is hashed once per process, not once per student."""
    digest = getattr(t, "_grader_digest", None)
    if digest is None:
        c = t.detach().contiguous()
        h = hashlib.blake2b(f"T{c.dtype}{tuple(c.shape)}".encode(), digest_size=16)
        if c.numel():
            # (an ndarray is a buffer: numpy's stubs declare it one for Python 3.12 on only)
            h.update(c.reshape(-1).view(torch.uint8).numpy())  # type: ignore[arg-type]
        digest = h.digest()
        try:
            # (a cache kept on the tensor itself: torch's stubs declare no such attribute)
            t._grader_digest = digest  # type: ignore[attr-defined]
        except AttributeError:  # not every tensor takes attributes; then just recompute
            pass
    return digest


def load_module(name: str, source: str, filename: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = filename
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def load_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # not a .py file: no loader for it
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@cache
def lesson_file(tests: Path, filename: str) -> types.ModuleType | None:
    """One of a lesson's optional files in its tests folder (examples.py, questions.py,
    trace_inputs.py), loaded by path once, under a name of its own; None when the lesson
    has none (then the feature it serves is off for that lesson)."""
    path = Path(tests) / filename
    if not path.is_file():
        return None
    return load_file(f"_{Path(filename).stem}_{zlib.crc32(str(path.resolve()).encode())}", path)


@dataclass
class Mistake:
    id: str
    part: str
    title: dict[str, str]
    hint: dict[str, str]
    edits: list[tuple[str, str]]

    def apply(self, solution: str) -> str:
        for old, new in self.edits:
            if solution.count(old) != 1:
                raise ValueError(f"mistake {self.id}: {old!r} occurs "
                                 f"{solution.count(old)} times in the solution, not once")
            solution = solution.replace(old, new)
        return solution


def load_mistakes(path: Path) -> list[Mistake]:
    """The lesson's known mistakes; a malformed file says which entry and what."""
    if not path.exists():
        return []
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=LOADER) or []
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from None
    out = []
    for i, m in enumerate(data if isinstance(data, list) else [None], start=1):
        try:
            out.append(Mistake(
                id=m["id"], part=m["part"],
                title={"en": m["title"], "zh": m.get("title_zh", m["title"])},
                hint={"en": m["hint"], "zh": m.get("hint_zh", m["hint"])},
                edits=[(e["old"], e["new"]) for e in m["edits"]]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: entry {i} needs id, part, title, hint and edits "
                             f"(each with old and new); problem: {exc!r}") from None
    return out


class Caller:
    """Runs probes on a trusted module, memoised by request content. The module may be
    given as `load`, called on the first request the cache cannot answer (a recording
    made when the autograder zip was built answers every graded one, so a run never
    imports the solution, nor its known mistakes). Without either it is a recording (a
    student bundle has no solution): it only answers from it."""

    def __init__(self, module: types.ModuleType | None, probes: types.ModuleType,
                 cache: dict | None = None,
                 load: Callable[[], types.ModuleType] | None = None):
        self._module, self.probes, self._load = module, probes, load
        self.cache = {} if cache is None else cache

    @property
    def module(self) -> types.ModuleType | None:
        if self._module is None and self._load is not None:
            self._module = self._load()
        return self._module

    def twin(self) -> "Caller":
        """Another caller on the same module and cache (the reference in a student's
        seat), loading the module only if it must, and then once for both."""
        return Caller(self._module, self.probes, self.cache, self._load)

    def call(self, probe: str, **args) -> dict:
        key = request_key(probe, args)
        if key not in self.cache:
            module = self.module
            if module is None:
                raise LookupError(f"no recorded reference for this {probe} call: the "
                                  "student bundle covers the practice tests only")
            with torch.random.fork_rng():
                self.cache[key] = getattr(self.probes, probe)(module, **args)
        return self.cache[key]


@dataclass
class Variant:
    mistake: Mistake
    caller: Caller


@dataclass
class LessonRefs:
    """Everything trusted about one lesson, loaded once per process."""
    reference: Caller
    variants: list[Variant]
    probes: types.ModuleType
    # mistake id -> names of the tests its variant fails (computed on first need)
    signatures: dict[str, set[str]] | None = None
    # mistake id -> test name -> the type name of the exception its variant raised
    # there, for the failing tests where it raised (computed with the signatures)
    raises: dict[str, dict[str, str]] | None = None
    source: str | None = None  # the solution's text (none in a student bundle)
    key: str = ""
    # warmed from a recording made from these very files, by a run that checked the
    # solution gets full marks (the autograder zip's): the check need not run again
    recorded: bool = False
    # the torch version a recording's results were computed with ("": this process's)
    torch: str = ""
    # composite part -> request key -> (probe, args): what its comparison asked of the
    # solution carrying known mistakes (`plugin._Explained`), for `combined_for_recording`
    asked: dict[str, dict[str, tuple[str, dict]]] = field(default_factory=dict)
    _combined: dict[tuple[str, ...], Caller] = field(default_factory=dict)
    # combination -> results a recording holds, where the solution is here too: its
    # module is then loaded only for a request the recording cannot answer
    recorded_combined: dict[tuple[str, ...], dict] = field(default_factory=dict)
    # request key -> the reference's traces of a fresh input, packed (grader/judge/divergence/
    # reads and fills it): recorded with the results, so a run from a recording names a
    # line without importing the solution
    traces: dict[str, Tensor] = field(default_factory=dict)  # (`torch` names a field here)
    # a student bundle's fresh requests by part and the reference's statements' digests
    # by number (divergence.for_students): its tests folder has no trace_inputs.py
    fresh: dict = field(default_factory=dict)
    # an assembly lesson's trusted `model_parts`: the earlier lessons' references its
    # stand-ins answer with (grader/judge/standin.py; None for any other lesson)
    pieces: types.ModuleType | None = None
    # their answers by call frame, shared by the run's answerers (standin.Answerer)
    stand_in_memo: dict[str, protocol.Packed] = field(default_factory=dict)

    def computed(self) -> int:
        """How many results the callers hold, and whether signatures are known: it
        grows when a run computes what its recording lacked."""
        return (len(self.reference.cache) + sum(len(v.caller.cache) for v in self.variants)
                + sum(len(results) for results in {
                    **self.recorded_combined,
                    **{ids: c.cache for ids, c in self._combined.items()}}.values())
                + (self.signatures is not None))

    def combined(self, ids: tuple[str, ...]) -> Caller:
        """The solution with several known mistakes at once (in different parts):
        trusted code standing for a student whose parts have exactly those bugs. A
        student bundle has their practice results only (`combined_for_recording`)."""
        ids = tuple(sorted(ids))
        if len(ids) == 1:  # one mistake: its variant, with the results it already has
            return next(v.caller for v in self.variants if v.mistake.id == ids[0])
        if ids not in self._combined:
            if self.source is None:
                raise LookupError("no solution to apply mistakes to (a student bundle)")
            by_id = {v.mistake.id: v.mistake for v in self.variants}
            source = self.source
            for mistake_id in ids:
                source = by_id[mistake_id].apply(source)
            name = f"_mistakes_{self.key}_{'_'.join(ids)}"
            self._combined[ids] = Caller(None, self.probes, self.recorded_combined.get(ids),
                                         cache(lambda: load_module(name, source, "solution")))
        return self._combined[ids]


def lesson_refs(key: str, solution: Path | None, tests: Path,
                recorded: Path | None = None) -> LessonRefs:
    """The solution and its mistakes as callers, each module loaded on first need; a
    recording of their results (`recording`) warms their caches when it was made
    from these very files. Where there is no solution (a student bundle), the
    recording alone, for the practice tests. Built once per run, by its lesson context
    (`LessonContext.refs`), which owns it."""
    # The trusted side computes on one thread, as the sandboxed child does: its float
    # noise, hence every max_abs_diff a page shows, is then the same on any machine,
    # whatever its core count; and a lesson's small tensors gain nothing from a second
    # thread, whose OpenMP spin-waits cost CPU the other workers need (a student
    # bundle's build: 30 CPU-s on two threads, 15 on one, quiet).
    torch.set_num_threads(1)
    probes = load_file(f"_probes_{key}", tests / "probes.py")
    loaded = protocol.loads(recorded.read_bytes()) if recorded and recorded.exists() else None
    data = loaded if isinstance(loaded, dict) else None  # a recording is a dict
    if solution is not None and solution.exists():
        source = solution.read_text(encoding="utf-8")
        if data is not None and data.get("digest") != lesson_digest(solution, tests):
            data = None  # made from other files: computed afresh instead
        data = data or {"reference": {}, "variants": {}, "signatures": None}

        def loader(name: str, text: str) -> Callable[[], types.ModuleType]:
            return cache(lambda: load_module(name, text, str(solution)))

        reference = Caller(None, probes, data["reference"],
                           loader(f"_solution_{key}", source))
        variants = [
            Variant(m, Caller(None, probes, data["variants"].get(m.id, {}),
                              loader(f"_mistake_{key}_{m.id}", m.apply(source))))
            for m in load_mistakes(tests / "mistakes.yml")
        ]
        signatures = data["signatures"]
        return LessonRefs(
            reference, variants, probes, source=source, key=key,
            signatures=None if signatures is None else {
                k: set(v) for k, v in signatures.items()},
            raises=data.get("raises"),
            recorded=bool(data["reference"]),
            recorded_combined={tuple(ids.split("+")): results
                               for ids, results in data.get("combined", {}).items()},
            traces={k: v for k, v in (data.get("traces") or {}).items()
                    if isinstance(v, torch.Tensor)})  # (packed; another version's: none)
    if data is not None:
        return _from_recording(data, probes)
    raise FileNotFoundError(f"lesson {key}: neither the solution nor a recording")


def lesson_digest(solution: Path, tests: Path) -> str:
    """What a recording was made from: the solution and every file of the tests folder."""
    h = hashlib.sha256(solution.read_bytes())
    for f in inputs(tests):
        h.update(b"\0" + str(f.relative_to(tests)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def save_recording(refs: LessonRefs, path: Path) -> None:
    """`recording(refs)` written to path (a student bundle's)."""
    path.write_bytes(recording(refs))


def combined_for_recording(refs: LessonRefs) -> None:
    """Answer what each composite part asked (`LessonRefs.asked`) with the solution
    carrying every combination of known mistakes in two or more of the other parts, so
    that a recording holds what a composite part compares with for any student whose
    other parts have known mistakes. A student bundle's are its practice requests."""
    for composite, requests in refs.asked.items():
        by_part: dict[str, list[str]] = {}
        for v in refs.variants:
            if v.mistake.part != composite:
                by_part.setdefault(v.mistake.part, []).append(v.mistake.id)
        for size in range(2, len(by_part) + 1):
            for parts in itertools.combinations(sorted(by_part), size):
                for ids in itertools.product(*(by_part[p] for p in parts)):
                    caller = refs.combined(ids)
                    for probe, args in requests.values():
                        try:
                            caller.call(probe, **args)
                        except Exception:  # noqa: BLE001 - that combination breaks it
                            continue


def recording(refs: LessonRefs, digest: str = "") -> bytes:
    """The reference's and every mistake's (and combination's) results of the calls
    made so far, the mistakes' titles and hints (not their edits, which quote the
    solution), their signatures and the tests each raised in, and the torch version:
    enough to run and diagnose those tests without the solution. `digest`
    (`lesson_digest`) ties it to the files it was made from, where they ship with it."""
    return protocol.dumps({
        "reference": refs.reference.cache,
        "variants": {v.mistake.id: v.caller.cache for v in refs.variants},
        "combined": {"+".join(ids): results for ids, results in {
            **refs.recorded_combined,
            **{ids: caller.cache for ids, caller in refs._combined.items()}}.items()},
        "torch": torch.__version__,
        "mistakes": [{"id": v.mistake.id, "part": v.mistake.part,
                      "title": v.mistake.title, "hint": v.mistake.hint}
                     for v in refs.variants],
        "signatures": None if refs.signatures is None else {
            k: sorted(v) for k, v in refs.signatures.items()},
        "raises": refs.raises,
        "traces": refs.traces,
        "fresh": refs.fresh,
        "digest": digest})


def _from_recording(data: dict, probes: types.ModuleType) -> LessonRefs:
    variants = [Variant(Mistake(m["id"], m["part"], m["title"], m["hint"], []),
                        Caller(None, probes, data["variants"][m["id"]]))
                for m in data["mistakes"]]
    signatures = data["signatures"]
    return LessonRefs(Caller(None, probes, data["reference"]), variants, probes,
                      None if signatures is None else {k: set(v) for k, v in signatures.items()},
                      raises=data.get("raises"), torch=data.get("torch", ""),
                      _combined={tuple(ids.split("+")): Caller(None, probes, cache)
                                 for ids, cache in data.get("combined", {}).items()},
                      traces={k: v for k, v in (data.get("traces") or {}).items()
                              if isinstance(v, torch.Tensor)},
                      fresh=_fresh(data.get("fresh")))


def _fresh(raw: object) -> dict:
    """A recording's `fresh` (divergence.for_students), or {} when it has none (made
    by an earlier version)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("requests"), dict):
        return {}
    requests = {part: [r for r in found if isinstance(r, list) and len(r) == 2
                       and isinstance(r[0], str) and isinstance(r[1], dict)]
                for part, found in raw["requests"].items() if isinstance(found, list)}
    digests = {p[0]: p[1] for p in raw.get("statements") or []
               if isinstance(p, list) and len(p) == 2 and type(p[0]) is int
               and isinstance(p[1], str)}
    return {"requests": requests, "statements": digests, "composite": raw.get("composite")}
