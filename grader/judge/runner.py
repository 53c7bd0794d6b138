"""Grades one submission: a session in the sandboxed worker, hidden tests in-process.

The hidden tests run under pytest on the trusted side; the submission is reached
only through probe calls on its session. Each submission's raw log (in
pytest-json-report's format) is kept beside the scores, which are computed from it.

Not plugin.py: this module drives the pytest session (the submissions, the tests it
selects, the records built from the raw log); the plugin gives the tests inside it
their fixtures and hooks."""
from __future__ import annotations

import inspect
import io
import sys
import time
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_jsonreport import serialize

from grader.judge import plugin as fixtures
from grader.judge import divergence, earlier, questions, smallest, standin
from grader import points
from grader.judge.context import LessonContext
from grader.judge.compare import Later
from grader.judge.diagnosis import diagnose
from grader.intake import notebook
from grader.intake.capped import TEXT, read_source
from grader.judge.drawn import shown_pictures
from grader.judge.plan import Submission
from grader.judge.plugin import GraderFault, GradingPlugin, StudentCaller, Verdict
from grader.record import (WORKER_STOPPED, Diagnosis, GradeRecord, PartRecord, TestRecord, Timing,
                           status_of)
from grader.judge.reference import Caller, request_key
from grader.sandbox.limits import StudentError
from grader.sandbox.session import Session
from grader.sandbox.slot import SlotLike
from grader.store import source_hash
from grader.text.strings import STRINGS, Said, in_language, say
from grader.lesson.testfile import is_practice, part_of

# Graded runs score the hidden cases only. Practice cases (test_practice_<part>.py, which
# the grading plugin marks `practice`; shipped to students with their reference results)
# are run by `grader check`, worth 0 points.
GRADED_TESTS, PRACTICE_TESTS = "not practice", "practice"  # pytest -k selections
# A hidden test that broke on its own (the self-check makes this rare): no source shown.
GRADER_ERROR = "the grader could not run this test (a grader error, not yours)"


def read(sub: Submission) -> Submission:
    """Load the source, turning every unreadable case into a clear problem. The file is
    read as `capped.read_source` reads it; with no file, intake's notes say why (a link
    left out, a broken notebook); a problem the Dask client found stands."""
    if sub.problem:
        return sub
    if sub.path is None:
        why = Said({lang: " ".join(in_language(n, lang) for n in sub.notes) for lang in STRINGS})
        sub.problem = say("file_none_why", why=why) if sub.notes else say("file_none")
        return sub
    got = read_source(sub.path)
    data = got.data or b""  # (none only with a problem)
    if got.problem:
        sub.problem = got.problem
    elif not data.strip():
        sub.problem = say("file_empty")
    else:
        try:
            sub.source = data.decode(TEXT)
        except UnicodeDecodeError as exc:
            sub.problem = say("file_not_utf8", reason=exc.reason, at=exc.start)
    if "\x00" in (sub.source or ""):
        sub.source, sub.problem = None, say("file_nul")
    return sub


# What a hidden test may take and still be run directly (`GradingLoop`): the grading
# plugin's fixtures (and pytest's `request`, which they take), its own parameters, no
# mark but these.
DIRECT_FIXTURES = frozenset({"student", "reference", "explained", "check", "request"})
DIRECT_MARKS = frozenset({"parametrize", "practice"})


def runs_directly(item: pytest.Item) -> bool:
    """A test whose set-up is only the grading plugin's fixtures: calling its function
    with them is all pytest's per-item protocol would do for it."""
    if not isinstance(item, pytest.Function):
        return False
    params = getattr(getattr(item, "callspec", None), "params", {})
    given = DIRECT_FIXTURES - {"request"} | params.keys()
    return set(inspect.signature(item.obj).parameters) <= given and \
        set(item.fixturenames) <= given | {"request"} and \
        {m.name for m in item.iter_markers()} <= DIRECT_MARKS


class GradingLoop:
    """A pytest plugin that grades a stream of submissions in one pytest session.

    Collection, the hidden test modules and pytest's start-up are paid once per
    worker. Each submission then runs every collected test: a test that takes only
    the grading plugin's fixtures (`runs_directly`: every hidden test) is called
    through the `pytest_pyfunc_call` hook with them, as pytest's per-item protocol
    would call it, without that protocol's set-up, teardown and per-phase reports;
    any other test runs through the protocol. Either way each test becomes an entry of the submission's raw log
    in pytest-json-report's format: its node id, line, outcome, the grading plugin's
    evidence as its metadata, and its call phase (another phase only where it did not
    pass). Its plugin cannot do this part through its public API: it makes one report
    per session, and a second instance cannot join a session (its hook specifications
    would be added twice).
    """

    def __init__(self, plugin: GradingPlugin,
                 jobs: Iterable[tuple[object, Callable[[dict], None]]]):
        self.plugin, self.jobs = plugin, jobs
        self.tests: dict[str, dict] = {}  # the current submission's records, by node id

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.testsfailed and session.config.option.continue_on_collection_errors is False:
            raise session.Interrupted("the hidden tests could not be collected")
        items = session.items
        direct = [item.ihook if runs_directly(item) else None for item in items]
        for caller, done in self.jobs:
            self.plugin.begin(caller)
            self.tests = {}
            started = time.time()
            for i, item in enumerate(items):
                if direct[i] is not None and isinstance(item, pytest.Function):
                    self._call(item, direct[i])
                    continue
                nextitem = items[i + 1] if i + 1 < len(items) else None
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if self.plugin.fault is not None:  # no verdict from a broken worker
                raise self.plugin.fault
            raw = serialize.make_report(
                created=time.time(), duration=time.time() - started, exitcode=0,
                root=str(session.path), environment={},
                summary=serialize.make_summary(self.tests, collected=len(items)))
            raw["tests"] = list(self.tests.values())
            done(raw)
        return True

    def _call(self, item: pytest.Function, hook) -> None:
        """Run a test that `runs_directly`: its function called through the hook with
        the grading plugin's fixtures and its parameters, the outcome as pytest's
        protocol reports it (a verdict's message is the plugin's, as there)."""
        item.funcargs = {**getattr(getattr(item, "callspec", None), "params", {}),
                         **self.plugin.fixtures(is_practice(item.path))}
        outcome, longrepr = "passed", ""
        started = time.perf_counter()
        try:
            hook.pytest_pyfunc_call(pyfuncitem=item)
        except (KeyboardInterrupt, pytest.exit.Exception):
            raise
        except pytest.skip.Exception as exc:
            outcome, longrepr = "skipped", str(exc)
        except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - a failed test
            outcome = "failed"
            longrepr = str(exc) if isinstance(exc, Verdict) else \
                f"{type(exc).__name__}: {exc}"
        finally:
            item.funcargs = {}  # the test's check and results go with it
        call = {"duration": time.perf_counter() - started, "outcome": outcome,
                **({"longrepr": longrepr} if longrepr else {})}
        self._entry(item.nodeid, item.location)["call"] = call
        self._outcome(item.nodeid, outcome)

    def _entry(self, nodeid: str, location: tuple) -> dict:
        """The test's entry in the raw log, with the grading plugin's evidence."""
        test = self.tests.get(nodeid)
        if test is None:
            test = self.tests[nodeid] = {"nodeid": nodeid, "lineno": location[1],
                                         "outcome": "passed"}
        meta = self.plugin.meta.get(nodeid)
        if meta:
            test["metadata"] = meta
        return test

    def _outcome(self, nodeid: str, outcome: str) -> None:
        """A phase that did not pass sets the test's outcome."""
        if outcome not in ("passed", ""):
            self.tests[nodeid]["outcome"] = outcome

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """One phase of a test run through pytest's protocol (setup, call, teardown)
        into the test's entry: its call phase, and any other that did not pass.
        Grading captures no output and no log, so the phases hold none."""
        test = self._entry(report.nodeid, report.location)
        outcome = self.config.hook.pytest_report_teststatus(report=report,
                                                             config=self.config)[0]
        self._outcome(report.nodeid, outcome)
        if report.when == "call" or not report.passed:
            test[report.when] = serialize.make_teststage(report, None, None, None,
                                                         omit_traceback=True)


@contextmanager
def lesson_imports(tests: Path, mine: dict[str, types.ModuleType]) -> Iterator[None]:
    """For one run, the lesson's folder first on sys.path and only its own modules
    under its files' names: two lessons may each have a `_inputs.py` or a
    `test_norm.py` and run in one process (pytest's importlib mode keeps its hands off
    sys.path; this puts the folder there, for the helpers' plain imports). `mine`
    (the lesson context's) keeps the lesson's modules between runs."""
    folder = tests.resolve()
    names = {f.stem for f in folder.glob("*.py")}
    others = {}
    for name in names & sys.modules.keys():
        module = sys.modules.pop(name)
        if Path(getattr(module, "__file__", None) or "/").resolve().parent == folder:
            mine.setdefault(name, module)
        else:
            others[name] = module
    sys.modules.update(mine)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        mine.update({name: sys.modules.pop(name) for name in names & sys.modules.keys()})
        sys.modules.update(others)


class CollectionErrors:
    """Why collection failed, in full: the grading plugin silences pytest's terminal.
    Also whether pytest stopped for Ctrl-C, which it catches and ends the session for."""

    def __init__(self) -> None:
        self.reports: list[str] = []
        self.interrupted = False

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.reports.append(f"{report.nodeid or report.fspath}:\n{report.longreprtext}")

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo) -> None:
        # pytest.exit and Session.Interrupted (a failed collection) come here too
        self.interrupted = type(excinfo.value) is KeyboardInterrupt


def run_tests(ctx: LessonContext, jobs: Iterable[tuple[object, Callable[[dict], None]]],
              select: str = GRADED_TESTS, precompute: bool = False) -> None:
    """Run the lesson's hidden tests once per job: (student caller, callback(raw log))."""
    tests = ctx.tests
    plugin = GradingPlugin(None, ctx.refs, ctx.course.tolerances(ctx.key),
                           list(ctx.lesson.parts), precompute)
    loop = GradingLoop(plugin, jobs)
    errors = CollectionErrors()
    # Only what grading uses: every plugin with per-test hooks costs each student.
    # No autoloaded plugins (anyio, xdist, ...); the raw log is GradingLoop's.
    args = [str(tests), "-q", "--tb=no", "--capture=no", "--assert=plain",
            "--import-mode=importlib",
            "--disable-plugin-autoload", "--rootdir", str(tests), "-c", "/dev/null",
            *(f"-pno:{name}" for name in (
                "cacheprovider", "unraisableexception", "threadexception", "logging",
                "warnings", "faulthandler", "setuponly", "setupplan", "unittest",
                "tmpdir", "subtests"))]
    if select:
        args += ["-m", select]
    sink = io.StringIO()
    with redirect_stdout(sink), redirect_stderr(sink), lesson_imports(tests, ctx.modules):
        code = pytest.main(args, plugins=[plugin, loop, errors, fixtures])
    if errors.interrupted:  # Ctrl-C, which pytest caught: the run stops, nothing failed
        raise KeyboardInterrupt
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        why = "\n".join(errors.reports) or sink.getvalue()[-2000:] or "no output"
        raise RuntimeError(f"hidden tests of lesson {ctx.key} did not run "
                           f"(pytest exit {code}):\n{why[-6000:]}")


@dataclass
class Scored:
    """A raw log's verdicts: the points, the parts and each test's record."""

    score: float
    max_score: float
    parts: dict[str, PartRecord]
    tests: list[TestRecord]

    @property
    def failing(self) -> list[str]:
        """The parts with a failing test, practice tests included (a check runs only
        those, and its parts' graded counts are 0 of 0), in the parts' order."""
        failed = {t.part for t in self.tests if not t.passed}
        return [name for name in self.parts if name in failed]


def score(ctx: LessonContext, raw: dict, problem: str | None = "") -> Scored:
    """Each part's points shared by its graded tests in exact units (grader/points.py);
    practice tests are recorded at 0 of 0. Which mistake explains each part is
    `diagnosis.diagnose`'s to say. The heatmaps a page shows are drawn (`draw_shown`;
    `problem`: the record's, which decides which tests the page shows; None: not yet,
    the caller draws them once the record's problem is known)."""
    lesson = ctx.lesson
    refs = ctx.refs
    entries = raw["tests"]
    tests = [_test_record(t) for t in entries]
    unknown = {t.part for t in tests} - set(lesson.parts)
    if unknown:
        raise RuntimeError(f"hidden tests name parts not in course.yml: {sorted(unknown)}")
    parts = points.award(lesson.parts, tests)
    found = [(t, e.get("metadata", {}).get("diagnosis", {}).get("matches"))
             for t, e in zip(tests, entries)]
    mistakes = [v.mistake for v in refs.variants]
    for name, part in parts.items():
        mine = [(t, m) for t, m in found if t.part == name]
        part.diagnosis = diagnose([t for t, _ in mine], {t.name: m for t, m in mine},
                                  mistakes, refs.signatures or {})
    if problem is not None:
        draw_shown(tests, problem)
    return Scored(points.total(parts), points.total(parts, "max_score"), parts, tests)


class _ReferenceAsStudent:
    """The reference in a student's place, noting each distinct request it is sent."""

    def __init__(self, caller: Caller):
        self.caller, self.current_test = caller, ""
        self.requests: dict[str, dict] = {}

    def call(self, probe: str, **args) -> dict:
        self.requests.setdefault(request_key(probe, args), {"probe": probe, "args": args})
        return self.caller.call(probe, **args)


def grade_solution(ctx: LessonContext) -> dict[str, dict]:
    """Grade the solution in-process as if it were a student: warms every cache the
    workers inherit and refuses to run with hidden tests that fail the solution.
    Returns the requests the tests made, {key: {"probe", "args"}}, for the sandbox."""
    as_student = _ReferenceAsStudent(ctx.refs.reference.twin())
    raw_logs: list[dict] = []
    # Mistake signatures (which tests each known mistake fails) are computed here, once:
    # the composite part's rule and every diagnosis need them, and each forked worker
    # would otherwise pay for them again on its first failing student.
    run_tests(ctx, [(as_student, raw_logs.append)], precompute=True)
    result = score(ctx, raw_logs[0])
    if result.score != result.max_score:
        failing = [t.name for t in result.tests if not t.passed]
        raise RuntimeError(f"the solution of lesson {ctx.key} fails its own hidden "
                           f"tests: {failing[:5]}; fix the tests before grading")
    return as_student.requests


def draw_shown(tests: list[TestRecord], problem: str) -> None:
    """Draw the heatmaps a page will show (`compare.Later`) and drop the others, in the
    checks themselves: where a page draws one, the record holds it as it did when
    every failing check drew its own (`feedback.shown_pictures` says where)."""
    maps, _ = shown_pictures(tests, problem)
    for test in tests:
        for c in test.checks:
            if isinstance(c, dict) and isinstance(c.get("heatmap"), Later):
                if id(c) in maps:
                    c["heatmap"] = c["heatmap"].value()
                else:
                    del c["heatmap"]


def _test_record(t: dict) -> TestRecord:
    """One test's verdict from its pytest-json-raw entry; points come later."""
    path, name = t["nodeid"].split("::", 1)
    meta = t.get("metadata", {})
    passed = t["outcome"] == "passed"
    checks = meta.get("checks", [])
    diffs = [c["max_abs_diff"] for c in checks if c.get("max_abs_diff") is not None]
    failing = [c for c in checks if not c.get("passed")]
    error = meta.get("error")
    message = (error["message"] if error else
               "; ".join(f"{c['name']}: {c.get('message', '')}" for c in failing[:3]))
    if not passed and not message:
        message = GRADER_ERROR
    return TestRecord(name=name, part=part_of(path), practice=is_practice(path),
                      outcome="passed" if passed else "failed",
                      max_abs_diff=max(diffs) if diffs else None, message=message,
                      checks=checks, error=error, pictures=meta.get("pictures", []),
                      case=meta.get("case", []), composite=bool(meta.get("composite")))


def grade_many(ctx: LessonContext, subs: Iterable[Submission], slot: SlotLike | None,
               on_result: Callable[[GradeRecord], None], select: str = GRADED_TESTS) -> None:
    """Grade submissions one after another in one pytest session; report each record."""
    lesson = ctx.lesson
    limits = ctx.course.limits(ctx.key)

    def jobs() -> Iterator[tuple[object, Callable[[dict], None]]]:
        for sub in subs:
            started = time.monotonic()
            sub = read(sub)
            session, missing = None, None
            caller: _Missing | StudentCaller
            if sub.problem:
                missing = sub.path is None or not sub.path.exists()
                caller = _Missing(sub.problem)
            else:
                if slot is None or sub.source is None:  # `read` gives a source with no problem
                    raise ValueError("a submission's code needs a slot to run in")
                session = Session(slot, sub.source, lesson.exercise, lesson.provides, limits)
                # an assembly lesson's pieces, answered in every request (standin.always)
                if lesson.builds_on and (answering := standin.answerer(
                        ctx.tests, ctx.refs.pieces, ctx.refs.stand_in_memo)) is not None:
                    session.stand_in = answering.answer
                caller = StudentCaller(session, ctx)
                if lesson.builds_on:  # an assembly lesson's own-code part, or the own
                    caller.earlier = (sub.earlier or  # pieces a practice run was given
                                      earlier.find(ctx.course, ctx.key, sub.student_id))
            reports: list[dict] = []
            yield caller, reports.append
            # from the autograder zip's recording: the reference's side of the smallest
            # examples, the questions and the traces is read from it, the solution not
            # imported for them (LessonContext.recorded_only says why)
            recorded_only = ctx.recorded_only
            scored = score(ctx, reports[0], None)  # once: every step below reads it
            # a student bundle's check of an assembly lesson runs the student's own
            # pieces in the practice tests alone: an example, a question or a trace
            # would ask the grader's stand-ins, which nothing answers there
            own_files = getattr(caller, "earlier", None)
            alone = own_files is not None and own_files.alone
            examples = {} if alone else _examples(ctx, caller, session, scored, recorded_only)
            answers = {} if alone else _answers(ctx, caller, session, scored, recorded_only)
            first = {part: (e.probe, e.args) for part, e in examples.items()}
            try:  # in the graded child while it lives (trace_failing says how)
                where = {} if alone else divergence.trace_failing(
                    ctx, session, reports[0], first, compute=not recorded_only)[0]
            finally:
                if session is not None:
                    session.close()
            excused = _stand_in_round(ctx, session, scored, select != GRADED_TESTS)
            record = _record(ctx, sub, slot, session, missing, reports[0], scored,
                             time.monotonic() - started, where)
            record.examples = {part: e.snippet for part, e in examples.items()
                               if part not in excused}
            _own_pieces(ctx, caller, record)
            for name, found in answers.items():  # feedback only: after the points
                if name not in excused:
                    record.parts[name].answers = found
            on_result(record)
            if getattr(slot, "lost", False):  # its server is gone: the caller replaces it
                return

    run_tests(ctx, jobs(), select)


def _examples(ctx: LessonContext, caller: object, session: Session | None,
              scored: Scored, recorded_only: bool = False) -> dict[str, smallest.Example]:
    """The smallest failing example of each failing part, asked of the student's code
    in its own session while it is open (fresh inputs only: grader/judge/smallest.py, with
    the lesson's examples.py)."""
    if session is None or session.fatal is not None:
        return {}
    try:
        return smallest.examples(ctx.tests, ctx.refs.probes, scored.failing, caller,
                                 _reference(ctx, recorded_only))
    except (StudentError, GraderFault):
        return {}  # the student's code broke on it: the tests already say so
    except LookupError:
        return {}  # no solution here (a student bundle): no reference for a fresh input


def _reference(ctx: LessonContext, recorded_only: bool) -> Caller:
    """The reference for fresh inputs: the lesson's, or, from a recording only, a
    caller that answers from it and raises LookupError for anything else."""
    reference = ctx.refs.reference
    return Caller(None, reference.probes, reference.cache) if recorded_only else reference


def _answers(ctx: LessonContext, caller: object, session: Session | None,
             scored: Scored, recorded_only: bool = False) -> dict[str, list[dict]]:
    """What the student's functions answer to the lesson's questions on fresh inputs
    (grader/judge/questions.py), for each failing part no known mistake explains, asked in
    its own session while it is open."""
    if session is None or session.fatal is not None:
        return {}
    unexplained = [name for name in scored.failing if scored.parts[name].diagnosis is None]
    found: dict[str, list[dict]] = {}
    try:
        for name in unexplained:
            answers = questions.ask(ctx.tests, name, caller, _reference(ctx, recorded_only))
            if answers:
                found[name] = answers
    except GraderFault:
        return found  # the session broke: what was established before stays true
    except LookupError:
        return {}  # no solution here (a student bundle): no reference for a fresh input
    return found


def _stand_in_round(ctx: LessonContext, session: Session | None, scored: Scored,
                    no_round: bool) -> set[str]:
    """Each mistake charged once: the composite part's stand-in round (grader/judge/standin.py),
    after every other request of the student was answered; a composite part whose
    wiring it passed keeps its points. The composite parts excused. From the autograder
    zip's recording too: the zip ships the solution, which the round then loads on the
    trusted side (after the template has forked: docs/design.md). Not in a practice run
    (`grader check`: a student bundle has no solution, and the two checks agree); not
    for a submission that used up its time budget, whose composite part failed for that
    limit."""
    if session is None or no_round or session.spent():
        return set()
    rounds = standin.run(ctx.tests, ctx.refs.reference, ctx.course.tolerances(ctx.key),
                         session, scored.failing)
    excused = {part for part, found in rounds.items() if found["passed"]}
    for test in scored.tests:
        if test.part in excused and not test.passed:
            test.outcome, test.message, test.error = "passed", "", None
            test.checks, test.pictures, test.max_abs_diff = [], [], None
    if excused:
        parts = points.award(ctx.lesson.parts, scored.tests)
        for name in excused:
            scored.parts[name] = parts[name]
        scored.score = points.total(scored.parts)
    for part, found in rounds.items():
        scored.parts[part].stand_in = found
    return excused


def _own_pieces(ctx: LessonContext, caller: object, record: GradeRecord) -> None:
    """Where an assembly lesson's numbers came from, for its page: each wiring part
    was graded with the stand-ins (the pieces named, and the lesson's own classes
    stood in for in that part: stand_ins.py's `NESTED`), and the own-code part says
    which earlier pieces ran as the student's own and which were stood in for, and
    why (grader/judge/earlier.py)."""
    found = getattr(caller, "earlier", None)
    lesson = standin.always(ctx.tests) if found is not None else None
    own = getattr(lesson, "OWN", None)
    if found is None or own not in record.parts:
        return
    nested = getattr(lesson, "NESTED", {})
    for name, part in record.parts.items():
        part.earlier = ({"pieces": [p.to_json() for p in found.pieces]} if name == own
                        else {"wiring": [p.name for p in found.pieces]
                              + [c for c, (held_in, _) in nested.items() if held_in == name]})


def _near(ctx: LessonContext, part: str, found: dict, diagnosis: Diagnosis | None
          ) -> Diagnosis | None:
    """The known mistake a part's finding comes near where none explains the part: a
    layer built with a parameter the reference lacks whose name begins with a mistake's
    id (`shared_expert_gate.weight` and `shared_expert`), offered as a likely cause."""
    if found.get("kind") != "extra" or (diagnosis is not None and diagnosis.id):
        return None
    root = str(found.get("name") or "").split(".", 1)[0]
    for variant in ctx.refs.variants:
        m = variant.mistake
        if m.part == part and (root == m.id or root.startswith(m.id + "_")):
            return Diagnosis(m.id, m.title, m.hint)
    return None


def _record(ctx: LessonContext, sub: Submission, slot: SlotLike | None,
            session: Session | None, missing: bool | None, raw: dict, scored: Scored,
            elapsed: float, where: dict[str, dict] | None = None) -> GradeRecord:
    """The one place a result record is built: from the file `read` took (`missing`:
    None when it could be read, else whether it is absent), what the session
    established about the run, and `scored`, the verdicts of its raw log."""
    failing = scored.failing
    for name, found in (where or {}).items():  # feedback only: after the points
        if name in failing:
            scored.parts[name].where = found
            scored.parts[name].near = _near(ctx, name, found, scored.parts[name].diagnosis)
    fatal = session.fatal if session is not None else None
    problem = sub.problem if session is None else (fatal.message if fatal else "")
    draw_shown(scored.tests, problem)
    status = status_of(missing, fatal.kind if fatal else None, scored.tests)
    if status == WORKER_STOPPED:  # what passed before the slot ended does not count
        _award_nothing(scored)
    return GradeRecord(
        student_id=sub.student_id, lesson=ctx.key, status=status,
        score=scored.score, max_score=scored.max_score, parts=scored.parts,
        tests=scored.tests,
        problem=problem,
        import_traceback=fatal.traceback if fatal else "",
        output=session.output.text() if session is not None else "",
        sandboxed=bool(slot and slot.sandboxed),
        sandbox=slot.sandbox.mode if slot else "none", notes=sub.notes,
        fingerprint=sub.fingerprint, name=sub.name, cells=notebook.cells_of(sub.path),
        source_hash=source_hash(sub.source) if sub.source is not None else "",
        timing=Timing(round(elapsed, 3), round(session.cpu_s, 3) if session else 0.0),
        raw_log=raw)


def _award_nothing(scored: Scored) -> None:
    """0 points for every test and part: a submission that ended its slot (the
    tests that passed before it did stand as verdicts, worth nothing)."""
    scored.score = 0.0
    for test in scored.tests:
        test.score = 0.0
    for part in scored.parts.values():
        part.score = 0.0


def grade(ctx: LessonContext, sub: Submission, slot: SlotLike | None,
          select: str = GRADED_TESTS) -> GradeRecord:
    """Grade a single submission (used by `grader check` and the tests)."""
    out: list[GradeRecord] = []
    grade_many(ctx, [sub], slot, out.append, select)
    return out[0]


class _Missing:
    """Stands in for a submission that cannot be run: every probe call fails alike."""

    def __init__(self, problem: str):
        self.error = StudentError("missing", problem)
        self.current_test = ""

    def call(self, probe: str, **args) -> dict:
        raise self.error
