"""Shared fixtures: the course, a warm worker slot (sandboxed where possible), and
what is slow to make: the student bundles and the autograder zip (built once per
version of the project's sources, and kept between runs), and each sample class
graded once per run. Under pytest-xdist (`make test`) the workers of a run share them."""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

from grader import config
from grader.judge.context import LessonContext
from grader.sandbox import bwrap
from grader.sandbox import slot as slots
from grader.sandbox.slot import Slot

ROOT = Path(__file__).resolve().parent.parent
GRADER = [sys.executable, "-m", "grader.cli"]
# Bundles and zips kept between runs, one folder per version of what builds them
CACHE = Path(os.environ.get("GRADER_TEST_CACHE") or Path(
    os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minimind-grader-tests")
KEEP_DAYS = 3  # a cached build unused this long is removed
HANG = 3600  # s: a build or a graded class that takes longer hangs (15 min was met at load 20)


# Student processes under sandbox uids outside any bwrap (container mode without
# namespaces, as on Gradescope where its profile refuses a user namespace) are made by the tests that hold `outside_bwrap(shared=True)`; the one test
# that asserts no such process is left after its run (it cannot tell whose they are)
# holds it alone. A lock, not one worker for them all: the runs overlap, the check not.
OUTSIDE_BWRAP_LOCK = Path(os.environ.get("TMPDIR", "/tmp")) / "minimind-grader-outside-bwrap.lock"


@contextmanager
def outside_bwrap(shared: bool) -> Iterator[None]:
    """Hold the machine's container-mode runs lock: shared to make such processes,
    alone to assert that none is left (waits, however long the others take)."""
    try:  # another user's (the rootless lane's): a sticky /tmp refuses O_CREAT on it
        fd = os.open(OUTSIDE_BWRAP_LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = os.open(OUTSIDE_BWRAP_LOCK, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


# Long files whose module fixture is made per lesson, lazily, and whose tests' ids
# begin with the lesson's key (`test_x[13]`, `test_x[13-alice]`): each lesson's tests
# run on one worker, the lessons on several.
BY_LESSON = ("tests/e2e/test_claims.py", "tests/e2e/test_student_check.py",
             "tests/e2e/test_contract.py")  # (its selftest is run once per lesson and worker)
# Files of long tests that share no module fixture, or only one made once per run for
# every worker (test_cli's sample class): each test is dealt alone, so that one file is
# not one worker's long queue while the others wait.
BY_TEST = ("tests/unit/test_smallest.py", "tests/unit/test_export.py",
           "tests/e2e/test_audit.py", "tests/e2e/test_cli.py",
           "tests/e2e/test_lms_downloads.py", "tests/e2e/test_check_watch.py",
           "tests/e2e/test_lti_upload.py", "tests/adversarial/test_leftovers.py",
           "tests/adversarial/test_no_reach.py", "tests/adversarial/test_syscalls.py")


# A file whose tests are dealt alone but for those whose name starts so (they share a
# module fixture: the Gradescope set-up, which makes and removes a user of the machine)
BY_TEST_BUT = {"tests/e2e/test_gradescope_layout.py": "test_container_mode"}


def xdist_group(nodeid: str) -> str:
    """The tests one pytest-xdist worker runs together: a file's (its module fixtures
    are then made once), a `BY_LESSON` file's per lesson, a `BY_TEST` file's each
    alone, a `BY_TEST_BUT` file's each alone but for those that share its fixture."""
    path, _, name = nodeid.partition("::")
    if path in BY_TEST or (path in BY_TEST_BUT and not name.startswith(BY_TEST_BUT[path])):
        return nodeid
    if path in BY_LESSON and "[" in name:
        return f"{path}[{name.split('[', 1)[1].split('-')[0].rstrip(']')}]"
    return path


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test`'s `--dist loadgroup` deals out `xdist_group`s whole. Its own reading
    of `xdist_group` marks does not work under pytest 9 (pytest-xdist 3.8 renames a
    test by assigning `item._nodeid`, which pytest 9 no longer reads), so every file was
    dealt test by test and its module fixtures made on each worker it reached (the
    grading behind test_escape three times). The groups are read from the ids here."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return ByGroup(config, log)


# What no build reads: the docs, the sample classes, the scripts, the tests, CI. A change
# there keeps the cached builds (a zip is minutes of CPU); any other file counts.
NOT_BUILT_FROM = (b"docs/", b"examples/", b"scripts/", b"tests/", b".ci/", b"README.md",
                  b"Makefile", b".gitignore")


def source_key() -> str | None:
    """A digest of every file of the project a build may read (what git lists, tracked
    or not, but `NOT_BUILT_FROM`), of Python's and torch's versions; None outside git."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"],
                                cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    digest = hashlib.sha256(f"{sys.version}|{metadata.version('torch')}".encode())
    for name in sorted(set(listed.split(b"\0")) - {b""}):
        path = ROOT / os.fsdecode(name)
        if not name.startswith(NOT_BUILT_FROM) and path.is_file():
            digest.update(name + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


def run_folder(tmp_path_factory) -> Path:
    """A folder of this run's, shared by its xdist workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


FAILED: dict[Path, Exception] = {}


def made_once(folder: Path, make: Callable[[Path], object]) -> Path:
    """`folder`, filled by `make(folder)` unless a finished one is there: made by one
    process at a time (a lock), so a run's workers and concurrent runs make it once."""
    done = folder / ".made"
    if folder in FAILED:  # one failed make per process: the rest of its tests fail fast
        raise FAILED[folder]
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{folder}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # an unfinished make's
            folder.mkdir()
            try:
                make(folder)
            except Exception as exc:
                FAILED[folder] = exc
                raise
            done.touch()
    os.utime(done)  # in use: not pruned
    return folder


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory) -> Path:
    """Where built bundles and zips are kept: the user's cache, one folder per source
    key (old ones pruned); this run's own folder outside git."""
    key = source_key()
    if key is None:
        return run_folder(tmp_path_factory) / "builds"
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob("*/.made"):
        if time.time() - old.stat().st_mtime > KEEP_DAYS * 86400:
            shutil.rmtree(old.parent, ignore_errors=True)
    return CACHE / key


@pytest.fixture(scope="session")
def course() -> config.Course:
    return config.load(ROOT / "course.yml")


# Wall and CPU limits far above what a loaded machine makes a submission take (a
# correct call takes ~10 ms): for tests that are not about a limit.
FAR_LIMITS = {"test_wall_s": 120, "submission_wall_s": 1200, "cpu_s": 600}
LESSON_PATHS = ("solution", "recorded", "stub", "tests", "submissions", "moodle_worksheet")


@pytest.fixture(scope="session")
def far_course(tmp_path_factory) -> Path:
    """course.yml with `FAR_LIMITS` for every lesson, its paths made absolute (so it
    may live in a temp folder), each lesson's OUT in that folder."""
    folder = tmp_path_factory.mktemp("far-course")
    data = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
    data.setdefault("defaults", {}).setdefault("limits", {}).update(FAR_LIMITS)
    for key, lesson in data["lessons"].items():
        for name in LESSON_PATHS:
            if lesson.get(name):
                lesson[name] = str(ROOT / lesson[name])
        lesson["out"] = str(folder / "out" / str(key))
        for name in FAR_LIMITS:
            (lesson.get("limits") or {}).pop(name, None)
    if isinstance(data.get("roster"), str):
        data["roster"] = str(ROOT / data["roster"])
    path = folder / "course.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def ctx13(course) -> LessonContext:
    """Lesson 13's context for the whole suite: its references computed once."""
    return LessonContext(course, "13")


# One warm sandbox per lesson's probes and preloads in each test process, closed when
# the process ends: a boot costs 1.5 s (torch) to 3 s (and transformers) of CPU, and
# the end-to-end files opened some fifteen. The sandbox's own guarantees are tested in
# tests/adversarial, on sandboxes of their own.
SANDBOXES: dict[tuple[Path, tuple[str, ...]], slots.Sandbox] = {}


def open_slot(course: config.Course, lesson_key: str) -> Slot:
    """A fresh slot (its own uid; close it) of this process's warm sandbox for the
    lesson (`SANDBOXES`)."""
    lesson = course.lesson(lesson_key)
    key = (course.path(lesson.probes).resolve(), tuple(lesson.preload))
    if key not in SANDBOXES or SANDBOXES[key].proc.poll() is not None:
        SANDBOXES[key] = slots.Sandbox(key[0], bwrap.probe().reason is None, key[1])
    return SANDBOXES[key].slot()


def pytest_sessionfinish(session, exitstatus):
    for sandbox in SANDBOXES.values():
        sandbox.close()
    SANDBOXES.clear()


def grade_sources(ctx: LessonContext, slot: Slot, folders, sources: dict[str, str]) -> dict:
    """Each source graded as one student's 13_moe.py, in the slot: id -> record.
    `folders`: pytest's tmp_path_factory."""
    from grader.judge import runner

    subs = []
    for name, text in sources.items():
        folder = folders.mktemp(name)
        (folder / "13_moe.py").write_text(text)
        subs.append(runner.Submission(name, folder / "13_moe.py"))
    out: dict = {}
    runner.grade_many(ctx, subs, slot, lambda r: out.__setitem__(r.student_id, r))
    return out


@pytest.fixture(scope="session")
def slot13(course):
    slot = open_slot(course, "13")
    yield slot
    slot.close()


@pytest.fixture(scope="session")
def student_bundle(build_cache):
    """`grader student-bundle --lesson KEY`, built once per lesson and source key: a
    build grades the solution and records the practice results (half a minute and
    more each), and three files test the same bundles. A test that changes a bundle
    works on its own copy."""

    def make(key: str, folder: Path) -> None:
        done = subprocess.run([*GRADER, "student-bundle", "--lesson", key, "--out",
                               str(folder / f"lesson{key}")], cwd=ROOT,
                              capture_output=True, text=True, timeout=HANG)
        assert done.returncode == 0, done.stderr

    def get(key: str) -> Path:
        return made_once(build_cache / f"bundle{key}", lambda f: make(key, f)) / f"lesson{key}"

    return get


@pytest.fixture(scope="session")
def autograder_zip13(build_cache) -> Path:
    """Lesson 13's Gradescope autograder zip, built once per source key: a build
    grades the solution and every known mistake, and three files read the same zip
    (none changes it)."""
    from grader.deliver import autograder_zip

    folder = made_once(build_cache / "autograder13",
                       lambda f: autograder_zip.build(ROOT, "13", f))
    return folder / "autograder_13.zip"


@pytest.fixture(scope="session")
def autograder_zip13b(build_cache) -> Path:
    """Lesson 13b's (the stage assembly's) autograder zip, with its earlier lessons'
    solutions, built once per source key as lesson 13's is."""
    from grader.deliver import autograder_zip

    folder = made_once(build_cache / "autograder13b",
                       lambda f: autograder_zip.build(ROOT, "13b", f))
    return folder / "autograder_13b.zip"


@pytest.fixture(scope="session")
def sample_class(tmp_path_factory):
    """`grader run --lesson KEY` on the lesson's sample class (examples/KEY), once per
    run: several files read the same scores and pages (a test that grades again, or
    changes the folder, does it on its own copy). Returns OUT and the run's stderr."""
    shared = run_folder(tmp_path_factory)

    def make(key: str, folder: Path) -> None:
        done = subprocess.run([*GRADER, "run", "--lesson", key, "--submissions",
                               str(ROOT / "examples" / key), "--out", str(folder / "out"),
                               "--jobs", "2"], cwd=ROOT, capture_output=True, text=True,
                              timeout=HANG)
        assert done.returncode == 0, done.stderr[-3000:]
        (folder / "stderr.txt").write_text(done.stderr)

    def get(key: str) -> tuple[Path, str]:
        folder = made_once(shared / f"sample{key}", lambda f: make(key, f))
        return folder / "out", (folder / "stderr.txt").read_text()

    return get


# The kind of test each folder holds, as a marker (pyproject.toml registers them): the
# Makefile's lanes select by marker (`make test-fast`: `-m "fast_lane or not (...)"`).
FOLDER_MARKERS = {"e2e": "e2e", "adversarial": "adversarial", "fuzz": "fuzz"}


def pytest_collection_modifyitems(config, items):
    """Each test of tests/e2e, tests/adversarial and tests/fuzz gets its folder's marker,
    so that no lane has to name a path."""
    for item in items:
        folder = Path(item.path).relative_to(ROOT / "tests").parts[0]
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])


def pytest_addoption(parser):
    parser.addoption("--cpu-log", metavar="FILE",
                     help="append each test's CPU seconds (its process and the children it "
                          "waited for: subprocesses, sandboxes), setup to teardown, as JSON "
                          "lines: what to cut first when the suite is too slow (with its "
                          "process's own share, pid and start, for scripts/suite_cpu.py)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = item.config.getoption("--cpu-log")
    if not path:
        yield
        return
    import json
    import resource

    def used(who: int) -> float:
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    own, waited = used(resource.RUSAGE_SELF), used(resource.RUSAGE_CHILDREN)
    wall, began = time.monotonic(), time.time()
    yield
    own = used(resource.RUSAGE_SELF) - own
    waited = used(resource.RUSAGE_CHILDREN) - waited
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"test": item.nodeid, "cpu_s": round(own + waited, 2),
                            "wall_s": round(time.monotonic() - wall, 2),
                            "own_s": round(own, 2), "pid": os.getpid(),
                            "began": round(began, 2)}) + "\n")
