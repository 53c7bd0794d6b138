"""The pytest plugin hidden tests run under, on the trusted side.

It gives tests three fixtures: `student` (probe calls into the sandboxed worker),
`reference` (the same probes on the solution, in-process and memoised) and
`check` (the soft-assertion recorder). After each test it fails the test if a
check failed, and, for a failing part, replays the test against each known
mistake of that part: if the student's (cached) results pass against a mistake's
results, that mistake is the diagnosis. Everything a test records (`meta`) is the
test's metadata in its raw log (runner.GradingLoop).

Not runner.py: the runner drives a pytest session (which submissions, which tests,
the records); this plugin is what runs inside it, test by test."""
from __future__ import annotations

import inspect
import itertools

import pytest

from grader.judge import cases
from grader.judge.compare import Checks, kept_by_content
from grader.judge.context import LessonContext
from grader.judge.diagnosis import explaining
from grader.judge.earlier import Earlier
from grader.judge.reference import LessonRefs, request_key
from grader.inside import protocol
from grader.sandbox.limits import SandboxError, StudentError
from grader.sandbox.session import Session
from grader.text.strings import say
from grader.lesson.testfile import is_practice, part_of

class GraderFault(Exception):
    """The grader's own machinery failed (the worker is gone, a socket broke): never a
    student's fault. It stops the worker, so the submission is graded again on resume."""


class StudentCaller:
    """Probe calls into a submission; the same request is answered from a cache,
    so replays for diagnosis never run student code again. A result is kept only as
    far as it is shaped like the reference's (the lesson context's): keys the
    reference's result lacks are dropped, and a value far larger than the reference's
    is the student's error (it would become megabytes of check message)."""

    SIZE_FACTOR = 16  # a wrong answer may be larger (dtype, K, shape): not this much
    SIZE_SLACK = 64 * 1024

    def __init__(self, session: Session, ctx: LessonContext):
        self.session = session
        self.ctx = ctx
        self.earlier: Earlier | None = None  # an assembly lesson's (the `earlier` fixture)
        self.cache: dict[str, dict | StudentError] = {}
        self.current_test = ""
        self.served: dict[str, None] = {}  # the request keys the current test asked, in order

    def start(self, test: str) -> None:
        """The next test begins: it is named in errors, and what it asks is noted."""
        self.current_test, self.served = test, {}

    def call(self, probe: str, **args) -> dict:
        key = request_key(probe, args)
        self.served[key] = None
        if key not in self.cache:
            try:
                # a graded request the sandbox holds is asked for by index (Sandbox.hold)
                frame = self.session.slot.held.get(key)
                if frame is None:
                    frames = self.ctx.frames
                    if key not in frames:
                        frames[key] = protocol.dumps({"probe": probe, "args": args})
                    frame = frames[key]
                try:
                    result = self.session.call(probe, args, where=self.current_test,
                                               frame=frame)
                except (SandboxError, OSError) as exc:
                    raise GraderFault(f"the sandboxed worker failed: {exc!r}") from exc
                if not isinstance(result, dict):
                    raise StudentError("protocol", say("err_no_results"))
                self.cache[key] = self._vet(key, probe, args, result)
            except StudentError as exc:
                self.cache[key] = exc
        hit = self.cache[key]
        if isinstance(hit, StudentError):
            raise hit
        return hit

    def served_digest(self) -> str:
        """What the current test was answered (results, or errors), as one content
        hash: two students answered alike get the same verdicts from the same test."""
        answers = {key: (hit.as_dict() if isinstance(hit, StudentError) else hit)
                   for key in self.served if (hit := self.cache.get(key)) is not None}
        return request_key("served", answers)

    def _vet(self, key: str, probe: str, args: dict, result: dict) -> dict:
        """`result` as far as the reference's result says it may be kept. A reply no
        larger than the reference's (every honest one) costs a lookup and a compare."""
        expected = self._expected(key, probe, args)
        if expected is None:
            return result
        sizes, total = expected
        if not result.keys() <= sizes.keys():
            result = {k: v for k, v in result.items() if k in sizes}
        if self.session.last_reply_bytes <= 2 * total + self.SIZE_SLACK:
            return result
        kept = 0
        for name, value in result.items():
            size = self._size(value)
            if size > self.SIZE_FACTOR * sizes[name] + self.SIZE_SLACK:
                raise StudentError("protocol", say(
                    "err_result_too_large", size=size, name=name, expected=sizes[name],
                    where=say("where_in", name=self.current_test)))
            kept += size
        # a decoded tensor is a view of the whole reply: copy, to keep none of the rest
        return {k: self._copied(v) for k, v in result.items()} \
            if 2 * kept < self.session.last_reply_bytes else result

    def _expected(self, key: str, probe: str, args: dict) -> tuple[dict[str, int], int] | None:
        """The size of each value of the reference's result and their sum (memoised per
        request, like the result), or None where there is no reference for this call
        (a student bundle's recording covers the practice tests only)."""
        expected = self.ctx.expected
        if key not in expected:
            try:
                ref = self.ctx.refs.reference.call(probe, **args)
            except Exception:  # noqa: BLE001 - the test itself reports a broken reference
                ref = None
            sizes = {k: self._size(v) for k, v in ref.items()} if isinstance(ref, dict) else None
            expected[key] = (sizes, sum(sizes.values())) if sizes is not None else None
        return expected[key]

    @staticmethod
    def _size(value: object) -> int:
        """Roughly the bytes a decoded value holds: tensors' data, strings' length, 8
        for anything else. A loop, not recursion: the nesting is the student's."""
        total, stack = 0, [value]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                total += len(v)
            elif isinstance(v, dict):
                total += 8
                stack += v.keys()
                stack += v.values()
            elif isinstance(v, list):
                total += 8
                stack += v
            else:  # a tensor (the only other thing protocol.loads makes) or a number
                total += getattr(v, "nbytes", 8)
        return total

    @staticmethod
    def _copied(value: object) -> object:
        """`value` with its own copy of each tensor: a decoded tensor is a view of the
        whole reply, which would keep whatever else the reply held alive."""
        if hasattr(value, "clone"):  # a tensor
            return value.clone()
        if isinstance(value, dict):
            return {k: StudentCaller._copied(v) for k, v in value.items()}
        if isinstance(value, list):
            return [StudentCaller._copied(v) for v in value]
        return value


class Verdict(Exception):
    """A test failed on the student's results; its message is the whole report."""


def _fail(message: str) -> None:
    raise Verdict(message) from None


class _CurrentStudent:
    """The `student` fixture: calls go to whichever submission is being graded."""

    def __init__(self, plugin: "GradingPlugin"):
        self._plugin = plugin

    def call(self, probe: str, **args) -> dict:
        student = self._plugin._student
        if student is None:  # a lesson's test asked for a student in the solution's run
            raise GraderFault("the `student` fixture was called with no submission graded")
        return student.call(probe, **args)

    @property
    def earlier(self) -> Earlier | None:
        """An assembly lesson's own-code part: the submission's earlier pieces
        (grader/judge/earlier.py); None where the runner found none (a replay's caller
        has no such attribute at all: every piece is then stood in for)."""
        return getattr(self._plugin._student, "earlier", None)


class _Explained:
    """The `explained` fixture: results of trusted code only, the solution with the
    known mistakes the grader established in the student's *other* parts (each
    explains its part fully, `diagnosis.explaining`). A composite part compares
    with them as alternatives, so a layer that is right but for its parts' bugs
    loses points in those parts only; an empty list when some other part failed in
    a way no known mistake explains, or when none failed (then only the reference
    counts). The student's code is never run again for this."""

    MAX_COMBINATIONS = 8

    def __init__(self, plugin: "GradingPlugin"):
        self._plugin = plugin

    def call(self, probe: str, **args) -> list[dict]:
        plugin = self._plugin
        per_part = []
        for part in plugin.parts:
            if part == plugin.current_part or not plugin.failed_tests(part):
                continue
            found = plugin.explaining(part)
            if not found:
                return []
            per_part.append(found)
        if not per_part:  # every other part passed: only the reference counts
            return []
        plugin.refs.asked.setdefault(plugin.current_part, {}).setdefault(
            request_key(probe, args), (probe, args))
        results = []
        for combo in itertools.islice(itertools.product(*per_part), self.MAX_COMBINATIONS):
            try:
                results.append(plugin.refs.combined(combo).call(probe, **args))
            except Exception:  # noqa: BLE001 - that combination breaks this probe
                continue
        return results


class _Unexplained:
    """`explained` in replays: strict comparisons (signatures and diagnosis are about
    one part's own mistakes)."""

    def call(self, probe: str, **args) -> list[dict]:
        return []


def replay(item: pytest.Function, fixtures: dict) -> None:
    """Call a collected test's function again with these fixture values and its own
    parameters: how every replay runs a test (diagnosis, signatures, `grader
    tolerance`), with no student code run. The function's own signature says which
    arguments it takes; `explained` compares strictly unless given."""
    values = {**getattr(getattr(item, "callspec", None), "params", {}),
              "explained": _Unexplained(), **fixtures}
    item.obj(**{name: values[name] for name in inspect.signature(item.obj).parameters})


class GradingPlugin:
    def __init__(self, student: StudentCaller | None, refs: LessonRefs, tolerances: dict,
                 parts: list[str], precompute: bool = False):
        self._student, self.refs, self.tolerances = student, refs, tolerances
        self.parts = parts  # course.yml's order: a composite part comes after its parts
        self.current_part = ""
        self.precompute = precompute  # mistake signatures now (a student bundle keeps them)
        self.meta: dict[str, dict] = {}
        self.fault: GraderFault | None = None
        # the session-scoped fixtures' values (the fixtures below return these)
        self.as_student, self.as_explained = _CurrentStudent(self), _Explained(self)
        # a failing test's diagnosis by (test, what it was answered): students with the
        # same mistake are answered alike (a class's copies), so replays run once
        self.diagnoses: dict[tuple[str, str], dict] = {}
        # a failing check's structure by its numbers and tolerance (`compare.described`)
        self.described: dict[str, dict | None] = {}

    def fixtures(self, practice: bool) -> dict:
        """Every fixture a hidden test may take, for one test (`practice`: of a practice
        case): what the fixtures below give it (runner.GradingLoop calls a test with
        these)."""
        return {"student": self.as_student, "reference": self.refs.reference,
                "explained": self.as_explained,
                "check": self.checks(practice)}

    def checks(self, practice: bool) -> Checks:
        """A test's `check`: heatmaps drawn later (runner.score draws those a page shows),
        failing checks' structures kept for the class; a graded case's checks keep no
        fact of one element."""
        return Checks(self.tolerances, later=True, described=self.described,
                      practice=practice)

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[PLUGIN] = self

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Nobody reads the terminal here (scores come from the JSON report), and its
        # per-test bookkeeping and end-of-session failure summary cost real time.
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            session.config.pluginmanager.unregister(reporter)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Run parts in course.yml's order, so a composite part (lesson 13's moe) is
        graded when the verdicts of the parts it is made of are known."""
        order = {name: i for i, name in enumerate(self.parts)}
        items.sort(key=lambda item: order.get(part_of(item.path), len(order)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # (a lesson's tests are functions: no doctest or other item is collected)
        self.items = [item for item in session.items if isinstance(item, pytest.Function)]
        if self.precompute:
            self._signatures()

    def begin(self, student) -> None:
        """Start on the next submission."""
        self._student = student
        self.meta = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function):
        part = part_of(pyfuncitem.path)
        fields = {"test": pyfuncitem.originalname, **cases.fields(
            getattr(getattr(pyfuncitem, "callspec", None), "params", {}))}
        # [name, value] pairs: the lesson's order survives a store that sorts keys
        meta: dict = {"part": part, "name": pyfuncitem.name, "failed": True,
                      "case": [[k, v] for k, v in fields.items()]}
        if "explained" in pyfuncitem.fixturenames:
            meta["composite"] = True
        self.meta[pyfuncitem.nodeid] = meta
        self.current_part = part
        if isinstance(self._student, StudentCaller):
            self._student.start(f"{part} ({pyfuncitem.name})")
        elif self._student is not None:
            self._student.current_test = f"{part} ({pyfuncitem.name})"
        fixture = pyfuncitem.funcargs.get("check")
        checks = fixture if isinstance(fixture, Checks) else None
        try:
            result = yield
        except StudentError as exc:
            meta["error"] = exc.as_dict()
            meta["checks"] = [c.to_dict() for c in checks.items] if checks else []
            if exc.kind == "exception":  # the student's code raised (no limit, no crash)
                meta["diagnosis"] = self._raised_alike(pyfuncitem, part, exc.type)
            _fail(f"{exc.kind}: {exc.message}")
        except GraderFault as exc:
            self.fault = exc
            raise
        except Exception as exc:
            if self._student is None or self._fails_on_reference(pyfuncitem):
                raise  # the hidden test itself is broken: a grader error
            message = say("err_unchecked", detail=f"{type(exc).__name__}: {str(exc)[:300]}")
            meta["error"] = StudentError("malformed", message, "", type(exc).__name__).as_dict()
            _fail(message)
        if checks is None:
            return result
        meta["checks"] = [c.to_dict() for c in checks.items]
        meta["pictures"] = checks.pictures
        failures = checks.failures
        if failures:
            meta["diagnosis"] = self._diagnose(pyfuncitem, part)
            _fail("; ".join(f"{c.name}: {c.message}" for c in failures[:5]))
        meta["failed"] = False
        return result

    def failed_tests(self, part: str) -> dict[str, dict]:
        """The current student's failing tests of `part` so far, by test name."""
        return {m["name"]: m for m in self.meta.values() if m["part"] == part and m["failed"]}

    def explaining(self, part: str) -> list[str]:
        """Known mistakes that fully explain the current student's failures in `part`."""
        failed = self.failed_tests(part)
        return explaining(set(failed), {name for name, m in failed.items() if m.get("error")},
                          {name: (m.get("diagnosis") or {}).get("matches")
                           for name, m in failed.items()},
                          self._signatures(),
                          [v.mistake.id for v in self.refs.variants if v.mistake.part == part])

    def _replay(self, item: pytest.Function, student, reference) -> Checks:
        """Run a test again with other callers in the student's or the reference's
        place (cached results: no student code runs); its checks, or its exception."""
        checks = Checks(self.tolerances, pictures=False)
        replay(item, {**(item.funcargs or {}), "student": student, "reference": reference,
                      "check": checks, "explained": _Unexplained()})
        return checks

    def _fails_on_reference(self, item: pytest.Function) -> bool:
        """Does the test break even when the 'student' is the reference? Then the test
        is at fault; otherwise the student's results were malformed."""
        try:
            self._replay(item, self.refs.reference, self.refs.reference)
        except Exception:  # noqa: BLE001 - any failure on the reference: the test is at fault
            return True
        return False

    def _diagnose(self, item: pytest.Function, part: str) -> dict:
        """Replay the test with each known mistake of this part as the reference;
        every mistake whose results the student's pass against is a match."""
        candidates = [v for v in self.refs.variants if v.mistake.part == part]
        if not candidates:
            return {}
        self._signatures()
        if not isinstance(self._student, StudentCaller):
            return self._replays(item, candidates)
        seen = (item.nodeid, self._student.served_digest())
        return kept_by_content(self.diagnoses, seen, lambda: self._replays(item, candidates))

    def _raised_alike(self, item: pytest.Function, part: str, raised: str) -> dict:
        """A test where the student's code raised `raised` (an exception's type name)
        matches each known mistake of this part whose variant raised that type in this
        test when its signature was taken (`raises`): the student's code is not run
        again, and `diagnosis.explaining` names none on raises alone."""
        candidates = [v for v in self.refs.variants if v.mistake.part == part]
        if not candidates or not raised:
            return {}
        self._signatures()
        raises = self.refs.raises or {}
        return {"matches": [v.mistake.id for v in candidates
                            if raises.get(v.mistake.id, {}).get(item.name) == raised]}

    def _replays(self, item: pytest.Function, candidates: list) -> dict:
        """`_diagnose`'s replays: the matches, or {} when a student call failed. A
        variant that raised in this test is not asked again: only a raise matches it
        (`_raised_alike`), and a recording holds no result of it to answer from."""
        matches = []
        raises = self.refs.raises or {}
        for variant in candidates:
            if item.name in raises.get(variant.mistake.id, {}):
                continue
            try:
                replay = self._replay(item, self._student, variant.caller)
            except StudentError:
                return {}
            except Exception:  # noqa: BLE001 - the variant itself failed: not a match
                continue
            if replay.items and not replay.failures:
                matches.append(variant.mistake.id)
        return {"matches": matches}

    def _signatures(self) -> dict[str, set[str]]:
        """Which tests each known mistake fails, graded like a submission (trusted
        code, once per process): it tells apart mistakes whose numbers coincide on
        some tests, by the pattern of tests they fail. Beside them, `refs.raises`: in
        which of those tests the variant raised, and the exception's type name."""
        if self.refs.signatures is not None:
            return self.refs.signatures
        signatures: dict[str, set[str]] = {}
        raises: dict[str, dict[str, str]] = {}
        for variant in self.refs.variants:
            failed, raised = set(), {}
            for item in self.items:
                if part_of(item.path) != variant.mistake.part:
                    continue
                try:
                    if self._replay(item, variant.caller, self.refs.reference).failures:
                        failed.add(item.name)
                except Exception as exc:  # noqa: BLE001 - the variant breaks this test
                    failed.add(item.name)
                    raised[item.name] = type(exc).__name__
            signatures[variant.mistake.id] = failed
            raises[variant.mistake.id] = raised
        self.refs.signatures, self.refs.raises = signatures, raises
        return signatures

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """A verdict is reported as its message alone: pytest's own failure report
        (which parses the test's source, ~13 ms a failure) would never be shown."""
        exc = call.excinfo
        if exc is None or call.when == "collect" or not isinstance(exc.value, Verdict):
            return None
        return pytest.TestReport(
            item.nodeid, item.location, dict.fromkeys(item.keywords, 1), "failed",
            str(exc.value), call.when,
            [],  # no captured sections: grading runs with --capture=no and no logging
            call.duration, call.start, call.stop, user_properties=item.user_properties)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "practice: a test of a test_practice_<part>.py file "
                            "(0 points; `grader check` runs them for students)")


def pytest_itemcollected(item: pytest.Item) -> None:
    """A practice test is one in a test_practice_<part>.py file: the file name is the one
    definition (grader/lesson/testfile.py, which points, config and bundles go by too), and the `practice` mark that
    a run selects by (`-m practice`, `-m "not practice"`) follows from it here."""
    if is_practice(item.path):
        item.add_marker("practice")


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A case record's test id reads as its fields, `E=8 K=2 float32 N=10`, with no
    seed (students see test ids); anything else keeps pytest's own id."""
    return cases.case_id(val)


# The fixtures hidden tests use. Module-level (this module is registered as a plugin
# beside the GradingPlugin instance), and session-scoped where they can be: pytest's
# fixture set-up is a large share of the trusted side's time per student.
PLUGIN = pytest.StashKey[GradingPlugin]()


@pytest.fixture(scope="session")
def student(request: pytest.FixtureRequest) -> _CurrentStudent:
    return request.config.stash[PLUGIN].as_student


@pytest.fixture(scope="session")
def reference(request: pytest.FixtureRequest):
    return request.config.stash[PLUGIN].refs.reference


@pytest.fixture(scope="session")
def explained(request: pytest.FixtureRequest) -> _Explained:
    return request.config.stash[PLUGIN].as_explained


@pytest.fixture
def check(request: pytest.FixtureRequest) -> Checks:
    return request.config.stash[PLUGIN].checks(is_practice(request.node.path))
