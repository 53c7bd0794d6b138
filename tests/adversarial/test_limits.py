"""Runaway, crashing and process-level attacks: each costs the part it is in (or the
whole file, at import) with a message naming the cause, the grader stays up, nothing
the submission started survives it, and an honest submission graded afterwards on
the same warm slot still gets full marks.

All submissions are graded in one pytest session on one slot (`records`), in order,
so any leftover from one attack would also show up in the submissions after it.

A limit test asserts which limit fired, and nothing here is timed: with other jobs on
the cores, a run's wall time (the trusted side's work included) is many times what it
is alone. The memory hog runs in a course of its own whose wall limits are far above
what filling a gigabyte takes on a loaded machine (`memory_records`), so the per-test
wall time cannot fire before the memory limit.
"""
from __future__ import annotations

import re

import pytest

from conftest import (FULL, ONE_PROCESS, PARTS, SOLUTION, alone, assert_honest_still_full,
                      course_copy,
                      error_kinds, failed_messages, grade_alone, grade_all, hostile, lost,
                      require_sandbox, wait_no_processes)

FIND_SOCKET = '''
import os, socket, stat
def _data_socket():
    """The channel to the trusted side: the only socket the child holds."""
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return socket.socket(fileno=fd)
        except OSError:
            pass
def _nonce():
    """The request's nonce, which the harness holds (a reply must echo it)."""
    import sys
    f = sys._getframe()
    while f.f_code.co_name != "_serve_submission":
        f = f.f_back
    return f.f_locals["nonce"]
'''

SOURCES = {
    "honest-before": SOLUTION.read_text(),
    "loop-import": hostile(at_import="while True:\n    pass"),
    # says each time it starts hanging: the hang is run once (output, not a clock)
    "loop-dispatch": hostile(dispatch="print('HANG', flush=True)\nwhile True:\n    pass"),
    "sleep-route": hostile(route="import time\ntime.sleep(3600)"),
    "segfault": hostile(dispatch="import ctypes\nctypes.string_at(0)"),
    "os-exit": hostile(dispatch="import os\nos._exit(3)"),
    "sys-exit": hostile(dispatch="import sys\nsys.exit(4)"),
    # Everything that could reach the zygote or bwrap's init, from the student uid.
    # (killpg may report success for a group it could not signal: what counts is
    # that the zygote and the init are still there.) If one died the part fails.
    "kill-parent": hostile(dispatch='''
        import os, signal, time
        ppid = os.getppid()
        for fn in [lambda: os.kill(ppid, signal.SIGKILL),
                   lambda: os.kill(1, signal.SIGKILL),
                   lambda: os.killpg(os.getpgid(ppid), signal.SIGKILL),
                   lambda: os.killpg(1, signal.SIGKILL)]:
            try:
                fn()
            except OSError:
                pass
        time.sleep(0.2)

        def exists(p):  # its /proc hides them (hidepid=2): ask the kernel by a signal 0
            try:
                os.kill(p, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
            return True

        alive = [p for p in (1, ppid) if exists(p)]
        if os.getppid() != ppid or alive != [1, ppid]:
            raise RuntimeError(f"ATTACK WORKED: alive {alive}")
    '''),
    # kill(-1) from the student uid: reaches only the student's own processes.
    # (Its slot's namespace holds only its own processes and the slot's server, pid 1,
    # which kill(-1) skips: with no process of its own, the kernel answers ESRCH.)
    "kill-minus-one": hostile(dispatch='''
        import os, signal, subprocess
        mine = subprocess.Popen(["sleep", "30"])
        os.kill(-1, signal.SIGKILL)
        if mine.wait() != -signal.SIGKILL:
            raise RuntimeError("kill(-1) did not reach the student's own process")
    '''),
    # killpg(0): the child leads its own process group, so this kills only itself.
    "killpg-self": hostile(dispatch="import os, signal\nos.killpg(0, signal.SIGKILL)"),
    # A user namespace would give the student capabilities of its own (and the kernel
    # surface behind them): seccomp refuses it, while threads and child processes
    # (clone3 answered ENOSYS, so libc uses clone) still work.
    "userns": hostile(dispatch='''
        import ctypes, subprocess, threading
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x10000000) == 0:
            raise RuntimeError("ATTACK WORKED: a user namespace")
        if ctypes.get_errno() != 1:
            raise RuntimeError(f"unshare failed with errno {ctypes.get_errno()}, not EPERM")
        box = []
        worker = threading.Thread(target=box.append, args=(1,))
        worker.start()
        worker.join()
        code = subprocess.run(["/usr/bin/true"]).returncode
        if box != [1] or code != 0:
            raise RuntimeError(f"threads or processes broke: {box} {code}")
    '''),
    # A daemon: double fork + setsid, ignoring every catchable signal, then a correct
    # result. It must not outlive the submission.
    "daemon": hostile(at_import='''
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                    signal.signal(s, signal.SIG_IGN)
                while True:
                    time.sleep(0.2)
            os._exit(0)
    '''),
    # A fork bomb: every child forks forever. RLIMIT_NPROC caps it; the part reports
    # how many forks it got and fails, the others are graded normally.
    "fork-storm": hostile(dispatch='''
        import os, time
        n, err = 0, None
        for _ in range(300):
            try:
                pid = os.fork()
            except OSError as e:
                err = e
                break
            if pid == 0:
                while True:
                    try:
                        os.fork()
                    except OSError:
                        time.sleep(0.05)
            n += 1
        raise RuntimeError(f"fork storm: {n} forks, then {type(err).__name__}")
    '''),
    # 32 MiB to stdout and stderr, at import and in a part; results stay correct.
    "stdout-flood": hostile(
        at_import="print('FLOOD-START'); print('y' * (8 * 2 ** 20))",
        dispatch="import sys, os\nsys.stdout.write('x' * (8 * 2 ** 20))\n"
                 "os.write(2, b'z' * (8 * 2 ** 20))"),
    # Protocol attacks on the trusted reader through the child's own channel.
    "drip-reply": hostile(at_import=FIND_SOCKET, dispatch='''
        import struct, time
        s = _data_socket()
        s.sendall(struct.pack(">QQ", 1000, _nonce()))
        while True:
            s.sendall(b"x")
            time.sleep(0.5)
    '''),
    "huge-frame": hostile(at_import=FIND_SOCKET, dispatch='''
        import struct
        _data_socket().sendall(struct.pack(">QQ", 2 ** 40, _nonce()) + b"{}" * 100)
    '''),
    "garbage-frame": hostile(at_import=FIND_SOCKET, dispatch='''
        import struct
        junk = b"\\xff" * 64
        _data_socket().sendall(struct.pack(">QQ", len(junk), _nonce()) + junk)
    '''),
    "honest-after": SOLUTION.read_text(),
}

# Memory: a single huge allocation, a torch allocation, and gradual growth (graded in
# `memory_records`, test_class.py grades it in a class).
MEMORY_HOG = hostile(
    dispatch="_hog = bytearray(3 * 1024 ** 3)",
    route="import torch as _t\n_hog = _t.ones(2 ** 31, dtype=_t.float64)",
    load_balancing_loss="_hog = []\nwhile True:\n    _hog.append(b'x' * 2 ** 20)")
# The course's memory limit with wall limits far above what the hog takes under load.
FAR_WALLS = {"test_wall_s": 120, "submission_wall_s": 1200}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course's own limits (the ones under test), for this file's `slot` too."""
    return course_copy(tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="module")
def records(course, slot, tmp_path_factory, guarded_before):
    return grade_all(course, slot, tmp_path_factory.mktemp("limits"), SOURCES)


@pytest.fixture(scope="module")
def memory_records(tmp_path_factory):
    require_sandbox()
    course = course_copy(tmp_path_factory.mktemp("memory-course"), FAR_WALLS)
    return grade_alone(course, tmp_path_factory.mktemp("memory"), {"memory-hog": MEMORY_HOG})


def only_lost(record: dict, **parts: float) -> None:
    assert lost(record) == parts, (lost(record), failed_messages(record)[:3])
    assert record["score"] == pytest.approx(FULL - sum(parts.values()))


def test_honest_before_and_after(records):
    for sid in ("honest-before", "honest-after"):
        assert records[sid]["score"] == FULL and records[sid]["status"] == "graded"
        assert records[sid]["sandboxed"] is True


def test_infinite_loop_at_import(records):
    rec = records["loop-import"]
    assert rec["score"] == 0 and rec["status"] == "timeout"
    assert rec["problem"] == "timed out after 5 s while importing your file"
    assert all(t["outcome"] == "failed" for t in rec["tests"])


def test_infinite_loop_in_one_part(records):
    rec = records["loop-dispatch"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    msgs = failed_messages(rec, "dispatch")
    assert re.fullmatch(r"timed out after 5 s in dispatch \(test_\w+\[[^]]+\]\)", msgs[0])
    # the other calls of the same probe are not run again: the hang costs 5 s once
    assert all(m.startswith("not run: the same code timed out after 5 s in dispatch")
               for m in msgs[1:])
    assert rec["status"] == "timeout"
    assert rec["output"].count("HANG") == 1, rec["output"][-500:]


def test_sleep(records):
    rec = records["sleep-route"]
    only_lost(rec, router=PARTS["router"])
    assert failed_messages(rec, "router")[0].startswith("timed out after 5 s in router (")
    assert error_kinds(rec, "router") == {"timeout"}


def test_segfault(records):
    rec = records["segfault"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    for msg in failed_messages(rec, "dispatch"):
        assert msg.startswith("your code crashed with a segmentation fault (SIGSEGV) "
                              "in dispatch (")
    assert error_kinds(rec, "dispatch") == {"crash"}


def test_os_exit(records):
    rec = records["os-exit"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    assert failed_messages(rec, "dispatch")[0].startswith(
        "your code ended the process (exit status 3) in dispatch (")


def test_sys_exit(records):
    rec = records["sys-exit"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    assert set(failed_messages(rec, "dispatch")) == {"your code called sys.exit(4)"}
    assert error_kinds(rec, "dispatch") == {"exit"}


def test_killing_the_parent_fails(records, slot):
    # every kill of the zygote, bwrap's init or their groups was refused: full marks
    rec = records["kill-parent"]
    assert rec["score"] == FULL, failed_messages(rec)[:2]
    assert slot.alive()


def refused_processes(rec: dict, part: str = "dispatch") -> None:
    """Without a memory cgroup, starting a second process cost `part`, with the
    grader's reason in the message."""
    only_lost(rec, **{part: PARTS[part]})
    assert all(ONE_PROCESS in m for m in failed_messages(rec, part)), failed_messages(rec)[:2]


def test_no_user_namespaces_but_threads_and_processes_work(records, slot):
    rec = records["userns"]
    if alone(slot):  # the namespace is refused first (EPERM), then the process
        refused_processes(rec)
    else:
        assert rec["score"] == FULL, failed_messages(rec)[:2]
    assert slot.alive()


def test_kill_minus_one_reaches_only_the_student(records, slot):
    rec = records["kill-minus-one"]
    if alone(slot):  # no process of its own to start, and none of another's to reach
        refused_processes(rec)
    else:
        assert rec["score"] == FULL, failed_messages(rec)[:2]
    assert slot.alive()


def test_killing_own_process_group(records, slot):
    rec = records["killpg-self"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    msg = failed_messages(rec, "dispatch")[0]
    assert msg.startswith("your code was killed") and "in dispatch (" in msg
    assert slot.alive()


def test_daemon_does_not_survive(records, slot):
    rec = records["daemon"]
    if alone(slot):  # its fork at import was refused: nothing of it could be graded
        assert (rec["status"], rec["score"]) == ("import_error", 0), rec["problem"]
        assert ONE_PROCESS in rec["problem"], rec["problem"]
    else:
        assert rec["score"] == FULL, failed_messages(rec)[:2]
    # graded before several other submissions on this slot: by now nothing of it is
    # left in the slot, and no process of a slot uid is outside a sandbox
    assert wait_no_processes(slot) == []
    assert wait_no_processes(uids=[slot.uid]) == []


def test_fork_storm_is_capped(records, course, slot):
    rec = records["fork-storm"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    msg = failed_messages(rec, "dispatch")[0]
    m = re.search(r"fork storm: (\d+) forks, then (\w+)", msg)
    assert m, msg
    if alone(slot):  # the first fork is refused
        assert (m.group(1), m.group(2)) == ("0", "PermissionError"), msg
    else:
        assert int(m.group(1)) < course.limits("13").processes
        assert m.group(2) == "BlockingIOError"  # EAGAIN from RLIMIT_NPROC
    assert wait_no_processes(slot) == []


def test_memory_hog(memory_records):
    rec = memory_records["memory-hog"]
    only_lost(rec, dispatch=PARTS["dispatch"], router=PARTS["router"],
              aux_loss=PARTS["aux_loss"])
    for part, kind in (("dispatch", "MemoryError"), ("router", "RuntimeError"),
                       ("aux_loss", "MemoryError")):
        msg = failed_messages(rec, part)[0]
        assert msg.startswith(f"exceeded the 1024 MiB memory limit ({kind}"), msg
        assert error_kinds(rec, part) == {"memory"}


def test_stdout_flood_is_capped(records, course):
    rec = records["stdout-flood"]
    assert rec["score"] == FULL, failed_messages(rec)[:2]
    out = rec["output"]
    cap = course.limits("13").output_kb * 1024
    assert out.startswith("FLOOD-START")
    body, _, note = out.rpartition("\n[… ")
    assert len(body.encode()) <= cap
    assert re.fullmatch(r"\d+ more bytes of output were cut]", note)
    assert int(note.split()[0]) > 20 * 2 ** 20  # the rest was drained and dropped
    # (full marks: no write was left blocked until its call timed out)


def test_dripping_reply_times_out(records):
    # one byte every half second used to keep the reader waiting forever
    rec = records["drip-reply"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    assert failed_messages(rec, "dispatch")[0].startswith("timed out after 5 s in dispatch (")


def test_oversized_and_garbage_frames(records):
    rec = records["huge-frame"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    assert "a result may be at most" in failed_messages(rec, "dispatch")[0]
    assert error_kinds(rec, "dispatch") == {"protocol"}
    rec = records["garbage-frame"]
    only_lost(rec, dispatch=PARTS["dispatch"])
    assert failed_messages(rec, "dispatch")[0].startswith("malformed result")


def test_grader_unharmed(records, slot, course, tmp_path, guarded_before):
    from conftest import GUARDED, digests, no_marker
    assert slot.alive()
    assert wait_no_processes(slot) == [] and wait_no_processes(uids=[slot.uid]) == []
    assert digests(GUARDED) == guarded_before
    assert no_marker() == []
    assert_honest_still_full(course, slot, tmp_path)
