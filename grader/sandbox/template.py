"""The template: a process forked from the trusted one right after `import torch` (and
the lesson's preloaded libraries) and before anything private is read (the course,
the hidden tests, the recording, the solutions, any submission), from which each of
the run's zygotes is made.

A zygote that is a fresh exec pays for its own torch import (about as much CPU and
memory as the trusted side's); one forked from the trusted process would hold all
that process ever read. A zygote forked from the template has neither cost nor
leak: torch's (and the preloaded libraries') pages are shared with the trusted
process, and its memory is the template's, which never held anything of the course
or the class. The one who forks the template (the Gradescope run,
`autograder_zip.grade`) does so first thing.

Sandboxed, bubblewrap makes the sandbox's namespaces and filesystem as it does for a
fresh zygote, but runs only a holder in them (`bwrap.command(holder=True)`); the
template's fork joins them (`_join`: setns, the sandbox's root, a fork into its pid
namespace), and the zygote then sheds its capabilities as a bwrap-started one does.
Without namespaces (container mode where the container refuses them, or
unsandboxed), the template's fork is the zygote.

Requests on the template's socket (JSON, SOCK_SEQPACKET, descriptors with SCM_RIGHTS):
  -> {"op": "zygote", "probes", "preload", "sandboxed", "container", "cgroup",
      "scratch", "landlock_abi", "join": pid | None}  + [zygote's control socket, stderr]
  <- {"event": "zygote", "pid": int}
"""
from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import traceback

PR_SET_PDEATHSIG = 1
# setns(2) flags, in the order they are joined: the user namespace first (it gives the
# capabilities the others need), the pid namespace last (it applies to children only)
NAMESPACES = (("user", 0x10000000), ("mnt", 0x00020000), ("cgroup", 0x02000000),
              ("ipc", 0x08000000), ("uts", 0x04000000), ("net", 0x40000000),
              ("pid", 0x20000000))
ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
SANDBOX_ENV = {**ENV, "HOME": "/tmp/work", "PYTHONDONTWRITEBYTECODE": "1"}  # as bwrap.command's
_libc = ctypes.CDLL(None, use_errno=True)


class Template:
    """The trusted side's handle on the template (`start`)."""

    def __init__(self, ctrl: socket.socket, pid: int):
        self.ctrl, self.pid = ctrl, pid

    @classmethod
    def start(cls, zygotes: int | None = None, preload: tuple[str, ...] = ()) -> "Template":
        """Fork the template. Call it before reading anything a submission must not
        see, from the main thread, with no other thread running. `zygotes`: how many
        it makes before it ends (the Gradescope run boots one sandbox: what the
        template alone still holds is then freed), None: until closed. `preload`: the
        lesson's installed libraries its zygote imports anyway (`_preload`)."""
        import torch

        torch.set_num_threads(1)  # as a fresh zygote sets it: inherited by every child
        _preload(preload)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ours.close()
                _serve(theirs, parent, zygotes)
            except BaseException:  # noqa: BLE001 - said on the trusted side's stderr
                traceback.print_exc()
                code = 70
            finally:
                os._exit(code)
        theirs.close()
        # What both now hold (torch, the modules imported so far) out of the garbage
        # collector's reach, here and in the template: a collection writes to every
        # object it walks, and each page it writes is copied, no longer shared.
        gc.freeze()
        return cls(ours, pid)

    def zygote(self, ctrl: socket.socket, stderr_fd: int, join: int | None,
               **options: object) -> int:
        """Make a zygote on `ctrl` (its end of the control socket; its stderr to
        `stderr_fd`), in the namespaces of process `join` (a bwrap holder's init) or
        none; `options`: zygote.start's. Its pid, outside any namespace of its own."""
        request = json.dumps({"op": "zygote", "join": join, **options}).encode()
        socket.send_fds(self.ctrl, [request], [ctrl.fileno(), stderr_fd])
        self.ctrl.settimeout(60)
        try:
            reply = self.ctrl.recv(4096)
        finally:
            self.ctrl.settimeout(None)
        if not reply:
            raise OSError("the template process has ended")
        return int(json.loads(reply)["pid"])

    def close(self) -> None:
        """End the template (its zygotes live on until their sandboxes close)."""
        self.ctrl.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass

    def __enter__(self) -> "Template":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _preload(names: tuple[str, ...]) -> None:
    """Import the lesson's preloaded libraries (course.yml's `preload`, e.g.
    transformers.activations) here, before the fork: the zygote then finds them
    imported, and the trusted side, which imports them again when it loads a solution
    to answer stand-ins, shares their pages with it instead of holding a second copy.
    Installed libraries only: the current folder (the course's, in a Gradescope run) is
    left off the path while they are imported, so no course file is read before the
    fork under a library's name."""
    here = {"", os.getcwd()}
    kept = sys.path[:]
    sys.path[:] = [p for p in kept if p not in here]
    try:
        for name in names:
            importlib.import_module(name)
    finally:
        sys.path[:] = kept


def _serve(ctrl: socket.socket, parent: int, zygotes: int | None) -> None:
    """The template: hold only torch's warm state, fork a zygote per request, end with
    the trusted process (its socket closes, or it dies) or after `zygotes` of them."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it ended before the line above
        return
    gc.freeze()  # (as the trusted process does: `Template.start`)
    os.setsid()  # Ctrl-C at the terminal is the trusted side's to handle
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    _close_all_but(ctrl.fileno())
    os.environ.clear()
    os.environ.update(ENV)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # zygotes are reaped at once
    made = 0
    while zygotes is None or made < zygotes:
        msg, fds, _, _ = socket.recv_fds(ctrl, 65536, 2)
        if not msg:
            return
        request = json.loads(msg)
        zygote_ctrl, stderr_fd = fds
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                ctrl.close()
                _become_zygote(request, zygote_ctrl, stderr_fd)
                code = 0
            except BaseException:  # noqa: BLE001 - said on the zygote's stderr
                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(code)
        os.close(zygote_ctrl)
        os.close(stderr_fd)
        ctrl.send(json.dumps({"event": "zygote", "pid": pid}).encode())
        made += 1


def _become_zygote(request: dict, ctrl_fd: int, stderr_fd: int) -> None:
    """In the template's fork: a fresh session, only its two descriptors, the
    sandbox's environment, then zygote.start (joining the sandbox first, if any)."""
    os.setsid()  # a group of its own, which `Made.kill` ends
    os.dup2(stderr_fd, 2)
    _close_all_but(ctrl_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    join = request.pop("join")
    os.environ.clear()
    os.environ.update(SANDBOX_ENV if join else ENV)
    sys.dont_write_bytecode = True
    from grader.inside import zygote

    enter = None
    if join is not None:
        ns = _namespaces(join)  # opened now: /proc is the host's until the first setns
        root = os.open(f"/proc/{join}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        enter = lambda: _join(ns, root)  # noqa: E731 - zygote.start calls it once
    op = request.pop("op")
    assert op == "zygote", op
    zygote.start(request.pop("probes"), ctrl_fd, request.pop("preload"), enter=enter,
                 **request)


def _namespaces(pid: int) -> list[tuple[int, int]]:
    """(descriptor, flag) of each namespace of `pid` that is not this process's own."""
    found = []
    for name, flag in NAMESPACES:
        theirs = f"/proc/{pid}/ns/{name}"
        if not os.path.exists(theirs) or os.stat(theirs).st_ino == os.stat(
                f"/proc/self/ns/{name}").st_ino:
            continue
        found.append((os.open(theirs, os.O_RDONLY | os.O_CLOEXEC), flag))
    return found


def _join(namespaces: list[tuple[int, int]], root: int) -> None:
    """Enter the sandbox: its namespaces, its root and /tmp, and (a fork: the pid
    namespace takes only children) its pid namespace. The fork outside waits for the
    zygote and ends with it."""
    for fd, flag in namespaces:
        if _libc.setns(fd, flag) != 0:
            raise OSError(ctypes.get_errno(), f"setns({flag:#x}) into the sandbox failed")
        os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    os.close(root)
    os.chdir("/tmp")
    pid = os.fork()
    if pid != 0:  # outside the sandbox's pid namespace: wait, and say how it ended
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    os.setsid()  # as bwrap's --new-session


def _close_all_but(keep: int) -> None:
    """Close every descriptor above stderr except `keep`."""
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


class Made:
    """A zygote the template made (`Template.zygote`): the part of Popen that a Sandbox
    uses, by a pidfd (it is the template's child, not this process's). `holder`: the
    bubblewrap holder whose namespaces it joined, ended with it."""

    def __init__(self, pid: int, stderr_fd: int, holder: subprocess.Popen | None = None):
        self.pid, self.holder = pid, holder
        self.returncode: int | None = None
        self.stderr = open(stderr_fd, "rb")
        self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        return self._ended(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._ended(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout or 0)
        return code

    def _ended(self, timeout: float | None) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], timeout)[0]:
            self.returncode = 0  # (its code is the template's to reap; ended is enough)
            os.close(self._pidfd)
            self._end_holder()
        return self.returncode

    def kill(self) -> None:
        """The zygote, its slots and children (those in a holder's sandbox end with it)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._end_holder()
        self.wait()

    def _end_holder(self) -> None:
        """The holder's stdin closed: it exits, and bwrap's init with it, which ends
        every process left in the sandbox's pid namespace."""
        holder, self.holder = self.holder, None
        if holder is None:
            return
        if holder.stdin is not None:
            holder.stdin.close()
        try:
            holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
