"""The child's syscall allowlist (grader/inside/syscalls.py), the same in every mode.

What it refuses is listed here from the table itself, and checked against the kernel's
own numbering where this machine has the headers. Each filter is run on an emulator
for both machines (x86_64, aarch64): every allowed call passes, every other is refused
as the table says. Then a submission calls a sample of the refused list, and a few
allowed calls as a control, from its own child, in each mode this machine can run:
`own` (root, or userns when the suite runs as another user: tests/adversarial/
rootless.py), `userns` (a user this test creates runs the grader), and `container`
(root without CAP_SYS_ADMIN, as in Docker and on Gradescope). The same submission tries
the issue's attack: a TCP socket made by io_uring (IORING_OP_SOCKET, which no socket()
filter sees) connected to a listener on 127.0.0.1 that this test starts.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

import modes
from conftest import SOLUTION, require_sandbox
from grader.inside import syscalls

MACHINE = os.uname().machine
ENOSYS_EXPECTED = {"clone3", "x32", "i386", "newer"}

# What the issue names as refused (by name: the table must hold each, refused)
MUST_REFUSE = (
    "io_uring_setup io_uring_enter io_uring_register keyctl add_key request_key bpf "
    "ptrace process_vm_readv process_vm_writev userfaultfd perf_event_open mount umount2 "
    "pivot_root move_mount open_tree fsopen fsmount unshare setns init_module "
    "finit_module delete_module kexec_load kexec_file_load shmget semget msgget mq_open "
    "memfd_create memfd_secret inotify_init inotify_init1 inotify_add_watch fanotify_init "
    "fanotify_mark flock"
).split()

# The calls the submission makes: name -> the arguments (ints; "buf" a scratch buffer,
# "str" a short string). Harmless had they passed: each created object is removed.
SAMPLE = {
    "io_uring_setup": ("io_uring_setup", 4, "buf"), "keyctl": ("keyctl", 0, -3, 0),
    "add_key": ("add_key", "str", "str", 0, 0, -3),
    "request_key": ("request_key", "str", "str", 0, 0), "bpf": ("bpf", 5, 0, 0),
    "ptrace": ("ptrace", 16, 1), "process_vm_readv": ("process_vm_readv", "pid", 0, 0, 0, 0, 0),
    "userfaultfd": ("userfaultfd", 0o2000001), "perf_event_open": ("perf_event_open", 0, 0, -1, -1, 0),
    "mount": ("mount", 0, "str", 0, 0, 0), "umount2": ("umount2", "str", 0),
    "pivot_root": ("pivot_root", "str", "str"), "open_tree": ("open_tree", -100, "str", 0),
    "fsopen": ("fsopen", "str", 0), "unshare": ("unshare", 0x10000000),
    "setns": ("setns", -1, 0), "init_module": ("init_module", 0, 0, "str"),
    "finit_module": ("finit_module", -1, "str", 0), "delete_module": ("delete_module", "str", 0),
    "kexec_load": ("kexec_load", 0, 0, 0, 0), "shmget": ("shmget", 0, 4096, 0o600),
    "semget": ("semget", 0, 1, 0o600), "msgget": ("msgget", 0, 0o600),
    "mq_open": ("mq_open", "str", 0o100, 0o600, 0), "memfd_secret": ("memfd_secret", 0),
    "memfd_create": ("memfd_create", "str", 0),
    # the TA's per-user quota, and channels between two students' sandboxes
    "inotify_init1": ("inotify_init1", 0), "fanotify_init": ("fanotify_init", 0, 0),
    "flock": ("flock", 0, 1), "fcntl setlk": ("fcntl", 0, 6, "buf"),
    "fcntl ofd setlk": ("fcntl", 0, 37, "buf"), "fcntl getlk": ("fcntl", 0, 5, "buf"),
    "fcntl notify": ("fcntl", 0, 1026, 1), "fcntl setlease": ("fcntl", 0, 1024, 0),
    "personality": ("personality", 0xFFFFFFFF),
    "name_to_handle_at": ("name_to_handle_at", -100, "str", 0, 0, 0),
    "socket inet": ("socket", 2, 1, 0), "socket inet6": ("socket", 10, 1, 0),
    "socket netlink": ("socket", 16, 3, 0), "socket packet": ("socket", 17, 3, 0),
    "socketpair inet": ("socketpair", 2, 1, 0, "buf"),
    "clone newuser": ("clone", 0x10000000 | 17, 0, 0, 0, 0),
    "clone newnet": ("clone", 0x40000000 | 17, 0, 0, 0, 0),
    "clone3": ("clone3", 0, 0),
}

ATTACK = r'''
import ctypes as _c, errno as _e, json as _j, mmap as _m, os as _o, socket as _s
import struct as _st, threading as _t
_libc = _c.CDLL(None, use_errno=True)
_libc.syscall.restype = _c.c_long
_NR = {numbers!r}
_SAMPLE = {sample!r}
_PORT = {port}

def _arg(a, keep):
    if a == "buf":
        keep.append(_c.create_string_buffer(4096))
        return _c.cast(keep[-1], _c.c_void_p)
    if a == "str":
        keep.append(_c.c_char_p(b"/mmg-probe"))
        return keep[-1]
    return _c.c_long(_o.getpid() if a == "pid" else a)

def _raw(nr, *args):
    keep = []
    _c.set_errno(0)
    r = _libc.syscall(_c.c_long(nr), *[_arg(a, keep) for a in args])
    return r, _c.get_errno()

def _name(r, err):
    return "ok" if r >= 0 else _e.errorcode.get(err, str(err))

def _undo(name, r):
    """Remove whatever a call that passed made."""
    if r <= 0:
        return
    if name.startswith("clone"):  # r: the child's pid (the child itself left below)
        _o.waitpid(r, 0)
    elif name in ("shmget", "semget", "msgget"):
        ctl = {{"shmget": "shmctl", "semget": "semctl", "msgget": "msgctl"}}[name]
        _libc.syscall(_c.c_long(_NR[ctl]), _c.c_long(r), _c.c_long(0), _c.c_long(0))
    elif name == "mq_open":
        _libc.syscall(_c.c_long(_NR["mq_unlink"]), _c.c_char_p(b"/mmg-probe"))
        _o.close(r)
    elif name != "ptrace":
        try:
            _o.close(r)
        except OSError:
            pass

_said = {{}}
for _n, (_call, *_args) in _SAMPLE.items():
    _r, _err = _raw(_NR[_call], *_args)
    if _r == 0 and _call == "clone":
        _o._exit(0)  # the child of a clone that passed
    _said[_n] = _name(_r, _err)
    _undo(_call, _r)

# other ABIs and calls newer than the table
_said["x32"] = _name(*_raw(0x40000000 | _NR["getpid"]))
_said["newer"] = _name(*_raw(_NR["newer"]))
if _o.uname().machine == "x86_64":  # the i386 ABI: getpid (20) through int 0x80
    _code = _m.mmap(-1, 4096, prot=_m.PROT_READ | _m.PROT_WRITE | _m.PROT_EXEC)
    _code.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))
    _ret = _c.CFUNCTYPE(_c.c_int)(_c.addressof(_c.c_char.from_buffer(_code)))()
    _said["i386"] = "ok" if _ret > 0 else _e.errorcode.get(-_ret, str(_ret))

# allowed calls, the control: a Unix socket, a fork, a thread, a pipe
_ctl = {{}}
try:
    _s.socket(_s.AF_UNIX, _s.SOCK_STREAM).close()
    for _end in _s.socketpair():
        _end.close()
    _ctl["unix"] = "ok"
except OSError as _x:
    _ctl["unix"] = _e.errorcode.get(_x.errno, str(_x))
try:
    _pid = _o.fork()
    if _pid == 0:
        _o._exit(7)
    _ctl["fork"] = "ok" if _o.waitstatus_to_exitcode(_o.waitpid(_pid, 0)[1]) == 7 else "bad"
except OSError as _x:
    _ctl["fork"] = _e.errorcode.get(_x.errno, str(_x))
_box = []
_th = _t.Thread(target=lambda: _box.append(1))
_th.start(); _th.join()
_ctl["thread"] = "ok" if _box == [1] else "bad"

def _io_uring_connect():
    """A TCP socket from io_uring (IORING_OP_SOCKET), connected to the test's listener."""
    params = _c.create_string_buffer(120)
    fd = _libc.syscall(_c.c_long(_NR["io_uring_setup"]), _c.c_long(4), params)
    if fd < 0:
        return "setup " + _e.errorcode.get(_c.get_errno(), "?")
    p = params.raw
    sq_entries, cq_entries = _st.unpack_from("II", p, 0)
    sq_head, sq_tail, sq_mask, _a, _b, _d, sq_array = _st.unpack_from("7I", p, 40)
    cq_head, cq_tail, cq_mask, _a, _b, cqes = _st.unpack_from("6I", p, 80)
    sq = _m.mmap(fd, sq_array + 4 * sq_entries, offset=0)
    cq = _m.mmap(fd, cqes + 16 * cq_entries, offset=0x8000000)
    sqes = _m.mmap(fd, 64 * sq_entries, offset=0x10000000)
    # IORING_OP_SOCKET (45): fd = domain, off = type, len = protocol
    sqes[0:64] = _st.pack("BBHiQQII", 45, 0, 0, _s.AF_INET, _s.SOCK_STREAM, 0, 0, 0) + bytes(32)
    tail = _st.unpack_from("I", sq, sq_tail)[0]
    _st.pack_into("I", sq, sq_array + 4 * (tail & _st.unpack_from("I", sq, sq_mask)[0]), 0)
    _st.pack_into("I", sq, sq_tail, tail + 1)
    if _libc.syscall(_c.c_long(_NR["io_uring_enter"]), _c.c_long(fd), _c.c_long(1),
                     _c.c_long(1), _c.c_long(1), None, _c.c_long(0)) < 0:
        return "enter " + _e.errorcode.get(_c.get_errno(), "?")
    head = _st.unpack_from("I", cq, cq_head)[0]
    at = cqes + 16 * (head & _st.unpack_from("I", cq, cq_mask)[0])
    res = _st.unpack_from("i", cq, at + 8)[0]
    if res < 0:
        return "socket op " + _e.errorcode.get(-res, str(res))
    sock = _s.socket(fileno=res)
    sock.settimeout(5)
    try:
        sock.connect(("127.0.0.1", _PORT))
        sock.sendall(b"mmg-io-uring")
        return "connected"
    except OSError as x:
        return "connect " + _e.errorcode.get(x.errno or 0, str(x))
    finally:
        sock.close()

try:
    _ring = _io_uring_connect()
except Exception as _x:
    _ring = "failed " + type(_x).__name__ + ": " + str(_x)[:100]
raise RuntimeError("SYSCALLS " + _j.dumps({{"denied": _said, "allowed": _ctl,
                                           "io_uring": _ring}}) + " END")
'''


def numbers() -> dict[str, int]:
    """This machine's numbers of every call the attack makes, from the table."""
    column = syscalls.MACHINES[MACHINE][0]
    rows = {**syscalls.ALLOWED, **syscalls.RULES, **syscalls.DENIED}
    out = {name: row[column] for name, row in rows.items() if row[column] is not None}
    out["newer"] = syscalls.first_unknown(column) + 7
    return out


def attack(port: int) -> str:
    sample = {name: call for name, call in SAMPLE.items() if call[0] in numbers()}
    return (SOLUTION.read_text(encoding="utf-8") + "\n"
            + ATTACK.format(numbers=numbers(), sample=sample, port=port))


# -- the table -----------------------------------------------------------------------

def test_the_denied_list_is_named_and_refused():
    """Print what is refused; everything the issue names is in it, none is allowed."""
    refused = sorted(set(syscalls.DENIED) | {"clone3"})
    print(f"\nrefused by name ({len(refused)}), everything unlisted alike:", " ".join(refused))
    print("allowed with conditions:", {k: v[2] for k, v in syscalls.RULES.items()})
    assert not set(MUST_REFUSE) - set(syscalls.DENIED)
    assert not set(syscalls.DENIED) & (set(syscalls.ALLOWED) | set(syscalls.RULES))
    assert not set(syscalls.ALLOWED) & set(syscalls.RULES)


def _header_numbers(path: str) -> dict[str, int]:
    out = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    out.setdefault("newfstatat", out.get("fstatat", -1))
    return out


@pytest.mark.parametrize("machine, header", [
    ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    ("aarch64", "/usr/include/asm-generic/unistd.h"),  # arm64 uses the generic table
])
def test_numbers_are_the_kernels(machine, header):
    """Every number in the table is the one the kernel's headers give (where this
    machine's headers know the call: newer ones than the headers are not checked)."""
    if not Path(header).exists():
        pytest.skip(f"no {header} here")
    known = _header_numbers(header)
    column = syscalls.MACHINES[machine][0]
    rows = {**syscalls.ALLOWED, **syscalls.RULES, **syscalls.DENIED}
    wrong = {name: (row[column], known[name]) for name, row in rows.items()
             if name in known and row[column] is not None and row[column] != known[name]}
    assert wrong == {}
    missing = [name for name, row in rows.items() if row[column] is None and name in known]
    assert missing == []
    assert len([n for n in rows if n in known]) > 250


def _run_filter(program, arch: int, nr: int, args=(0,) * 6) -> int:
    """Classic BPF as seccomp runs it, on struct seccomp_data (little-endian)."""
    data = {0: nr, 4: arch, **{16 + 8 * i: a & 0xFFFFFFFF for i, a in enumerate(args)}}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == syscalls.LD_ABS:
            acc = data[k]
        elif code == syscalls.JA:
            pc += k
        elif code in (syscalls.JEQ, syscalls.JGE, syscalls.JSET):
            hit = {syscalls.JEQ: acc == k, syscalls.JGE: acc >= k,
                   syscalls.JSET: bool(acc & k)}[code]
            pc += jt if hit else jf
        elif code == syscalls.RET:
            return k
        else:
            raise AssertionError(f"unknown instruction {code:#x}")


@pytest.mark.parametrize("alone", [False, True])
@pytest.mark.parametrize("machine", sorted(syscalls.MACHINES))
def test_the_filter_does_what_the_table_says(machine, alone):
    column, audit = syscalls.MACHINES[machine]
    program = syscalls.program(machine, alone)
    allow = syscalls.RET_ALLOW
    eperm = syscalls.RET_ERRNO | syscalls.EPERM
    enosys = syscalls.RET_ERRNO | syscalls.ENOSYS
    named = {row[column] for table in (syscalls.ALLOWED, syscalls.RULES, syscalls.DENIED)
             for row in table.values()}
    for name, row in syscalls.ALLOWED.items():
        if row[column] is not None:
            assert _run_filter(program, audit, row[column], (-1,) * 6) == allow, name
    for name, row in syscalls.DENIED.items():
        if row[column] is not None:
            assert _run_filter(program, audit, row[column]) == eperm, name
    unlisted = [n for n in range(syscalls.first_unknown(column)) if n not in named]
    assert unlisted and all(_run_filter(program, audit, n) == eperm for n in unlisted)
    rule = {name: row[column] for name, row in syscalls.RULES.items()}
    for call in ("socket", "socketpair"):
        assert _run_filter(program, audit, rule[call], (1, 1, 0)) == allow
        for family in (2, 10, 16, 17):  # inet, inet6, netlink, packet
            assert _run_filter(program, audit, rule[call], (family, 1, 0)) == eperm
    thread = 0x3D0F00  # what pthread_create passes
    assert _run_filter(program, audit, rule["clone"], (thread,)) == allow
    process = eperm if alone else allow  # alone: no memory cgroup caps a second one
    assert _run_filter(program, audit, rule["clone"], (17,)) == process  # fork
    assert _run_filter(program, audit, rule["clone"], (0x4111,)) == process  # vfork, spawn
    for call in ("fork", "vfork"):
        if rule[call] is not None:
            assert _run_filter(program, audit, rule[call]) == process, call
    for option in (7, 8, 32, 33):  # SO_SNDBUF, SO_RCVBUF and their FORCE kin
        assert _run_filter(program, audit, rule["setsockopt"], (3, 1, option)) == eperm
    assert _run_filter(program, audit, rule["setsockopt"], (3, 1, 9)) == allow  # KEEPALIVE
    assert _run_filter(program, audit, rule["setsockopt"], (3, 6, 7)) == allow  # not SOL_
    for cmd in syscalls.FCNTL_SHARED:  # locks, leases, notices
        assert _run_filter(program, audit, rule["fcntl"], (3, cmd)) == eperm, cmd
    for cmd in (0, 1, 2, 3, 4, 1030, 1031, 1032):  # dup, flags, pipe sizes
        assert _run_filter(program, audit, rule["fcntl"], (3, cmd)) == allow, cmd
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                 0x40000000):
        assert _run_filter(program, audit, rule["clone"], (flag | 17,)) == eperm, hex(flag)
    assert _run_filter(program, audit, rule["ioctl"], (1, 0x5401)) == allow  # TCGETS
    assert _run_filter(program, audit, rule["ioctl"], (1, 0x5412)) == eperm  # TIOCSTI
    assert _run_filter(program, audit, rule["clone3"]) == enosys
    assert _run_filter(program, audit, syscalls.first_unknown(column)) == enosys
    assert _run_filter(program, audit, 0x40000000 | 39) == enosys  # x32
    assert _run_filter(program, 0x40000003, 20) == enosys  # i386


# -- from a submission's child, in each mode --------------------------------------------

class Listener:
    """A TCP server on 127.0.0.1 counting connections; it stops by itself after
    `seconds` at the latest."""

    def __init__(self, seconds: float = 900):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.until = time.monotonic() + seconds
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while time.monotonic() < self.until:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()
        self.sock.close()

    def stop(self) -> None:
        self.until = 0
        self.thread.join()


@pytest.mark.parametrize("mode", modes.MODES)
def test_a_child_is_refused_the_listed_calls(mode):
    if reason := modes.reason(mode):
        pytest.skip(reason)
    if mode == "own":
        require_sandbox()
    listener = Listener()
    top = modes.class_folder()
    try:
        records, said = modes.grade(top, mode, {"calls": attack(listener.port),
                                          "honest": SOLUTION.read_text(encoding="utf-8")})
    finally:
        listener.stop()
        shutil.rmtree(top, ignore_errors=True)
    record = records["calls"]
    found = re.search(r"SYSCALLS (\{.*\}) END", record["problem"] or "")
    assert found, (record["status"], record["problem"], said)
    result = json.loads(found.group(1))
    print(f"\n{mode} ({record['sandbox']}): {json.dumps(result)}")
    # honest code, in the same run and mode, loses nothing to the filter
    assert records["honest"]["score"] == pytest.approx(10.0), records["honest"]["problem"]
    # a second process only where a memory cgroup caps them together
    fork = "EPERM" if "no writable memory cgroup" in said else "ok"
    assert result["allowed"] == {"unix": "ok", "fork": fork, "thread": "ok"}
    expected = {name: "ENOSYS" if name in ENOSYS_EXPECTED else "EPERM"
                for name in result["denied"]}
    assert result["denied"] == expected
    assert {"io_uring_setup", "socket inet", "keyctl", "ptrace", "unshare", "mount",
            "shmget", "clone newuser", "clone3", "x32"} <= set(result["denied"])
    assert result["io_uring"] == "setup EPERM"
    assert listener.hits == 0
