"""Memory a submission holds where RLIMIT_AS does not see it, or across processes, is
capped in every mode, a memory cgroup or none (an ordinary user's machine has none).

Each attack tries to hold more than a 256 MiB `memory_mb` allows (2 GiB where it
can): in four processes, each under the cap, that hold 500 MiB together (a memory
cgroup caps their sum; without one, a child may start no process), in pipes' buffers
raised with F_SETPIPE_SZ, in Unix sockets' buffers raised with SO_SNDBUF, in a file of
the machine's shared memory folder (/dev/shm), and in its own scratch folder (a tmpfs:
its pages are not address space either). Each reports how much it held, then fails
its part: the student loses it, the machine keeps its memory, and the next student is
graded in full. (memfd_create: test_syscalls.py.)
"""
from __future__ import annotations

import re

import pytest

import modes
from conftest import FULL, PARTS, SOLUTION, failed_messages, fork_and_hold, hostile, lost

MEMORY_MB = 256
LIMITS = {"memory_mb": MEMORY_MB, "test_wall_s": 120, "submission_wall_s": 1200}
GOAL_MB = 2048
# Kernel buffers a child may still fill, far below the goal: pipes and sockets at the
# machine's default sizes, in the 256 descriptors it may hold (RLIMIT_NOFILE)
HELD_BOUND_MB = MEMORY_MB

REPORT = f'''
def _report(held, why):
    mib = held >> 20
    if mib >= {GOAL_MB}:
        raise RuntimeError(f"ATTACK WORKED: HELD {{mib}} MiB")
    raise RuntimeError(f"HELD {{mib}} MiB, then {{why}}")
'''

ATTACKS = {
    # three helpers of 100 MiB, then the child's own 200 MiB: each under the cap, 500
    # MiB together (the child last, once every helper holds its share: a pipe tells it)
    "forks": fork_and_hold(100, 200, '_report(len(got) * (100 << 20) + len(mine), '
                                      '"four processes hold it together")'),
    "pipes": '''
        import fcntl, os
        held, why, keep = 0, "", []
        chunk = b"x" * 65536
        try:
            while held < (2048 << 20):
                r, w = os.pipe()
                keep.append((r, w))
                try:
                    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
                except OSError as e:
                    why = f"F_SETPIPE_SZ: {e}"
                os.set_blocking(w, False)
                try:
                    while True:
                        held += os.write(w, chunk)
                except BlockingIOError:
                    pass
        except OSError as e:
            why += f"; {e}"
        _report(held, why)
    ''',
    "sockets": '''
        import socket
        held, why, keep = 0, "", []
        chunk = b"x" * 65536
        try:
            while held < (2048 << 20):
                a, b = socket.socketpair()
                keep.append((a, b))
                for end in (a, b):
                    try:
                        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
                    except OSError as e:
                        why = f"SO_SNDBUF: {e}"
                    end.setblocking(False)
                    try:
                        while True:
                            held += end.send(chunk)
                    except BlockingIOError:
                        pass
        except OSError as e:
            why += f"; {e}"
        _report(held, why)
    ''',
    "shm": '''
        import os
        held, why = 0, ""
        chunk = b"x" * (1 << 20)
        try:
            with open("/dev/shm/mmg-hold", "wb", buffering=0) as f:
                while held < (2048 << 20):
                    held += f.write(chunk)
        except OSError as e:
            why = str(e)
        _report(held, why)
    ''',
    "scratch": '''
        import os
        held, why = 0, ""
        chunk = b"x" * (1 << 20)
        try:
            with open("mmg-hold", "wb", buffering=0) as f:
                while held < (2048 << 20):
                    held += f.write(chunk)
        except OSError as e:
            why = str(e)
        _report(held, why)
    ''',
}
SOURCES = {f"a-{name}": hostile(at_import=REPORT, dispatch=code)
           for name, code in ATTACKS.items()}
CASES = [("userns", None), ("userns", "0"), ("own", None), ("own", "0"), ("container", None)]


def _held_mb(messages: list[str]) -> int:
    found = {int(m) for text in messages for m in re.findall(r"HELD (\d+) MiB", text)}
    return max(found, default=0)


@pytest.mark.parametrize(("mode", "abi"), CASES)
def test_memory_outside_the_cap_is_refused(mode, abi):
    records, said = modes.grade_once(mode, abi, {**SOURCES, "z-honest": SOLUTION.read_text()},
                                     LIMITS)
    alone = "no writable memory cgroup" in said
    for sid in SOURCES:
        print(f"\n{mode}/{abi} {sid}: {failed_messages(records[sid], 'dispatch')[:1]}")
    for sid in SOURCES:
        record = records[sid]
        messages = failed_messages(record, "dispatch")
        assert lost(record) == {"dispatch": PARTS["dispatch"]}, (sid, messages[:2], said)
        assert not any("ATTACK WORKED" in m for m in messages), (sid, messages[:2])
        assert _held_mb(messages) < HELD_BOUND_MB, (sid, messages[:2])
    forks = failed_messages(records["a-forks"], "dispatch")
    expected = ("one process on this machine" if alone else
                f"processes together exceeded the {MEMORY_MB} MiB memory limit")
    assert all(expected in m for m in forks), (forks[:2], said)
    assert records["z-honest"]["score"] == FULL, records["z-honest"]["problem"]
