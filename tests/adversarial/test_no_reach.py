"""No student reaches another, in any sandbox mode: a submission's code looks for a
classmate's marker (in the classmate's source), id and score, and an email of the
roster written inline in course.yml, in its own memory (gc objects, the frames above
it, /proc/self/mem) and on disk (the class folder and OUT the TA passed, and /tmp),
and reports what it found in its own error message.

The class is graded twice with `grader run`, as a TA would: first the victim and the
spy's innocent first version, then the spy's second version alone (one changed
submission: the grader's process has by then read the course, the class and the
stored results, none of which its zygote may hold).

The spy never builds what it looks for: it holds a common prefix and the rest XORed,
and compares character by character, so whatever it finds came from somewhere else.
Its own marker, in its own source, is the control: the scan must find that one.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

import pytest

from conftest import REPO, SOLUTION, require_sandbox
from modes import NO_USERNS
from tests.conftest import outside_bwrap
from grader.sandbox import bwrap

COURSE_PARTS = ("course.yml", "solutions", "exercises", "hidden_tests", "templates")
PREFIX = "zq" + "REACH"  # what the spy holds of each thing it looks for
KEY = 0x5A

SPY = r'''
import gc as _gc, os as _os, sys as _sys
# {own}: the spy's own marker, which the memory and disk scans must find (the control)
_P = {prefix!r}
_WANT = {want!r}
# its own folder first (the control), then each root with a budget of its own: a large
# /tmp must not use up the walk before the class, OUT or the control are read
_ROOTS = list(dict.fromkeys([_os.getcwd()] + {roots!r}))

def _count(s, enc, p=_P):
    """How often s holds p followed by the decoded suffix (which is never built)."""
    get = (lambda i: s[i]) if isinstance(s, bytes) else (lambda i: ord(s[i]))
    p = p.encode() if isinstance(s, bytes) else p
    n, at = 0, s.find(p)
    while at >= 0:
        j = at + len(p)
        if j + len(enc) <= len(s) and all(get(j + k) ^ {key} == e for k, e in enumerate(enc)):
            n += 1
        at = s.find(p, at + 1)
    return n

def _found(s, enc):
    return _count(s, enc) > 0

# a probe request's header as the trusted side encodes it (a JSON object whose first
# key is "probe"): its first characters, and the rest XORed (never written whole here)
_REQ, _REQ_REST = '{{"pro', {request_rest!r}

def _is_request(obj):
    return isinstance(obj, dict) and "probe" in obj and ("args" in obj or "key" in obj)

def _kinds(text):
    return {{name for name, enc in _WANT.items() if _found(text, enc)}}

def _in_memory():
    seen = set()
    def strings(obj):
        if isinstance(obj, dict):
            yield from (v for kv in obj.items() for v in kv)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            yield from obj
    _gc.unfreeze()  # what the zygote froze (gc.freeze) is tracked again
    objects = _gc.get_objects()
    frame = _sys._getframe()
    while frame is not None:
        objects.append(dict(frame.f_locals))
        frame = frame.f_back
    requests = len({{id(obj) for obj in objects if _is_request(obj)}})
    for obj in objects:
        hits = set()
        for v in strings(obj):
            if isinstance(v, (str, bytes)):
                hits |= _kinds(v)
        if "id" in hits and isinstance(obj, dict) and "score" in obj:
            hits.add("score")
        seen |= hits
    # every writable mapping, read through /proc/self/mem where it opens, else (a child
    # that is not dumpable) with ctypes, as any code may read its own memory
    mem, in_mem, raw = "unreadable", 0, set()
    try:
        with open("/proc/self/maps") as maps:
            spans = [tuple(int(x, 16) for x in line.split()[0].split("-"))
                     for line in maps if line.split()[1].startswith("rw")]
    except OSError:
        spans = []
    try:
        m = open("/proc/self/mem", "rb", 0)
        mem = "read"
        def read(lo, n):
            m.seek(lo)
            return m.read(n)
    except OSError:
        import ctypes as _ct
        m, mem = None, "ctypes" if spans else "unreadable"
        read = _ct.string_at
    for lo, hi in spans:
        while lo < hi:
            try:
                chunk = read(lo, min(hi - lo, 1 << 22))
            except (OSError, OverflowError, ValueError):
                break
            raw |= _kinds(chunk)
            in_mem += _count(chunk, _REQ_REST, _REQ)
            del chunk
            lo += 1 << 22
    if m is not None:
        m.close()
    seen |= raw
    return seen, len(objects), mem + ":" + ",".join(sorted(raw)), requests, in_mem

def _on_disk():
    seen, files = set(), 0
    for root in _ROOTS:
        seen, files = _walk(root, seen, files)
    return seen, files

def _walk(root, seen, files):
    budget = files + 20000
    for top, dirs, names in _os.walk(root, onerror=lambda e: None):
        for name in dirs + names:
            seen |= _kinds(name)
        for name in names:
            files += 1
            if files > budget:
                return seen, files
            try:  # never waiting on a FIFO someone left in /tmp (its open would block)
                fd = _os.open(_os.path.join(top, name), _os.O_RDONLY | _os.O_NONBLOCK)
                with open(fd, "rb") as f:
                    data = f.read(1 << 20)
            except OSError:
                continue
            hits = _kinds(data)
            if "id" in hits and b'"score"' in data:
                hits.add("score")
            seen |= hits
    return seen, files

_mem, _objects, _mem_state, _requests, _requests_mem = _in_memory()
# a FIFO in its own folder, walked first, as any left in /tmp: opened for reading
# without O_NONBLOCK, it would wait for a writer until the test's time ran out
_os.mkfifo("left-open")
_disk, _files = _on_disk()
raise RuntimeError("REACH memory=" + ",".join(sorted(_mem)) + " disk=" + ",".join(sorted(_disk))
                   + f" objects={{_objects}} files={{_files}} mem={{_mem_state}}"
                   + f" forked={{int('click' in _sys.modules)}}"
                   + f" requests={{_requests}} requests_in_memory={{_requests_mem}} END")
'''


def _encode(text: str) -> list[int]:
    return [ord(c) ^ KEY for c in text]


def _spy(roots: list[str], own: str, want: dict[str, str]) -> str:
    code = SPY.format(own=PREFIX + own, prefix=PREFIX, key=KEY, roots=roots,
                      want={name: _encode(rest) for name, rest in want.items()},
                      request_rest=_encode('be": "'))
    return SOLUTION.read_text(encoding="utf-8") + "\n" + code


def _container_reason() -> str | None:
    if os.geteuid() != 0:
        return "container mode needs root (as in a Docker-like container)"
    return None if shutil.which("capsh") else "capsh is missing"


@pytest.fixture
def class_folder():
    """A course copy, a class and OUT under one folder any uid may cross, as a TA's
    folders are (pytest's own temporary folders are root's alone and would hide all)."""
    top = Path(tempfile.mkdtemp(prefix="no-reach-"))
    top.chmod(0o755)
    course = top / "course"
    course.mkdir()
    for name in COURSE_PARTS:
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, course / name)
    # the spy scans at import, which a test's wall limit (5 s) bounds; on a slow or
    # loaded machine its scan must not end as a timeout, with nothing said
    yml = course / "course.yml"
    text = yml.read_text(encoding="utf-8")
    for key, value in (("test_wall_s", 120), ("submission_wall_s", 300), ("cpu_s", 300)):
        text, n = re.subn(rf"^(\s+{key}:) *[0-9.]+", rf"\g<1> {value}", text, flags=re.M)
        assert n == 1, key
    yml.write_text(text + ROSTER.format(prefix=PREFIX, tag=ROSTER_TAG), encoding="utf-8")
    yield top
    shutil.rmtree(top)


# an inline roster, which the grader parses with course.yml before it grades anyone
ROSTER_TAG = secrets.token_hex(4)
ROSTER = """
roster:
  someone:
    name: Ada Roster
    email: {prefix}roster{tag}@example.edu
    sis_user_id: "990001"
"""


def _grade(top: Path, mode: str) -> str:
    cmd = [sys.executable, "-c", "from grader.cli import main; main()", "run", "--lesson",
           "13", "--course", str(top / "course" / "course.yml"), "--submissions",
           str(top / "class"), "--out", str(top / "out"), "--jobs", "1"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "HOME": os.environ.get("HOME", "/")}
    if mode.startswith("container"):  # a Docker-like container: root without CAP_SYS_ADMIN
        env["GRADER_CONTAINER"] = "1"
        if mode == "container-no-userns":  # ... whose profile refuses user namespaces
            cmd = [sys.executable, str(NO_USERNS), *cmd]
        cmd = ["capsh", "--drop=cap_sys_admin", "--", "-c", "exec " + shlex.join(cmd)]
    with (outside_bwrap(shared=True) if mode == "container-no-userns"
          else nullcontext()):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600,
                              cwd=top)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def _record(top: Path, sid: str) -> dict:
    return json.loads((top / "out" / "results" / f"{sid}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("mode", ["own", "container", "container-no-userns"])
def test_a_submission_reaches_no_classmate(class_folder, mode):
    """`own`: the machine's mode for this user (root, or userns when run unprivileged);
    `container`: root without CAP_SYS_ADMIN (bwrap in a user namespace of the
    grader's); `container-no-userns`: no namespace can be made, the container is the
    boundary."""
    if mode.startswith("container") and (reason := _container_reason()):
        pytest.skip(reason)
    if mode == "own":
        require_sandbox()
    top = class_folder
    tag = secrets.token_hex(4)
    # the victim's id and marker both start with the spy's prefix: it looks for the rest
    victim, marker, own = f"{PREFIX}vic{tag}", f"MARK{tag}", f"OWN{tag}"
    sources = {victim: SOLUTION.read_text(encoding="utf-8")
               + f"\n# {PREFIX}{marker}: only this student's file says this\n",
               "spy": SOLUTION.read_text(encoding="utf-8")}
    for sid, text in sources.items():
        (top / "class" / sid).mkdir(parents=True)
        (top / "class" / sid / "13_moe.py").write_text(text, encoding="utf-8")
    first = _grade(top, mode)
    assert _record(top, victim)["score"] == pytest.approx(10.0), first[-2000:]
    roots = [str(top / "class"), str(top / "out"), tempfile.gettempdir(), "/tmp"]
    spy = _spy(roots, own, {"marker": marker, "id": f"vic{tag}", "own": own,
                            "roster": f"roster{ROSTER_TAG}@example.edu"})
    (top / "class" / "spy" / "13_moe.py").write_text(spy, encoding="utf-8")
    second = _grade(top, mode)
    record = _record(top, "spy")
    said = re.search(r"REACH (memory=\S* disk=\S* objects=\d+ files=\d+ mem=\S+ forked=\d "
                     r"requests=\d+ requests_in_memory=\d+) END",
                     record["problem"] or "")
    assert said, (record["status"], record["problem"], second[-3000:])
    print(f"\n{mode} ({record['sandbox']}): {said.group(1)}")
    found = dict(kv.split("=", 1) for kv in said.group(1).split())
    assert record["sandbox"] == ("container" if mode.startswith("container")
                                 else bwrap.probe().mode)
    assert "own" in found["memory"] and "own" in found["disk"], said.group(1)  # scans work
    how, _, raw = found["mem"].partition(":")  # the raw memory's scan works too
    assert how in ("read", "ctypes") and "own" in raw.split(","), said.group(1)
    # sandboxed, the zygote is never a fork of the grader's process: it never held the
    # course (its roster), the class or a result
    assert found["forked"] == "0", said.group(1)
    for what in ("marker", "id", "score", "roster"):
        assert what not in found["memory"] and what not in found["disk"], said.group(1)
    # graded alone, at import no probe request has been sent yet: the child holds none
    # of the graded requests, not even in memory a fork inherited (a class's children
    # hold their inputs from the zygote: docs/design.md)
    assert found["requests"] == "0" and found["requests_in_memory"] == "0", said.group(1)
    # the run still grades and writes everything
    assert record["score"] == 0
    assert _record(top, victim)["score"] == pytest.approx(10.0)
    for path in ("scores.json", "report.html", "feedback"):
        assert (top / "out" / path).exists(), path
