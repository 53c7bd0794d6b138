"""`grader check`'s steps, in one place: which course and lesson a file is for, the
practice results the trusted side compares with, then, for each version of the file,
`STEPS`, one object per aspect (read, practice tests, outcome, shapes question), on a
warm slot: once (`run_file`) or for each save (`watch`). The CLI's `check`,
`grader.api.check_file` and the tests call these functions, so what the tests assert
is what a student runs.

Where the course has its solution (the project), the practice results are kept in the
user's cache (`grader.judge.kept`): after the first check of a kind, the trusted side answers
from them and never loads the solution (whose `import transformers` was a second one
beside the sandbox's). A student bundle ships its recording (`grader.deliver.bundle`).

An assembly lesson checked where nothing answers its stand-ins (a student bundle:
`on_own_pieces`) runs on the student's own earlier files beside theirs, each first
checked with its own lesson's practice tests (`own_pieces`), so that a piece's mistake
is named as that piece's and not taken for a wiring mistake.
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from grader.run import interrupts

if TYPE_CHECKING:
    from grader import config
    from grader.judge.context import LessonContext
    from grader.judge.earlier import Earlier
    from grader.judge.runner import Submission
    from grader.record import GradeRecord
    from grader.sandbox.slot import Slot

COURSE_FILE = "course.yml"
POLL_S = 0.1  # how often --watch looks at the file: a save is seen within this


class WrongInput(ValueError):
    """The file or the command is wrong: `grader check` exits 2 (docs/students.md)."""


def course_file(given: str | None) -> Path:
    """The course.yml a check reads: the one given, else this folder's, else the one
    beside the grader package (a student bundle installed into a venv of the
    student's own, run from their work folder)."""
    if given is not None:
        return Path(given)
    here = Path(COURSE_FILE)
    if here.is_file():
        return here
    beside = Path(__file__).resolve().parents[2] / COURSE_FILE
    return beside if beside.is_file() else here


def given(course_path: Path, file: Path | None) -> None:
    """The paths a check is given, said wrong before anything is read. A file that is
    not there is said first: no lesson can be guessed from it."""
    if file is not None and not file.exists():
        raise WrongInput(f"no such file: {file}")
    if file is not None and not file.is_file():
        raise WrongInput(f"not a file: {file}")
    if not course_path.exists():
        raise WrongInput(f"no course file {course_path} here: run this in the course's (or "
                         "the student bundle's) folder, or give --course PATH")


def lesson_for(course_path: Path, lesson_key: str | None,
               file: Path | None) -> tuple[config.Course, str]:
    """The course and the lesson a check is for: named, or the one whose exercise file
    has this file's name, or the course's only one (`given`'s paths said first)."""
    from grader import config

    given(course_path, file)
    try:
        course = config.load(course_path)
        if lesson_key is None:
            keys = [k for k, les in course.lessons.items()
                    if file is None or Path(les.exercise).stem == file.stem
                    or len(course.lessons) == 1]
            if len(keys) != 1:
                raise WrongInput("which lesson? give --lesson (one of "
                                 f"{', '.join(sorted(course.lessons))})")
            lesson_key = keys[0]
        course.lesson(lesson_key)
    except config.ConfigError as exc:
        raise WrongInput(str(exc)) from None
    return course, lesson_key


def on_own_pieces(course: config.Course, lesson_key: str) -> bool:
    """Whether a check of this lesson runs on the student's own earlier files: an
    assembly lesson (`builds_on`) where an earlier lesson's solution is not at hand to
    answer its stand-ins (a student bundle; `LessonContext`'s pieces are then None)."""
    lesson = course.lesson(lesson_key)
    return bool(lesson.builds_on) and any(
        (s := course.lesson(k).solution) is None or not course.path(s).exists()
        for k in lesson.builds_on)


def earlier_files(course_path: Path, lesson_key: str | None, file: Path) -> list[Path]:
    """The student's earlier files an assembly lesson's check reads beside `file`
    (`earlier.beside`), found from course.yml read as plain YAML, before anything is
    validated: a bundle's sandbox binds these, and nothing else of the student's
    folder. [] where the course cannot be read (the check inside says why)."""
    import yaml

    from grader.text.yamlread import LOADER

    try:
        lessons = yaml.load(course_path.read_text(encoding="utf-8"), Loader=LOADER)["lessons"]
        key = lesson_key or next(k for k, les in lessons.items()
                                 if Path(les["exercise"]).stem == file.stem)
        names = [lessons[k]["exercise"] for k in lessons[key].get("builds_on") or {}]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, LookupError, TypeError,
            StopIteration):
        return []
    return [p for name in names if (p := file.parent / name).is_file()]


def context(course: config.Course, lesson_key: str) -> LessonContext:
    """The lesson as a check sees it. With the solution here, its practice results
    come from the user's cache where an earlier check kept them (`grader.judge.kept`)."""
    from grader.judge import kept

    return kept.context(course, lesson_key, "practice")


def prepare(ctx: LessonContext) -> None:
    """Load what a check needs (the practice results, pytest and the runner) while the
    sandbox boots."""
    from grader.judge import kept, runner  # noqa: F401 - imported now, not after the boot
    from grader.intake import notebook  # noqa: F401 - likewise

    kept.loaded(ctx)


@dataclass
class Practiced:
    """One check: the graded run's record of the practice tests, and the outcome both
    outputs show (`practice_output.outcome`, the shapes question's marks added)."""

    record: GradeRecord
    outcome: dict

    @property
    def status(self) -> int:
        from grader.run.practice_output import exit_status

        return exit_status(self.outcome)


@dataclass
class Pieces:
    """An assembly lesson's pieces in a check on the student's own files
    (`on_own_pieces`): which file gives each (`earlier.beside`), and each file's check
    with its own lesson's practice tests (lesson key -> Practiced)."""

    found: Earlier
    checked: dict[str, Practiced]


def earlier_slots(course: config.Course, lesson_key: str,
                  boot: Callable[[str], Slot]) -> dict[str, Slot]:
    """A slot of each lesson whose files `own_pieces` checks (`boot`: lesson key -> a
    slot of that lesson's), where the check is `on_own_pieces`; else none."""
    if not on_own_pieces(course, lesson_key):
        return {}
    return {key: boot(key) for key in course.lesson(lesson_key).builds_on}


def own_pieces(course: config.Course, lesson_key: str, file: Path,
               slots: dict[str, Slot], language: str | None = None) -> Pieces | None:
    """The student's earlier files beside `file`, each checked as `grader check` checks
    it, on its lesson's slot (`earlier_slots`, closed here); None without slots."""
    from grader.judge import earlier

    if not slots:
        return None
    try:
        found = earlier.beside(course, lesson_key, file.parent)
        checked = {}
        for key, path in found.files.items():
            ctx = context(course, key)
            prepare(ctx)
            checked[key] = run_file(ctx, path, slots[key], language)
    finally:
        for slot in slots.values():
            close(slot)
    return Pieces(found, checked)


@dataclass
class Checking:
    """One version of the file as `STEPS` take it: what it is checked with, and each
    step's result under the step's name, in the order the steps ran."""

    ctx: LessonContext
    file: Path        # this version of the file
    shown: str        # the file's name as the student knows it
    loaded: Path      # where the read step writes the code that runs
    grade: Callable[[Submission], GradeRecord]  # the practice tests' run on the slot
    language: str | None = None
    pieces: Pieces | None = None  # an assembly lesson's, on the student's own files
    results: dict[str, Any] = field(default_factory=dict)

    def practiced(self) -> Practiced:
        return Practiced(self.results[PRACTICE.name], self.results[OUTCOME.name])


@dataclass(frozen=True)
class Step:
    """One aspect of `grader check`, after okpy's one object per aspect: `run` takes
    the check so far and returns this step's result (`Checking.results[name]`)."""

    name: str
    run: Callable[[Checking], Any]


def _read(checking: Checking) -> Submission:
    """The file loaded as the graded run loads it: a notebook's code cells, the same
    notes (what cannot be read is the practice run's problem, which says why)."""
    from grader.intake import notebook
    from grader.judge import runner

    path, notes = notebook.load(checking.file, checking.shown, checking.loaded)
    return runner.Submission("you", path, notes=notes,
                             earlier=checking.pieces.found if checking.pieces else None)


def _practice(checking: Checking) -> GradeRecord:
    """The practice tests on the slot, as the graded run runs its tests (the file's
    problems, the contract and the checks are theirs): `Checking.grade`."""
    return checking.grade(checking.results[READ.name])


def _outcome(checking: Checking) -> dict:
    """The record as the student is told it (`practice_output.outcome`), with an
    assembly lesson's own pieces (`practice_output.pieces_outcome`)."""
    from grader.run.practice_output import outcome, pieces_outcome

    record = checking.results[PRACTICE.name]
    shown = outcome(record, checking.ctx.course, checking.ctx.key, record.notes,
                    checking.language)
    if checking.pieces is not None:
        shown["earlier"] = pieces_outcome(checking.pieces.found, {
            k: c.outcome for k, c in checking.pieces.checked.items()},
            checking.ctx.course, checking.ctx.key, shown["language"])
    return shown


def _shapes(checking: Checking) -> dict[str, dict] | None:
    """The shapes question's marks, in the outcome: the lesson's own text holds its
    answer, so no hidden case is involved. None where the lesson has no questions."""
    from grader.intake.answers import read_answers
    from grader.judge.written import shapes_marks

    written = checking.ctx.lesson.written
    if not written:
        return None
    shown = checking.results[OUTCOME.name]
    marks = shapes_marks(written, read_answers(checking.file, written),
                         shown.get("language") or checking.ctx.course.language)
    shown["written"] = marks
    return marks


READ = Step("read", _read)
PRACTICE = Step("practice tests", _practice)
OUTCOME = Step("outcome", _outcome)
SHAPES = Step("shapes question", _shapes)
STEPS = (READ, PRACTICE, OUTCOME, SHAPES)  # in order: each reads what those before gave


def run_steps(checking: Checking, steps: Iterable[Step]) -> Checking:
    """Run `steps` on `checking`, each result kept under its step's name."""
    for step in steps:
        checking.results[step.name] = step.run(checking)
    return checking


def run_file(ctx: LessonContext, file: Path, slot: Slot,
             language: str | None = None, pieces: Pieces | None = None) -> Practiced:
    """Check one file: every step of `STEPS`, the practice tests on `slot` (an
    assembly lesson's on `pieces`, where `on_own_pieces`)."""
    from grader.judge import runner

    def grade(sub: Submission) -> GradeRecord:
        return runner.grade(ctx, sub, slot, select=runner.PRACTICE_TESTS)

    with tempfile.TemporaryDirectory(prefix="grader-check-") as tmp:
        checking = Checking(ctx, file, file.name, Path(tmp) / ctx.lesson.exercise, grade,
                            language, pieces)
        return run_steps(checking, STEPS).practiced()


def watch(ctx: LessonContext, versions: Iterable[Path], shown: str, slot: Slot,
          show: Callable[[Practiced], None], language: str | None = None,
          pieces: Pieces | None = None) -> None:
    """Check each version of the file as it comes (`saves`, or `received` inside a
    bundle's sandbox) with every step of `STEPS`, the practice tests of all in one
    pytest session on one warm slot: a re-check costs the practice tests alone.
    `shown`: the file's name as the student knows it. Ends when the versions do
    (Ctrl-C raises KeyboardInterrupt). An assembly lesson's `pieces` are found and
    checked once, as the watch starts."""
    from grader.judge import runner

    practice = STEPS.index(PRACTICE)
    graded: list[GradeRecord] = []  # the session's record of the version it graded
    with tempfile.TemporaryDirectory(prefix="grader-check-") as tmp:
        current: list[Checking] = []  # the version the session grades now

        def submissions() -> Iterator:
            warming = Warming(ctx)
            try:
                for version in versions:
                    warming.stop()
                    checking = Checking(ctx, version, shown,
                                        Path(tmp) / ctx.lesson.exercise,
                                        lambda sub: graded.pop(), language, pieces)
                    current[:] = [run_steps(checking, STEPS[:practice])]
                    yield checking.results[READ.name]
                    warming.start()  # a check is shown: warm (on) while they edit
            finally:  # Ctrl-C or the last version: what it computed is then kept,
                warming.stop()  # which must not read the caches while it writes them

        def done(record: GradeRecord) -> None:
            graded.append(record)
            show(run_steps(current[0], STEPS[practice:]).practiced())

        runner.grade_many(ctx, submissions(), slot, done, select=runner.PRACTICE_TESTS)


class Warming:
    """A watch's warm-up thread (`_warm`): started once a check is shown, until all is
    computed; stopped, after the request it is on, at the next save and before the
    watch ends. Ctrl-C may come anywhere in `start`: a thread made and not yet started
    is no error (`stop` joined it: "cannot join thread before it is started", a grader
    bug's exit 70 where Ctrl-C's 130 was due), and one that starts after `stop` finds
    itself stopped before it touches anything."""

    def __init__(self, ctx: LessonContext):
        self.ctx = ctx
        self.done = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.done.is_set():
            return
        stopped = threading.Event()
        thread = threading.Thread(target=_warm, args=(self.ctx, stopped.is_set, self.done),
                                  daemon=True)
        self._stopped, self._thread = stopped, thread
        thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopped.set()
        try:
            self._thread.join()
        except RuntimeError:  # made, not started: if it starts, it sees it is stopped
            pass


def _warm(ctx: LessonContext, stop: Callable[[], bool], warm: threading.Event) -> None:
    """Compute now, while the student edits, what a failing part's feedback asks of
    the trusted side (the reference's traces, its smallest examples' and questions'
    results): the first failing save of a part then costs its own code's run alone, not
    the solution's import and traces (5 to 10 s), and `kept.remember` keeps them for the next
    check. It stops at the next save (`stop`), and goes on after that check; `warm` is
    set once all is computed. Where the course has its solution only: a bundle's
    recording holds them."""
    if stop():  # started after the watch stopped it (Ctrl-C during `Warming.start`)
        return
    if ctx.lesson.solution is None:
        warm.set()
        return
    from grader.judge.divergence import fresh_for_recording

    try:
        fresh_for_recording(ctx, stop)
    except Exception:  # noqa: BLE001 - a head start only: a check computes what it needs
        warm.set()  # (and it would fail again)
    if not stop():
        warm.set()


def _stamp(file: Path) -> tuple[int, int, int] | None:
    try:
        st = file.stat()
    except OSError:
        return None  # an editor replacing it: not there for a moment
    return st.st_mtime_ns, st.st_size, st.st_ino


def saves(file: Path, poll: float = POLL_S) -> Iterator[Path]:
    """The file now, then again after each save: its modification time, size or inode
    changed and then held for one poll (an editor's write is over).

    A Ctrl-C is noted as well as raised (`interrupts.noted`): one that Python dropped
    inside a finalizer left a watch polling after Ctrl-C (once in a suite run). The
    poll raises it again."""
    with interrupts.noted() as pressed:
        last = None
        while not pressed():
            stamp = _stamp(file)
            if stamp is not None and stamp != last:
                time.sleep(poll)
                if _stamp(file) != stamp:
                    continue
                last = stamp
                yield file
            else:
                time.sleep(poll)
        raise KeyboardInterrupt


# Inside a bundle's sandbox the file is a bind mount of the inode it had when the
# sandbox started (an editor's save makes a new one): the process outside watches the
# file and sends each version's bytes down a pipe (`send`, `received`).
def send(file: Path, pipe: IO[bytes]) -> None:
    """Each saved version of `file` down `pipe`, as a length line and the bytes."""
    from grader.intake.capped import MAX_FILE, read_capped

    for version in saves(file):
        try:
            data, _ = read_capped(version, MAX_FILE)
        except OSError:
            continue
        pipe.write(b"%d\n" % len(data) + data)
        pipe.flush()


def received(pipe: IO[bytes], dest: Path) -> Iterator[Path]:
    """Each version `send` sent, written to `dest`; ends when the pipe closes."""
    while True:
        line = pipe.readline()
        if not line.strip().isdigit():
            return
        data = pipe.read(int(line))
        dest.write_bytes(data)
        yield dest


def close(slot: Slot) -> None:
    """Close the check's sandbox at once: its zygote's own exit tears torch and
    transformers down object by object (a second, which the student would wait for),
    and nothing in it is worth keeping once the check's results are in. Its process
    group is killed, then the slot closed as usual (its cgroup and scratch removed)."""
    try:
        os.killpg(slot.sandbox.proc.pid, signal.SIGKILL)
    except OSError:
        pass  # already gone
    slot.close()


def finish(status: int) -> None:
    """Exit with `status` as soon as the output is out: what a check leaves (torch's
    modules, the lesson's) need not be torn down one object at a time, which took a
    second. The sandbox is closed and temporary files are gone before this."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)
