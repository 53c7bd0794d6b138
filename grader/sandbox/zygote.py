"""The warm fork server that runs student code. It executes inside the sandbox.

It pays for `import torch` (and the lesson's probe module) once, then serves
slots: each slot is a fork of the warm process with its own uid and, sandboxed,
its own pid, mount and network namespaces (one bubblewrap boot is shared by every
slot of a run). A slot forks one child per submission. Each child joins an empty
session keyring, drops to the slot's unprivileged uid with no capability left,
takes its rlimits and a seccomp filter, imports the submission from a private
scratch tmpfs and answers probe calls on a socket that leads straight to the
trusted side, echoing each request's nonce. Neither the zygote nor a slot ever sees a submission's source or
results; they only spawn, reap and kill.

Control messages (JSON over SOCK_SEQPACKET sockets, file descriptors passed with
SCM_RIGHTS). To the zygote (--ctrl-fd):
  <- {"event": "ready"}
  -> {"op": "inputs"}                  + [a memfd holding one frame: {key: request}]
  <- {"event": "inputs", "count": int}
  -> {"op": "slot", "uid": int}        + [the new slot's control socket]
  <- {"event": "slot"}
To a slot:
  -> {"op": "spawn", "limits": {...}}  + [data socket, output pipe]
  <- {"event": "spawned"}
  -> {"op": "kill"}                    kill the child and all it started
  <- {"event": "exit", "code": int|None, "signal": int|None, "cpu_s": float,
       "oom": bool, "oom_outside": bool, "harness": str}
       ("oom_outside": killed for memory the machine lacked while under its own cap;
       "harness": what the harness reported on a side pipe if it failed before the
       submission ran. Both are grader errors, never the student's.)
Only the standard library, torch and the probe module are imported here.
"""
from __future__ import annotations

import argparse
import builtins
import ctypes
import gc
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import traceback

SCRATCH = "/tmp/work"  # sandboxed: a fresh tmpfs per child, in the slot's own mounts
HARNESS_FAILED = 70  # a child's exit status when the harness failed (also reported aside)
CGROUP = "/grader/cgroup"  # the run's memory cgroup, where the trusted side made one
# Container mode (no namespaces to be had; the container is the boundary): set by main
CONTAINER = False
PR_SET_CHILD_SUBREAPER = 36
AF_UNIX = 1
COW_MARGIN_MB = 128  # warm pages a child copies on write are charged to its cgroup
MODULE_NAME = "submission"
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
MNT_DETACH = 2
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
PR_CAPBSET_DROP = 24
# What the zygote and its slots use (bwrap.KEPT_CAPS less CAP_SETPCAP): CAP_KILL,
# CAP_SETGID, CAP_SETUID, CAP_SYS_ADMIN
ZYGOTE_CAPS = (5, 6, 7, 21)
USERNS_CAPS = (31,)  # rootless also CAP_SETFCAP (bwrap.USERNS_CAPS says why)
KEYCTL_JOIN_SESSION_KEYRING = 1
CAP_VERSION_3 = 0x20080522
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096

libc = ctypes.CDLL(None, use_errno=True)
protocol = None  # loaded by path in main(): the package is not importable in the sandbox
# The hidden tests' probe requests (inputs only, never results), by request key: sent
# once per run, so a request to a child names its key instead of carrying megabytes.
INPUTS: dict[str, dict] = {}
# In a child, until the submission's code first runs: where a harness failure is reported
_report: int | None = None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--probes", required=True)
    ap.add_argument("--ctrl-fd", type=int, required=True)
    ap.add_argument("--sandboxed", action="store_true")
    ap.add_argument("--userns", action="store_true",
                    help="rootless: a user namespace per child, not a uid per slot")
    ap.add_argument("--container", action="store_true",
                    help="no namespaces: a uid per slot, as root in a container")
    ap.add_argument("--cgroup", default=CGROUP, help="the run's memory cgroup")
    ap.add_argument("--preload", default="", help="comma-separated modules to import once")
    ap.add_argument("--scratch", default=SCRATCH,
                    help="unsandboxed: the run's private directory (a child's goes in it)")
    ap.add_argument("--package-root",
                    help="where the trusted side's `grader` package is (for grader.probekit)")
    args = ap.parse_args()
    if args.package_root:  # before the interpreter's own finders (another install's)
        sys.path.insert(0, args.package_root)
    start(args.probes, args.ctrl_fd, list(filter(None, args.preload.split(","))),
          sandboxed=args.sandboxed, userns=args.userns, container=args.container,
          cgroup=args.cgroup, scratch=args.scratch)


def start(probes_path: str, ctrl_fd: int, preload: list[str], *, sandboxed: bool = False,
          userns: bool = False, container: bool = False, cgroup: str = CGROUP,
          scratch: str = SCRATCH) -> None:
    """Warm up, say ready, serve slots until the trusted side hangs up. Run by `main`
    in a fresh interpreter, or in a fork of the trusted process that has imported
    torch and nothing else yet (slot.Sandbox's `fork`: one import for both sides)."""
    global CONTAINER, CGROUP
    CONTAINER, CGROUP = container, cgroup
    if sandboxed:
        _shed_inheritance(ZYGOTE_CAPS + (USERNS_CAPS if userns else ()))
    import torch  # paid once per worker, inherited by every child

    torch.set_num_threads(1)
    for name in preload:
        importlib.import_module(name)  # e.g. transformers.activations: not per student
    global protocol
    protocol = _load_module("grader_protocol",
                            os.path.join(os.path.dirname(__file__), "protocol.py"))
    probes = _load_module("probes", probes_path)
    if hasattr(probes, "warm_up"):  # first-use costs paid once here, not in every child
        probes.warm_up()
    # Keep the garbage collector out of everything imported so far: a child's first
    # collection would otherwise touch (and so copy-on-write) the whole warm heap.
    gc.collect()
    gc.freeze()
    ctrl = socket.socket(fileno=ctrl_fd)
    ctrl.send(b'{"event": "ready"}')
    _serve_slots(ctrl, probes, sandboxed, scratch, userns)


def _load_module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _serve_slots(ctrl: socket.socket, probes, sandboxed: bool, scratch: str,
                 userns: bool) -> None:
    """Fork a slot per request, until the trusted side hangs up (which ends the
    sandbox, and with it every slot: they live in namespaces nested in ours)."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reap slots (and their forks) at once
    while True:
        msg, fds, _, _ = socket.recv_fds(ctrl, 65536, 1)
        if not msg:
            return
        request = json.loads(msg)
        if request["op"] == "inputs":
            with open(fds[0], "rb") as f:
                f.seek(0)  # the offset is shared with the sender, who left it at the end
                INPUTS.update(protocol.loads(f.read()))
            gc.collect()
            gc.freeze()  # the slots forked from here share these pages untouched
            ctrl.send(json.dumps({"event": "inputs", "count": len(INPUTS)}).encode())
            continue
        uid = request["uid"]
        (slot_fd,) = fds
        if os.fork() == 0:
            try:
                ctrl.close()
                if sandboxed:
                    _enter_slot_namespaces()
                elif CONTAINER:  # orphans come to the slot, to be reaped
                    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
                _serve(socket.socket(fileno=slot_fd), probes,
                       uid if sandboxed or CONTAINER else None, sandboxed, scratch, userns)
            except BaseException:  # noqa: BLE001 - a harness failure: say so on stderr
                traceback.print_exc()
                os._exit(70)
            os._exit(0)
        os.close(slot_fd)
        ctrl.send(b'{"event": "slot"}')


def _shed_inheritance(caps: tuple[int, ...]) -> None:
    """Drop what the zygote got from the TA's process and does not need: the TA's
    session keyring (a login session's keys), and every capability beyond the ones it
    uses (bwrap leaves the bounding set nearly full and the kept ones inheritable).
    The bounding set can go only while CAP_SETPCAP is held, so bwrap keeps that one
    for this alone and it is dropped here too."""
    _join_fresh_keyring()
    _empty_bounding_set()
    kept = sum(1 << cap for cap in caps)
    _set_capabilities(kept, kept, 0)


def _empty_bounding_set() -> None:
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"dropping capability {cap} failed")


def _join_fresh_keyring(required: bool = True) -> None:
    """Leave the inherited session keyring for a new, empty one of our own."""
    nr = SYSCALLS.get(os.uname().machine, {}).get("keyctl")
    if nr is not None and libc.syscall(nr, KEYCTL_JOIN_SESSION_KEYRING, None) < 0 and required:
        raise OSError(ctypes.get_errno(), "joining a fresh session keyring failed")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _set_capabilities(effective: int, permitted: int, inheritable: int) -> None:
    """capset(2) for this thread (caps 0-63; the sets above 31 are the second word)."""
    data = (_CapData * 2)(*[_CapData((effective >> s) & 0xFFFFFFFF,
                                     (permitted >> s) & 0xFFFFFFFF,
                                     (inheritable >> s) & 0xFFFFFFFF) for s in (0, 32)])
    if libc.capset(ctypes.byref(_CapHeader(CAP_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _enter_slot_namespaces() -> None:
    """Make this process pid 1 of a new pid namespace with its own mounts and network:
    `kill -1` then reaches exactly this slot's submissions, its scratch mount and /proc
    are its own, students graded at once in two slots share no loopback or abstract
    socket (lo stays down), and when it ends the kernel kills whatever they left."""
    if libc.unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID | NEWNS | NEWNET) failed")
    if os.fork() != 0:
        os._exit(0)  # the slot lives on in the child: pid 1 of the new namespace
    os.setsid()  # its own group, visible in its namespace: killpg(getpgid(1)) is refused
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making the slot's mounts private failed")
    if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) != 0:
        raise OSError(ctypes.get_errno(), "mounting the slot's /proc failed")
    # Rootless, a student's process has the user's own uid outside, so the kernel would
    # list that user's keys (their names) in /proc/keys: the slot's are empty.
    for path in (b"/proc/keys", b"/proc/key-users"):
        if os.path.exists(path) and libc.mount(b"/dev/null", path, None, MS_BIND, None) != 0:
            raise OSError(ctypes.get_errno(), f"hiding {path.decode()} failed")
    # bwrap's root, /tmp and /dev are one tmpfs each for every slot, owned by the
    # sandbox's root: rootless, that is the student's own uid outside, so they would be
    # a place to leave files for the next student or another slot. Read-only here (the
    # scratch is mounted on /tmp/work; /dev's device nodes are mounts of their own).
    os.makedirs(SCRATCH, exist_ok=True)
    for path in (b"/", b"/tmp", b"/dev"):
        if libc.mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID
                      | MS_NODEV, None) != 0:
            raise OSError(ctypes.get_errno(), f"making the slot's {path.decode()} read-only failed")


class _Cgroup:
    """The slot's memory cgroup (v1 or v2 file names): a cap on all a submission's
    processes together, and whether the kernel's OOM killer acted on them. Its files
    are opened once, then the cgroup tree is unmounted from the slot: rootless, the
    files belong to the student's own uid outside, and a child could raise its cap."""

    def __init__(self, uid: int, detach: bool):
        path = os.path.join(CGROUP, f"slot-{uid}")
        os.mkdir(path)
        v1 = os.path.exists(os.path.join(path, "memory.limit_in_bytes"))
        names = (("memory.limit_in_bytes", "memory.oom_control") if v1 else
                 ("memory.max", "memory.events"))
        self.limit = os.open(os.path.join(path, names[0]), os.O_WRONLY)
        self.events = os.open(os.path.join(path, names[1]), os.O_RDONLY)
        # times the slot's own cap was reached (v1: memory.failcnt; v2: "oom" events)
        self.failcnt = (os.open(os.path.join(path, "memory.failcnt"), os.O_RDONLY) if v1
                        else None)
        self.procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
        if detach and libc.umount2(CGROUP.encode(), MNT_DETACH) != 0:
            raise OSError(ctypes.get_errno(), "unmounting the cgroup tree from the slot failed")

    def cap(self, memory_mb: int) -> tuple[int, int]:
        """Set the cap for the next child; the counts so far (`counts`)."""
        os.write(self.limit, str((memory_mb + COW_MARGIN_MB) << 20).encode())
        return self.counts()

    def counts(self) -> tuple[int, int]:
        """(processes the OOM killer took from this slot, times the slot's own cap was
        reached). A kill with the cap never reached came from outside: the machine or
        the container ran out, not the submission's allowance."""
        events = {}
        for line in os.pread(self.events, 4096, 0).decode().splitlines():
            name, _, value = line.partition(" ")
            events[name] = int(value) if value.strip().isdigit() else 0
        hits = (int(os.pread(self.failcnt, 64, 0)) if self.failcnt is not None
                else events.get("oom", 0))
        return events.get("oom_kill", 0), hits

    def enter(self) -> None:
        """Move the calling process in (its children follow)."""
        os.write(self.procs, str(os.getpid()).encode())


class _Child:
    """A submission's process, the pipe on which its harness reports a failure of its
    own (closed before the submission runs: what comes through it is never the
    student's doing), and its scratch directory."""

    def __init__(self, pid: int, report: int, scratch: str, uid: int | None):
        self.pid, self.report, self.scratch, self.uid = pid, report, scratch, uid

    def harness_failure(self) -> str:
        """What the harness reported before it died (read once the child is gone)."""
        os.set_blocking(self.report, False)
        try:
            return os.read(self.report, protocol.MAX_TEXT).decode(errors="replace")
        except BlockingIOError:
            return ""


def _serve(ctrl: socket.socket, probes, uid: int | None, sandboxed: bool,
           scratch_root: str, userns: bool) -> None:
    cgroup = (_Cgroup(uid, detach=sandboxed) if uid is not None and os.path.isdir(CGROUP)
              else None)
    counts_before = (0, 0)
    # SIGCHLD wakes the select through a pipe: a child's end is reported at once,
    # not at the next poll (a poll cost every submission ~20 ms of idle time).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    child = None
    while True:
        ready, _, _ = select.select([ctrl, wake_r], [], [], 1.0)
        if wake_r in ready:
            os.read(wake_r, 4096)
            ready.remove(wake_r)
        if child is not None:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                harness = child.harness_failure()
                _cleanup(child, sandboxed)
                child = None
                kills, hits = cgroup.counts() if cgroup is not None else counts_before
                killed = kills > counts_before[0]
                ctrl.send(json.dumps({
                    "event": "exit",
                    "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                    "cpu_s": usage.ru_utime + usage.ru_stime,
                    "oom": killed and hits > counts_before[1],
                    "oom_outside": killed and hits == counts_before[1],
                    "harness": harness,
                }).encode())
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(ctrl, 65536, 4)
        if not msg:
            if child is not None:
                _cleanup(child, sandboxed)
            return
        request = json.loads(msg)
        if request["op"] == "spawn":
            if child is not None:  # the trusted side always kills first; be safe anyway
                _cleanup(child, sandboxed)
            if cgroup is not None:
                counts_before = cgroup.cap(request["limits"]["memory_mb"])
            child = _spawn(ctrl, fds, request["limits"], probes, uid, sandboxed, cgroup,
                           scratch_root, userns)
            ctrl.send(b'{"event": "spawned"}')
        elif request["op"] == "kill" and child is not None:
            _kill_all(child, sandboxed)


def _spawn(ctrl, fds, limits: dict, probes, uid, sandboxed: bool, cgroup,
           scratch_root: str, userns: bool) -> _Child:
    data_fd, out_fd = fds
    if sandboxed:  # rootless, the child's own uid is root's of the sandbox, mapped
        _fresh_scratch(0 if userns else uid, limits["scratch_mb"])
        scratch = SCRATCH
    else:  # the run's private directory (0700, made by the trusted side): one per child
        scratch = tempfile.mkdtemp(prefix="submission-", dir=scratch_root)
        if CONTAINER:
            os.chown(scratch, uid, uid)
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        global _report
        code = 0
        try:
            _report = report_w
            ctrl.close()
            os.close(report_r)
            _become_student(data_fd, out_fd, report_w, limits, uid, cgroup, scratch, userns)
            _child(socket.socket(fileno=data_fd), probes, limits, scratch)
        except BaseException:  # noqa: BLE001 - the harness's failure, or the student's
            code = _harness_failed()
        finally:
            os._exit(code)
    os.close(data_fd)
    os.close(out_fd)
    os.close(report_w)
    return _Child(pid, report_r, scratch, uid)


def _harness_failed() -> int:
    """Report the exception being handled on the harness's pipe if the submission has
    not run yet (the student cannot have caused it); else in the output, theirs."""
    if _report is None:
        traceback.print_exc()
    else:
        os.write(_report, traceback.format_exc()[-protocol.MAX_TEXT:].encode())
    return HARNESS_FAILED


def _close_report() -> None:
    """The submission's code is about to run: nothing it causes may look like ours."""
    global _report
    os.close(_report)
    _report = None


def _fresh_scratch(uid: int, size_mb: int) -> None:
    """A new size-capped tmpfs per child: nothing of the previous student survives."""
    libc.umount2(SCRATCH.encode(), MNT_DETACH)
    os.makedirs(SCRATCH, exist_ok=True)
    opts = f"size={size_mb}m,nr_inodes=4096,mode=0700,uid={uid},gid={uid}".encode()
    if libc.mount(b"tmpfs", SCRATCH.encode(), b"tmpfs", 0, opts) != 0:
        raise OSError(ctypes.get_errno(), "mounting the scratch tmpfs failed")


def _kill_all(child: _Child, sandboxed: bool) -> None:
    if sandboxed:
        # Alone in this pid namespace with bwrap's init: -1 reaches every process
        # the submission started, double-forked daemons included.
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if CONTAINER:
            _kill_uid(child.uid)


def _kill_uid(uid: int) -> None:
    """Every process of the slot's uid (it is this slot's alone), daemons included:
    `kill -1` from a fork that became that uid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _cleanup(child: _Child, sandboxed: bool) -> None:
    _kill_all(child, sandboxed)
    try:
        os.waitpid(child.pid, 0)
    except ChildProcessError:
        pass
    os.close(child.report)
    if sandboxed or CONTAINER:  # the slot inherits every orphan: reap them all
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    if sandboxed:
        libc.umount2(SCRATCH.encode(), MNT_DETACH)
    else:
        shutil.rmtree(child.scratch, ignore_errors=True)


def _become_student(data_fd: int, out_fd: int, report: int, limits: dict, uid, cgroup,
                    scratch: str, userns: bool) -> None:
    os.setsid()
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    if cgroup is not None:  # while privileged: the cgroup's files are root's
        cgroup.enter()
    _close_all_but(data_fd, report)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    base = _vm_size()
    mib = 1024 * 1024
    # The CPU limit is told by its own signal: SIGXCPU at the limit, SIGKILL a second
    # later (if SIGXCPU is caught). With soft == hard the kernel sent SIGKILL at once,
    # and on a loaded machine the CPU time wait4 reports was then under 90% of the
    # limit (ticks run ahead of it): the kill was not put down to the CPU limit.
    for res, value, hard in (
        (resource.RLIMIT_AS, base + limits["memory_mb"] * mib, None),
        (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mib, None),
        (resource.RLIMIT_NPROC, limits["processes"], None),
        (resource.RLIMIT_CORE, 0, None),
    ):
        resource.setrlimit(res, (value, value if hard is None else hard))
    if uid is not None and userns:
        _own_user_namespace(uid)
    if uid is not None:
        # A fresh IPC namespace per child: SysV shared memory and message queues
        # outlive their creator, so in the zygote's namespace one submission could
        # leave data (or memory held outside RLIMIT_AS) for the next. This one dies
        # with the child and everything it started.
        if not CONTAINER and libc.unshare(CLONE_NEWIPC) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWIPC) failed")
        # nothing a student leaves there outlives it (a container's own filter may
        # refuse keyrings: ours refuses them to the student anyway)
        _join_fresh_keyring(required=not CONTAINER)
        if not userns:
            os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        _set_capabilities(0, 0, 0)  # (rootless, setresuid to the same uid keeps them)
    os.chdir(scratch)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("prctl(NO_NEW_PRIVS) failed")
    if uid is not None:
        _deny_user_namespaces()


def _own_user_namespace(uid: int) -> None:
    """Rootless, every child runs as the one uid the user has, so each enters a user
    namespace of its own, as `uid` mapped to that one. Its process count (RLIMIT_NPROC,
    set just before) is then counted in that namespace alone: per child, not shared
    with the user's other processes or the other slots; and its capabilities, which it
    drops next, reach only what that namespace owns."""
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER) failed")
    for name, text in (("uid_map", f"{uid} 0 1"), ("setgroups", "deny"),
                       ("gid_map", f"{uid} 0 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    _empty_bounding_set()  # a new namespace's creator starts with a full one


def _close_all_but(*keep: int) -> None:
    """Close every descriptor above stderr except `keep`."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


# The syscall ABI (seccomp's audit arch) and the numbers the filter names, by machine
SYSCALLS = {
    "x86_64": {"audit": 0xC000003E, "unshare": 272, "clone": 56, "clone3": 435,
               "add_key": 248, "request_key": 249, "keyctl": 250, "socket": 41},
    "aarch64": {"audit": 0xC00000B7, "unshare": 97, "clone": 220, "clone3": 435,
                "add_key": 217, "request_key": 218, "keyctl": 219, "socket": 198},
}
CLONE_NEWUSER = 0x10000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
X32_BIT = 0x40000000


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def _deny_user_namespaces() -> None:
    """A seccomp filter: no new user namespace (unshare or clone with CLONE_NEWUSER,
    which would give the student capabilities in a namespace of its own and the
    kernel surface that comes with them), clone3 answered ENOSYS (its flags are out
    of reach of a filter; libc then uses clone), no kernel keyrings (keys outlive
    their process: the next student under the same uid would read them), and no
    other syscall ABI. In container mode, where no network namespace is to be had,
    also no socket but a Unix one."""
    nr = SYSCALLS.get(os.uname().machine)
    if nr is None:
        return  # an unknown machine: the other limits still hold
    program = _assemble([
        (LD_ABS, None, None, 4),                    # the syscall's ABI
        (JEQ, None, "enosys", nr["audit"]),         # any other ABI (i386; x32 below)
        (LD_ABS, None, None, 0),                    # the syscall number
        (JGE, "enosys", None, X32_BIT),
        (JEQ, "flags", None, nr["unshare"]),
        (JEQ, "flags", None, nr["clone"]),
        (JEQ, "enosys", None, nr["clone3"]),
        (JEQ, "eperm", None, nr["add_key"]),
        (JEQ, "eperm", None, nr["request_key"]),
        (JEQ, "eperm", None, nr["keyctl"]),
        *([(JEQ, "domain", None, nr["socket"])] if CONTAINER else []),
        (RET, None, None, RET_ALLOW),
        *(["domain", (LD_ABS, None, None, 16),      # socket's address family
            (JEQ, "allow", "eperm", AF_UNIX)] if CONTAINER else []),
        "flags", (LD_ABS, None, None, 16),          # the first argument's low word
        (JSET, "eperm", "allow", CLONE_NEWUSER),
        "eperm", (RET, None, None, RET_ERRNO | 1),
        "allow", (RET, None, None, RET_ALLOW),
        "enosys", (RET, None, None, RET_ERRNO | 38),
    ])
    insns = (_Insn * len(program))(*[_Insn(*i) for i in program])
    prog = _Prog(len(program), insns)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")


def _assemble(lines: list) -> list[tuple[int, int, int, int]]:
    """BPF instructions from (code, jump-if-true, jump-if-false, k) with jumps named
    by the labels (strings) placed before their targets; None falls through."""
    where, at = {}, 0
    for line in lines:
        if isinstance(line, str):
            where[line] = at
        else:
            at += 1
    program = []
    for line in lines:
        if isinstance(line, str):
            continue
        code, jt, jf, k = line
        here = len(program) + 1
        program.append((code, where[jt] - here if jt else 0, where[jf] - here if jf else 0, k))
    return program


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


# ---- the child: import the submission, then answer probe calls ------------------

def _child(data: socket.socket, probes, limits: dict, scratch: str) -> None:
    harness = os.getpid()
    nonce, init = protocol.recv(data)
    path = os.path.join(scratch, init["filename"])
    with open(path, "w", encoding="utf-8") as f:
        f.write(init["source"])
    _guard_imports(init["allowed_imports"])
    _close_report()
    try:
        module = _load_module(MODULE_NAME, path)
        reply = {"ok": True}
    except BaseException as exc:  # noqa: BLE001 - every failure is the student's to see
        reply = {"ok": False, "error": _describe(exc, path)}
    _answer(data, reply, nonce, harness, path)
    if not reply["ok"]:
        return
    while True:
        try:
            nonce, request = protocol.recv(data)
        except EOFError:
            return
        try:
            if "key" in request:  # a request the zygote was given in advance
                request = INPUTS[request["key"]]
            result = getattr(probes, request["probe"])(module, **request["args"])
            reply = {"ok": True, "result": result}
        except BaseException as exc:  # noqa: BLE001
            reply = {"ok": False, "error": _describe(exc, path)}
        _answer(data, reply, nonce, harness, path)


def _flush_output() -> None:
    """What the submission printed, into the output pipe before each answer: a zygote
    forked from the grader keeps the grader's buffered sys.stdout (a pipe's is
    block-buffered unless PYTHONUNBUFFERED is set), and the child is killed, never
    exits, so whatever stayed in the buffer would be lost."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - the submission may have replaced it
            pass


def _answer(data: socket.socket, reply: dict, nonce: int, harness: int, path: str) -> None:
    """Answer request `nonce`, from the harness's own process only: a fork the
    submission made that returned into this loop ends silently here (two processes
    serving one socket would answer each other's requests)."""
    if os.getpid() != harness:
        os._exit(0)
    _flush_output()
    try:
        protocol.send(data, reply, nonce)
    except Exception as exc:  # e.g. a result torch cannot serialise
        protocol.send(data, {"ok": False, "error": _describe(exc, path)}, nonce)


def _guard_imports(allowed: list[str]) -> None:
    """Give a clear error when the submission imports what the course does not provide."""
    real_import = builtins.__import__
    permitted = set(allowed) | set(sys.stdlib_module_names)

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and globals and globals.get("__name__") == MODULE_NAME:
            top = name.partition(".")[0]
            if top not in permitted:
                raise ModuleNotFoundError(
                    f"No module named '{top}': the grading environment provides only "
                    f"the standard library and {', '.join(sorted(allowed))}")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded


def _syntax_lines(exc: SyntaxError) -> list[str]:
    """Where a syntax error is, with a caret under it. Python's own rendering leaves
    the caret line blank when the error spans lines (a missing comma before a line
    break): the carets here mark its extent on its first line."""
    lines = [f'  File "{exc.filename}", line {exc.lineno}\n']
    text = (exc.text or "").split("\n")[0].rstrip()
    if not text:
        return lines
    code = text.lstrip()
    indent = len(text) - len(code)
    start = max((exc.offset or 1) - 1 - indent, 0)
    start = min(start, len(code))
    if exc.end_lineno == exc.lineno and (exc.end_offset or 0) > (exc.offset or 0):
        width = exc.end_offset - exc.offset
    elif (exc.end_lineno or 0) > (exc.lineno or 0):  # to the end of this line
        width = len(code) - start
    else:
        width = 1
    return [*lines, f"    {code}\n", "    " + " " * start + "^" * max(width, 1) + "\n"]


def _describe(exc: BaseException, path: str) -> dict:
    """The error as the student should see it: only frames from their own file."""
    try:
        return _describe_unguarded(exc, path)
    except BaseException:  # noqa: BLE001 - a hostile exception class (metaclass, properties)
        return {"kind": "exception", "type": "", "traceback": "",
                "message": "<the error your code raised could not be described>"}


def _describe_unguarded(exc: BaseException, path: str) -> dict:
    # str() first and guarded: a student's __str__ may raise anything (even
    # SystemExit), which used to escape here and end the child with status 70.
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "<the exception's message could not be shown>"
    kind = "exception"
    if isinstance(exc, NotImplementedError):
        kind = "not_implemented"
    elif isinstance(exc, MemoryError) or "can't allocate memory" in message[:2000]:
        kind = "memory"
    elif isinstance(exc, SystemExit):
        kind = "exit"
    elif isinstance(exc, (SyntaxError, ImportError)):
        kind = "import"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    lines = traceback.format_list(frames)
    if isinstance(exc, SyntaxError) and exc.filename == path:
        lines += _syntax_lines(exc)
    return {
        "kind": kind,
        "type": type(exc).__name__[:200],
        "message": message[:protocol.MAX_TEXT],
        "traceback": "".join(lines).replace(os.path.dirname(path) + "/", "")[:protocol.MAX_TEXT],
    }


if __name__ == "__main__":
    main()
