"""Shared pieces of the adversarial suite: hostile submissions built from the solution,
one warm sandbox slot per module, and checks that nothing outside the sandbox changed.

A hostile submission is the reference solution with code injected at import time or
at the top of one graded function. Code injected into a function runs only when a
probe calls it (`_from_probe()`), not when MOEFeedForward calls it, so an attack on
`dispatch` can cost the "dispatch" part and nothing else.
"""
from __future__ import annotations

import hashlib
import subprocess
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from grader import config
from grader.judge import runner
from grader.judge.context import LessonContext
from grader.sandbox import bwrap
from grader.sandbox import slot as slots
from grader.sandbox.slot import BASE_UID, UID_COUNT, Slot

REPO = Path(__file__).resolve().parents[2]
COURSE_YML = REPO / "course.yml"
SOLUTION = REPO / "solutions" / "13_moe.py"
HIDDEN = REPO / "hidden_tests" / "13_moe"
LESSON = "13"
FULL = 10.0
PARTS = {"ffn": 2.0, "router": 2.0, "dispatch": 2.5, "aux_loss": 1.5, "moe": 2.0}

# Files a submission must never be able to change (digests before and after). Files
# others may edit while the suite runs (course.yml, the grader) are only checked for
# the attacks' "pwned" marker, by `no_marker`.
GUARDED = [SOLUTION, *sorted(HIDDEN.glob("*.py")), HIDDEN / "mistakes.yml"]
MARKED = [COURSE_YML, REPO / "grader" / "runner.py",
          *(REPO / "grader" / "inside" / f"{name}.py" for name in ("zygote", "confine",
                                                                   "harness"))]


def no_marker(paths=MARKED, marker: bytes = b"pwned") -> list[str]:
    """Paths that contain the attacks' marker (should be none)."""
    return [str(p) for p in paths if p.exists() and marker in p.read_bytes()]

# Header every hostile submission gets: a way to tell a probe call from an internal one.
PRELUDE = '''
import sys as _sys
def _from_probe():
    """True when the part's own probe is the caller (not MOEFeedForward, not the
    "moe" probe composing the parts)."""
    f = _sys._getframe(2)
    return (f.f_globals.get("__name__") == "probes"
            and f.f_code.co_name in ("dispatch", "route", "aux_loss"))
'''

DOCSTRINGS = {
    "route": '    """Part "router": (scores [N, E], topk_weight [N, K], topk_idx [N, K] int64)."""\n',
    "dispatch": '    """Part "dispatch": y_flat [N, H], each token\'s weighted sum over its K experts."""\n',
    "load_balancing_loss": '    """Part "aux_loss": a 0-dim tensor, E * coef * sum(load * scores.mean(0))."""\n',
}


def sandbox_reason() -> str | None:
    return bwrap.probe().reason


def require_sandbox() -> None:
    reason = sandbox_reason()
    if reason:
        pytest.skip(f"sandbox not available: {reason}")


def hostile(at_import: str = "", **in_function: str) -> str:
    """The solution with `at_import` run at import and, for each `func=code`, `code` run
    at the top of that function whenever a probe calls it."""
    src = SOLUTION.read_text(encoding="utf-8")
    head, sep, rest = src.partition("\nimport torch\n")
    assert sep, "the solution's imports changed"
    src = head + PRELUDE + sep + rest
    for func, code in in_function.items():
        doc = DOCSTRINGS[func]
        assert src.count(doc) == 1, func
        body = textwrap.indent("if _from_probe():\n" + textwrap.indent(
            textwrap.dedent(code).strip() + "\n", "    "), "    ")
        src = src.replace(doc, doc + body)
    if at_import:
        src += "\n\n" + textwrap.dedent(at_import).strip() + "\n"
    return src



def fork_and_hold(helper_mb: int, own_mb: int, then: str) -> str:
    """The fork-and-hold attack, the code of a function `hostile` is given: three helper
    processes hold `helper_mb` MiB each, then the child itself `own_mb` MiB more, and
    runs `then` (one line; `len(got) * (helper_mb << 20) + len(mine)` is what they hold).
    The child takes its share only once every helper holds its own: a pipe tells it,
    not a sleep that a busy machine can outlast."""
    return f'''
import os, time
ready, told = os.pipe()
for _ in range(3):
    if os.fork() == 0:
        try:
            held = bytearray(b"x") * ({helper_mb} << 20)
            os.write(told, b"+")
            time.sleep(120)
        finally:
            os._exit(0)
os.close(told)
got = b""
while len(got) < 3 and (more := os.read(ready, 3)):
    got += more
mine = bytearray(b"x") * ({own_mb} << 20)
{then}
'''

def write_subs(root: Path, sources: dict[str, str]) -> list[runner.Submission]:
    subs = []
    for sid, source in sources.items():
        path = root / sid / "13_moe.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        subs.append(runner.Submission(sid, path))
    return subs


# One lesson context per course file, for the whole suite: the reference's results are
# computed once, as in one grading run (the suite's own state, not the grader's)
CONTEXTS: dict[Path, LessonContext] = {}


def context(course: config.Course) -> LessonContext:
    return CONTEXTS.setdefault(course.root / "course.yml", LessonContext(course, LESSON))


def grade_all(course, slot: Slot, root: Path, sources: dict[str, str]) -> dict[str, dict]:
    """Grade many submissions in one pytest session on one slot: {student_id: record},
    each in the form results/<id>.json stores (what pages and exports are made from)."""
    out: dict[str, dict] = {}
    runner.grade_many(context(course), write_subs(root, sources), slot,
                      lambda r: out.__setitem__(r.student_id, r.to_json()))
    return out


def digests(paths: Iterable[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _process_table() -> dict[int, tuple[int, int, str]]:
    done = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,uid=,comm="],
                          capture_output=True, text=True)
    table = {}
    for line in done.stdout.splitlines():
        pid, ppid, uid, comm = (line.split(None, 3) + [""])[:4]
        table[int(pid)] = (int(ppid), _inner_uid(int(pid), int(uid)), comm.strip())
    return table


def _inner_uid(pid: int, uid: int) -> int:
    """A process's uid as its sandbox gave it: rootless, a student's process runs as
    the user's own uid, mapped to a slot uid inside a user namespace of its own."""
    try:
        with open(f"/proc/{pid}/uid_map") as f:
            inner = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return uid
    return inner if BASE_UID <= inner < BASE_UID + UID_COUNT else uid


def _ancestors(pid: int, table) -> list[int]:
    chain: list[int] = []
    while pid in table and pid > 1:
        pid = table[pid][0]
        if pid in chain:  # a cycle: a pid reused between two reads of the table
            break
        chain.append(pid)
    return chain


def slot_processes(slot: Slot) -> list[str]:
    """Student processes (zombies included) still inside this slot's sandbox. Other
    sessions may grade on the same machine with the same slot uids, so only this
    slot's own process tree counts."""
    table = _process_table()
    return [f"{pid} {comm}" for pid, (_, u, comm) in table.items()
            if u >= BASE_UID and slot.sandbox.proc.pid in _ancestors(pid, table)]


def escaped_processes(uids: Iterable[int] | None = None) -> list[str]:
    """Processes of a slot uid (of `uids`, or of any) that are not inside some sandbox
    (no bwrap above them): a daemon that got out of its pid namespace would show here.
    Another run on the machine in container mode runs its students outside bwrap under
    uids it holds: a test that knows its slots' uids names them."""
    table = _process_table()
    wanted = set(uids) if uids is not None else range(BASE_UID, BASE_UID + UID_COUNT)
    return [f"{pid} {comm}" for pid, (_, u, comm) in table.items()
            if u in wanted and not any(
                table.get(a, (0, 0, ""))[2] == "bwrap" for a in _ancestors(pid, table))]


def wait_no_processes(slot: Slot | None = None, timeout: float = 10.0,
                      uids: Iterable[int] | None = None) -> list[str]:
    """[] once no student process is left in `slot` (or, without one, none of `uids`
    outside a sandbox). Polls, so a loaded machine's slower reaping is waited for."""
    deadline = time.monotonic() + timeout
    check = ((lambda: slot_processes(slot)) if slot is not None
             else lambda: escaped_processes(uids))
    while (left := check()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# What a child that may start no second process is told (confine.ONE_PROCESS)
ONE_PROCESS = "the grader runs a submission as one process on this machine"


def alone(slot: Slot) -> bool:
    """No memory cgroup caps this slot's children together, so each may start threads
    but no second process (an ordinary user's machine, as a rule)."""
    return slot.sandbox.cgroup_path is None


def lost(record: dict) -> dict[str, float]:
    """Points lost per part (only parts that lost something)."""
    return {name: round(PARTS[name] - p["score"], 4)
            for name, p in record["parts"].items() if p["score"] != PARTS[name]}


def failed_messages(record: dict, part: str | None = None) -> list[str]:
    return [t["message"] for t in record["tests"]
            if t["outcome"] != "passed" and (part is None or t["part"] == part)]


def error_kinds(record: dict, part: str) -> set[str]:
    return {(t["error"] or {}).get("kind") for t in record["tests"]
            if t["outcome"] != "passed" and t["part"] == part}


def course_copy(tmp_path: Path, limits: dict | None = None) -> config.Course:
    """course.yml with lesson 13 only, pointing at the real solution and hidden tests
    by absolute path, optionally with limits of its own; written to `tmp_path`."""
    data = yaml.safe_load(COURSE_YML.read_text(encoding="utf-8"))
    lesson = data["lessons"]["13"]
    data["lessons"] = {"13": lesson}  # only this lesson: others may name relative paths
    for key in ("solution", "stub", "tests"):
        lesson[key] = str(REPO / lesson[key])
    lesson.pop("submissions", None)
    lesson.pop("out", None)
    if isinstance(data.get("roster"), str):
        data["roster"] = str(REPO / data["roster"])
    if limits:
        lesson["limits"] = limits
    path = tmp_path / "course.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return config.load(path)


# Wall and CPU limits far above what a loaded machine makes any submission here take
# (a correct one takes ~10 ms a call): a test that is not about a limit never meets one.
# A test about a limit grades under limits of its own (the course's, or smaller).
FAR_LIMITS = {"test_wall_s": 120, "submission_wall_s": 1200, "cpu_s": 600}


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """The course's lesson 13 with wall and CPU limits far above load's reach
    (`FAR_LIMITS`), its other limits as they are (a copy: other lessons in course.yml
    may be mid-edit while this suite runs)."""
    return course_copy(tmp_path_factory.mktemp("course"), FAR_LIMITS)


@pytest.fixture(scope="session")
def guarded_before():
    return digests(GUARDED)


def open_slot(course) -> Slot:
    lesson = course.lesson(LESSON)
    return slots.open_slot(course.path(lesson.probes), sandboxed=True, preload=tuple(lesson.preload))


def grade_alone(course, root: Path, sources: dict[str, str]) -> dict[str, dict]:
    """Grade `sources` on a slot of their own, for a course copy with limits of its own
    (a limit test's), then check that none of their processes outlived the slot."""
    slot = open_slot(course)
    try:
        records = grade_all(course, slot, root, sources)
    finally:
        slot.close()
    assert wait_no_processes(uids=[slot.uid]) == [], "a student process got out of its sandbox"
    return records


@pytest.fixture(scope="module")
def slot(course):
    require_sandbox()
    s = open_slot(course)
    yield s
    s.close()
    assert wait_no_processes(uids=[s.uid]) == [], "a student process got out of its sandbox"


@pytest.fixture(scope="module")
def held_slot(course):
    """A slot of a sandbox that holds the graded requests, as a class's run has it
    (pool: the solution graded first, then `Sandbox.hold`): a child is asked for a
    request by its index."""
    require_sandbox()

    lesson = course.lesson(LESSON)
    sandbox = slots.Sandbox(course.path(lesson.probes), True, tuple(lesson.preload))
    try:
        sandbox.hold(runner.grade_solution(context(course)))
    except BaseException:
        sandbox.close()
        raise
    s = sandbox.sole_slot()
    yield s
    s.close()
    assert wait_no_processes(uids=[s.uid]) == [], "a student process got out of its sandbox"


def assert_honest_still_full(course, slot: Slot, root: Path) -> None:
    """The slot still grades the reference solution at full marks."""
    rec = grade_all(course, slot, root / "after", {"honest-after": SOLUTION.read_text()})
    rec = rec["honest-after"]
    assert (rec["score"], rec["status"], rec["sandboxed"]) == (FULL, "graded", True), \
        failed_messages(rec)[:3]
