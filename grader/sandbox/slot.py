"""Trusted-side handles on a warm worker (`Slot`) and on one submission (`Session`).

A Slot owns one zygote (sandboxed or, when explicitly allowed, plain). A Session
imports one submission in a fresh child and forwards probe calls to it with a
wall-clock limit per call and a budget per submission. When the child dies (a
timeout, a crash, `os._exit`, a limit), the failing call raises `StudentError`
naming the cause and the next call transparently starts a new child, so one
test's crash costs that test only.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox import bwrap, protocol

BASE_UID = 61000
UID_COUNT = 4096


@dataclass(frozen=True)
class Limits:
    test_wall_s: float = 10.0
    submission_wall_s: float = 120.0
    cpu_s: int = 60
    memory_mb: int = 1024
    processes: int = 16
    file_size_mb: int = 8
    scratch_mb: int = 32
    output_kb: int = 64


class StudentError(Exception):
    """Something the submission did; shown to the student, costs the current test."""

    def __init__(self, kind: str, message: str, traceback: str = "", type_: str = ""):
        super().__init__(message)
        self.kind, self.message, self.traceback, self.type = kind, message, traceback, type_

    def as_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message,
                "traceback": self.traceback, "type": self.type}


class SandboxError(Exception):
    """The grader's own machinery failed; never blamed on a student."""


SIGNAL_CAUSES = {
    signal.SIGXCPU: "exceeded the CPU time limit of {cpu_s} s",
    signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
    signal.SIGBUS: "crashed with a bus error (SIGBUS)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGFPE: "crashed with a floating-point exception (SIGFPE)",
    signal.SIGXFSZ: "exceeded the file size limit of {file_size_mb} MiB",
}


def claim_uid() -> tuple[int, int]:
    """The lowest sandbox uid no live grader process on this host holds, and the
    locked file that holds it (released when the holder exits, however it exits).
    RLIMIT_NPROC counts a uid machine-wide: two runs must never share one."""
    lock_dir = Path("/run/lock" if os.access("/run/lock", os.W_OK) else "/tmp")
    for uid in range(BASE_UID, BASE_UID + UID_COUNT):
        fd = os.open(lock_dir / f"minimind-grader-uid-{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return uid, fd
    raise SandboxError(f"all {UID_COUNT} sandbox uids are in use on this host")


class Slot:
    """One warm, sandboxed worker. Start once, open many sessions one after another."""

    def __init__(self, probes: Path, sandboxed: bool = True,
                 preload: tuple[str, ...] = ("torch",), wait: bool = True):
        """Start the worker; with wait=False call `wait_ready` later (it boots
        meanwhile). Start it from the thread that will outlive it: bwrap dies with
        the thread that started it (PR_SET_PDEATHSIG)."""
        self.sandboxed = sandboxed
        self.uid, self._uid_lock = claim_uid() if sandboxed else (None, None)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = child.fileno()
        cmd = (bwrap.command(probes, self.uid, fd, list(preload)) if sandboxed
               else bwrap.plain_command(probes, fd, list(preload)))
        env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"} if not sandboxed else None
        self.proc = subprocess.Popen(cmd, pass_fds=[fd], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=env, start_new_session=True)
        child.close()
        self.ctrl = parent
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        try:
            self._expect("ready")
        except (OSError, SandboxError) as exc:
            err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.poll() is not None else ""
            self.close()
            raise SandboxError(f"the worker did not start: {exc} {err}") from None

    def _expect(self, event: str, timeout: float = 120) -> dict:
        self.ctrl.settimeout(timeout)
        try:
            data = self.ctrl.recv(65536)
        except socket.timeout:
            raise SandboxError(f"worker gave no '{event}' in {timeout} s") from None
        if not data:
            raise SandboxError("worker exited")
        msg = json.loads(data)
        if msg.get("event") != event:
            raise SandboxError(f"worker sent {msg!r}, expected {event}")
        return msg

    def spawn(self, limits: Limits) -> tuple[socket.socket, int]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        msg = json.dumps({"op": "spawn", "limits": limits.__dict__}).encode()
        socket.send_fds(self.ctrl, [msg], [theirs.fileno(), out_w])
        theirs.close()
        os.close(out_w)
        self._expect("spawned", 30)
        return ours, out_r

    def kill(self) -> dict:
        self.ctrl.send(b'{"op": "kill"}')
        return self.wait_exit()

    def wait_exit(self, timeout: float = 30) -> dict:
        return self._expect("exit", timeout)

    def open(self, source: str, filename: str, allowed_imports: list[str],
             limits: Limits) -> "Session":
        return Session(self, source, filename, allowed_imports, limits)

    def close(self) -> None:
        try:
            self.ctrl.close()
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            if self._uid_lock is not None:
                os.close(self._uid_lock)
                self._uid_lock = None


@dataclass
class _Output:
    """Keeps the first `cap` bytes a child writes, drains and drops the rest."""
    cap: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def pump(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as f:
            while chunk := f.read(65536):
                room = self.cap - len(self.data)
                self.data += chunk[:max(room, 0)]
                self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[… {self.dropped} more bytes of output were cut]"
        return text


class Session:
    """One submission loaded in the worker; call probes on it."""

    def __init__(self, slot: Slot, source: str, filename: str,
                 allowed_imports: list[str], limits: Limits):
        self.slot, self.limits = slot, limits
        self.source, self.filename, self.allowed = source, filename, allowed_imports
        self.started = time.monotonic()
        self.waited = 0.0  # wall time spent waiting on the student's code
        self.output = _Output(limits.output_kb * 1024)
        self.sock: socket.socket | None = None
        self.fatal: StudentError | None = None  # import failed: every call fails alike
        self.cpu_s = 0.0
        self.restarts = 0
        self.timed_out: dict[str, str] = {}  # probe -> where it first ran out of time
        self._pumps: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------
    def _remaining(self) -> float:
        # The budget counts only time spent waiting on the child, not the trusted
        # side's own work between calls (the reference outputs, computed lazily on
        # the first submission of a run, took ~20 s of the first student's budget).
        return self.limits.submission_wall_s - self.waited

    def _start(self, where: str) -> None:
        self.sock, out_r = self.slot.spawn(self.limits)
        pump = threading.Thread(target=self.output.pump, args=(out_r,), daemon=True)
        pump.start()
        self._pumps.append(pump)
        try:
            self._send(protocol.dumps({"source": self.source, "filename": self.filename,
                                       "allowed_imports": list(self.allowed)}),
                       "while importing your file")
            reply = self._receive("while importing your file")
        except StudentError as exc:
            self.fatal = exc
            raise
        if not reply["ok"]:
            self._stop()
            self.fatal = _error_from(reply["error"], self.limits)
            raise self.fatal

    def _stop(self) -> dict | None:
        if self.sock is None:
            return None
        self.sock.close()
        self.sock = None
        status = self.slot.kill()
        self.cpu_s += status.get("cpu_s") or 0.0
        return status

    def close(self) -> None:
        self._stop()
        for pump in self._pumps:
            pump.join(timeout=5)

    # -- calls ----------------------------------------------------------------------
    def call(self, probe: str, args: dict, where: str = "", frame: bytes | None = None) -> dict:
        """Run one probe in the child. Raises StudentError for anything it did wrong.
        `frame` is the request already serialised (the same for every student)."""
        if self.fatal is not None:
            raise self.fatal
        where = where or probe
        if probe in self.timed_out:  # spend the budget on other parts, not on a known hang
            raise StudentError("timeout", f"not run: the same code timed out after "
                               f"{self.limits.test_wall_s:g} s in {self.timed_out[probe]}")
        if self.sock is None:
            if self.restarts and self._remaining() <= 0:
                raise self._budget_error()
            self.restarts += 1
            self._start(where)
        self._send(frame or protocol.dumps({"probe": probe, "args": args}), f"in {where}")
        try:
            reply = self._receive(f"in {where}")
        except StudentError as exc:
            if exc.kind == "timeout":
                self.timed_out[probe] = where
            raise
        if not reply.get("ok"):
            raise _error_from(reply.get("error", {}), self.limits)
        return reply.get("result")

    def _budget_error(self) -> StudentError:
        return StudentError("timeout", "the submission used up its time budget of "
                            f"{self.limits.submission_wall_s:g} s; this test was not run")

    def _send(self, data: bytes, where: str) -> None:
        # _receive leaves whatever was left of its deadline on the socket; a send
        # gets a whole test's time (a child that stops reading must not block us).
        self.sock.settimeout(self.limits.test_wall_s)
        start = time.monotonic()
        try:
            protocol.send_bytes(self.sock, data)
        except (socket.timeout, TimeoutError):  # alive but not reading: not a crash
            self._stop()
            raise StudentError("timeout", f"timed out after {self.limits.test_wall_s:g} s "
                               f"{where} (your code stopped reading its input)") from None
        except OSError:  # the child is already gone
            status = self._stop() or {}
            raise StudentError("crash", _death_cause(status, self.limits, where)) from None
        finally:
            self.waited += time.monotonic() - start

    def _receive(self, where: str) -> dict:
        remaining = self._remaining()
        if remaining <= 0:
            self._stop()
            raise self._budget_error()
        timeout = min(self.limits.test_wall_s, remaining)
        start = time.monotonic()
        try:  # the deadline bounds the whole reply, however slowly it trickles in
            reply = protocol.recv(self.sock, deadline=start + timeout)
        except (socket.timeout, TimeoutError):
            self._stop()
            if timeout < self.limits.test_wall_s:  # cut short by the budget, not the test
                raise StudentError("timeout", "the submission used up its time budget of "
                                   f"{self.limits.submission_wall_s:g} s {where}") from None
            raise StudentError("timeout", f"timed out after {timeout:g} s {where}") from None
        except (EOFError, ConnectionError):
            status = self._stop() or {}
            raise StudentError("crash", _death_cause(status, self.limits, where)) from None
        except protocol.ProtocolError as exc:
            self._stop()
            raise StudentError("protocol", f"{exc} {where}") from None
        finally:
            self.waited += time.monotonic() - start
        if not isinstance(reply, dict) or "ok" not in reply:
            self._stop()
            raise StudentError("protocol", f"malformed reply {where}")
        return reply


def _death_cause(status: dict, limits: Limits, where: str) -> str:
    sig, code = status.get("signal"), status.get("code")
    if sig is not None:
        template = SIGNAL_CAUSES.get(sig)
        if template:
            return f"your code {template.format(**limits.__dict__)} {where}"
        if sig == signal.SIGKILL and (status.get("cpu_s") or 0) >= 0.9 * limits.cpu_s:
            # RLIMIT_CPU with soft == hard: the kernel sends SIGKILL, not SIGXCPU
            # (and rusage may read a little under the limit)
            return f"your code {SIGNAL_CAUSES[signal.SIGXCPU].format(**limits.__dict__)} {where}"
        if sig == signal.SIGKILL:
            return (f"your code was killed {where} (the {limits.memory_mb} MiB memory "
                    f"or {limits.cpu_s} s CPU limit)")
        return f"your code was killed by signal {signal.Signals(sig).name} {where}"
    return f"your code ended the process (exit status {code}) {where}"


def _error_from(err: dict, limits: Limits) -> StudentError:
    if not isinstance(err, dict):
        return StudentError("protocol", "malformed error report")
    kind = str(err.get("kind", "exception"))
    message = str(err.get("message", ""))
    type_ = str(err.get("type", ""))
    if kind == "memory":
        message = f"exceeded the {limits.memory_mb} MiB memory limit ({type_}: {message[:300]})"
    elif kind == "exit":
        message = f"your code called sys.exit({message})"
    elif kind == "not_implemented":
        message = "not implemented yet (NotImplementedError)" + (f": {message}" if message else "")
    else:
        message = f"{type_}: {message}" if type_ else message
    return StudentError(kind, message, str(err.get("traceback", "")), type_)
