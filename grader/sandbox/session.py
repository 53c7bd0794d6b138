"""One submission in a slot: its child process, probe calls, limits and output.

A Session imports one submission in a fresh child and forwards probe calls to it
with a wall-clock limit per call and a budget per submission. When the child dies
(a timeout, a crash, `os._exit`, a limit), the failing call raises `StudentError`
naming the cause and the next call transparently starts a new child, so one
test's crash costs that test only.

Nothing received is trusted: every request carries a fresh nonce its reply must
echo (a reply to another request is the student's error, never a shifted verdict),
each reply is size-capped, all replies of a submission share a byte budget, and
every string of an error report is capped before it is used.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grader.inside import protocol
from grader.inside.confine import SCRATCH_FILES
from grader.sandbox.limits import WORKER_STOPPED, Limits, SandboxError, SlotLost, StudentError
from grader.text.strings import Said, say

if TYPE_CHECKING:
    from grader.sandbox.slot import SlotLike

MAX_REPLY = 16 * 1024 * 1024  # a correct reply is under 1 MiB
MAX_REPLY_JSON = 1024 * 1024  # an honest child's error strings are capped (MAX_TEXT)
MAX_TYPE = 200
KINDS = frozenset({"exception", "not_implemented", "memory", "exit", "import", "load",
                   "contract"})
_NOT_PROVIDED = re.compile(r"No module named '([A-Za-z_][\w]*)'")
# the i18n.yml key of the sentence for each signal that names its own cause
SIGNAL_CAUSES = {
    signal.SIGXCPU: "err_sigxcpu",
    signal.SIGSEGV: "err_sigsegv",
    signal.SIGBUS: "err_sigbus",
    signal.SIGABRT: "err_sigabrt",
    signal.SIGFPE: "err_sigfpe",
    signal.SIGXFSZ: "err_sigxfsz",
}


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

    def __init__(self, slot: SlotLike, source: str, filename: str,
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
        self.timed_out: dict[str, str] = {}  # probe -> the test it first ran out of time in
        self.received = 0  # bytes of replies read, against limits.received_mb
        self.over_budget: StudentError | None = None  # sent too much: every call fails
        # the grader's own failure (the machine ran out, the harness broke): every later
        # call fails alike, or each would start a child the machine cannot hold either
        self.broken: SandboxError | None = None
        self.last_reply_bytes = 0
        # answers stand-in call frames (grader/judge/standin.py) while a stand-in round runs,
        # or in every request of an assembly lesson, told the probe being served (some
        # stand-ins answer in one probe's requests only), with the answer's frame; None
        # at any other time, when such a frame ends the request
        self.stand_in: Callable[[protocol.Frame, str], list[protocol.Buffer]] | None = None
        self.serving = ""  # the probe of the request just sent
        self._nonce = 0  # the request the next reply must answer
        self._pumps: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------
    def _remaining(self) -> float:
        # The budget counts only time spent waiting on the child, not the trusted
        # side's own work between calls (the reference outputs, computed lazily on
        # the first submission of a run, took ~20 s of the first student's budget).
        return self.limits.submission_wall_s - self.waited

    def _start(self, where: Said) -> None:
        self.sock, out_r = self.slot.spawn(self.limits)
        pump = threading.Thread(target=self.output.pump, args=(out_r,), daemon=True)
        pump.start()
        self._pumps.append(pump)
        try:
            self._send(protocol.dumps({"source": self.source, "filename": self.filename,
                                       "allowed_imports": list(self.allowed)}),
                       say("where_importing"))
            reply = self._receive(say("where_importing"))
        except StudentError as exc:
            self.fatal = exc
            raise
        if not reply["ok"]:
            self._stop()
            self.fatal = _error_from(reply["error"], self.limits, self.allowed)
            raise self.fatal

    def _socket(self) -> socket.socket:
        """The child's socket: `_start` opens it before any request is sent."""
        if self.sock is None:
            raise RuntimeError("no child to ask: the session has not started one")
        return self.sock

    def _stop(self) -> dict | None:
        if self.sock is None:
            return None
        self.sock.close()
        self.sock = None
        try:
            status = self.slot.kill()
        except SlotLost:  # while this submission's child ran: its doing (SlotLost says why)
            self.fatal = StudentError(WORKER_STOPPED, say("err_worker_stopped"))
            raise self.fatal from None
        self.cpu_s += status.get("cpu_s") or 0.0
        if status.get("harness"):  # failed before the submission ran: never theirs
            self.broken = SandboxError("the grader could not start the submission: "
                                       + _text(status["harness"]))
        elif status.get("oom_outside"):  # within its cap: the machine was too small
            self.broken = SandboxError(
                f"the machine ran out of memory while the submission stayed under its "
                f"{self.limits.memory_mb} MiB limit (not the student's doing): give the "
                f"grader more memory, or lower limits.memory_mb")
        if self.broken is not None:
            raise self.broken
        return status

    def close(self) -> None:
        try:
            self._stop()
        except StudentError:  # the slot ended under the last child: `fatal` says so
            pass
        for pump in self._pumps:
            pump.join(timeout=5)

    @property
    def alive(self) -> bool:
        """Is the submission's child running, imported, and not cut off? (A call then
        needs no new child.)"""
        return self.sock is not None and self.fatal is None and self.broken is None \
            and self.over_budget is None

    def hangs(self) -> dict[str, str]:
        """The probes this submission ran out of time in, for calls made apart from the
        graded run (a trace): the same code is not run again to hang until its limit."""
        return dict(self.timed_out)

    def apart(self) -> Session:
        """A session of its own for the same submission (a fresh child of the same
        slot, its own budget), knowing its hangs."""
        other = Session(self.slot, self.source, self.filename, self.allowed, self.limits)
        other.timed_out = self.hangs()
        return other

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Calls that are not the graded run's (a trace): they spend a budget of their
        own (wall time, bytes received, probes known to hang: the graded run's hangs are
        known to them too, never theirs to it), and the graded run's is as it was after
        them."""
        kept = self.waited, self.received, self.timed_out, self.over_budget
        self.waited, self.received, self.timed_out = 0.0, 0, self.hangs()
        try:
            yield
        finally:
            self.waited, self.received, self.timed_out, self.over_budget = kept

    # -- calls ----------------------------------------------------------------------
    def call(self, probe: str, args: dict, where: str = "", frame: bytes | None = None) -> Any:
        """Run one probe in the child, and return its result (any JSON-like value the
        probe returns). Raises StudentError for anything it did wrong.
        `frame` is the request already serialised (the same for every student)."""
        if self.broken is not None:
            raise self.broken
        if self.fatal is not None:
            raise self.fatal
        if self.over_budget is not None:
            raise self.over_budget
        where = where or probe
        if probe in self.timed_out:  # spend the budget on other parts, not on a known hang
            raise StudentError("timeout", say("err_same_timeout", s=f"{self.limits.test_wall_s:g}",
                                              name=self.timed_out[probe]))
        said_where = say("where_in", name=where)  # once per call: it is on every call's path
        if self.sock is None:
            if self.restarts and self._remaining() <= 0:
                raise self._budget_error()
            self.restarts += 1
            self._start(said_where)
        self.serving = probe
        self._send(frame or protocol.dumps({"probe": probe, "args": args}), said_where)
        try:
            reply = self._receive(said_where)
        except StudentError as exc:
            if exc.kind == "timeout":
                self.timed_out[probe] = where
            raise
        if not reply.get("ok"):
            raise _error_from(reply.get("error", {}), self.limits, self.allowed)
        return reply.get("result")

    def spent(self) -> bool:
        """Whether the submission used up its time budget: what failed after that
        failed for the limit, not for anything another part did."""
        return self._remaining() <= 0

    def _budget_error(self) -> StudentError:
        return StudentError("timeout", say("err_budget", s=f"{self.limits.submission_wall_s:g}"))

    def _send(self, data: bytes, where: Said) -> None:
        # _receive leaves whatever was left of its deadline on the socket; a send
        # gets a whole test's time (a child that stops reading must not block us).
        self._socket().settimeout(self.limits.test_wall_s)
        self._nonce = int.from_bytes(os.urandom(8), "big")  # unguessable by a second writer
        start = time.monotonic()
        try:
            protocol.send_bytes(self._socket(), data, self._nonce)
        except (socket.timeout, TimeoutError):  # alive but not reading: not a crash
            self._stop()
            raise StudentError("timeout", say("err_not_reading", s=f"{self.limits.test_wall_s:g}",
                                              where=where)) from None
        except OSError:  # the child is already gone
            status = self._stop() or {}
            raise StudentError("crash", _death_cause(status, self.limits, where)) from None
        finally:
            self.waited += time.monotonic() - start

    def _receive(self, where: Said) -> dict:
        remaining = self._remaining()
        if remaining <= 0:
            self._stop()
            raise self._budget_error()
        timeout = min(self.limits.test_wall_s, remaining)
        start = time.monotonic()
        problem, deadline, trusted = None, start + timeout, 0.0
        try:  # the deadline bounds the whole reply, however slowly it trickles in
            frame = self._read_reply(deadline, where)
            while isinstance(frame.head["v"], dict) and "stand_in" in frame.head["v"]:
                spent = self._answer_stand_in(frame, where)
                deadline += spent  # the trusted side's own time is not the child's
                trusted += spent
                frame = self._read_reply(deadline, where)
            reply = frame.value()
        except (socket.timeout, TimeoutError):
            self._stop()
            if timeout < self.limits.test_wall_s:  # cut short by the budget, not the test
                raise StudentError("timeout", say("err_budget_where", where=where,
                                                  s=f"{self.limits.submission_wall_s:g}")) from None
            raise StudentError("timeout", say("err_timeout", s=f"{timeout:g}", where=where)) from None
        except (EOFError, ConnectionError):
            status = self._stop() or {}
            raise StudentError("crash", _death_cause(status, self.limits, where)) from None
        except protocol.ProtocolError as exc:
            self._stop()
            problem = say("err_protocol", reason=str(exc), where=where)  # raised below: exc's
            # frames hold the refused reply
        finally:
            self.waited += time.monotonic() - start - trusted
        if problem is not None:  # (the error is cached for the rest of the submission)
            raise StudentError("protocol", problem)
        if not isinstance(reply, dict) or "ok" not in reply:
            self._stop()
            raise StudentError("protocol", say("err_malformed_reply", where=where))
        return reply

    def _answer_stand_in(self, frame: protocol.Frame, where: Said) -> float:
        """Answer a stand-in's call frame, sent while the child serves the request just
        sent: during a stand-in round only (any other time the request fails, and the
        child is stopped: it waits for an answer that never comes). The seconds spent."""
        if self.stand_in is None:
            self._stop()
            raise StudentError("protocol", say("err_stand_in_refused", where=where))
        began = time.monotonic()
        answer = self.stand_in(frame, self.serving)
        protocol.send_buffers(self._socket(), answer, self._nonce)
        return time.monotonic() - began

    def _read_reply(self, deadline: float, where: Said) -> protocol.Frame:
        """The reply to the request just sent (or a stand-in's call frame), its JSON
        read: its nonce and size are checked before a byte of its body is read (or
        kept)."""
        size, nonce = protocol.recv_header(self._socket(), deadline)
        if nonce != self._nonce:
            self._stop()
            raise StudentError("protocol", say("err_wrong_request", where=where))
        if size > MAX_REPLY:
            self._stop()
            raise StudentError("protocol", say("err_reply_too_big", size=size, where=where,
                                               cap=MAX_REPLY))
        budget = self.limits.received_mb << 20
        if self.received + size > budget:
            self._stop()
            self.over_budget = StudentError(
                "protocol", say("err_received_budget", mb=self.limits.received_mb, size=size,
                                where=where))
            raise self.over_budget
        self.received += size
        self.last_reply_bytes = size
        return protocol.recv_frame(self._socket(), size, deadline, MAX_REPLY_JSON)


def _death_cause(status: dict, limits: Limits, where: Said) -> Said:
    sig, code = status.get("signal"), status.get("code")
    if status.get("scratch"):
        return say("err_scratch", mb=limits.scratch_mb, files=SCRATCH_FILES, where=where)
    if status.get("oom"):
        return say("err_oom", mb=limits.memory_mb, where=where)
    if sig is not None:
        if sig in SIGNAL_CAUSES:
            return say(SIGNAL_CAUSES[sig], **limits.__dict__, where=where)
        if sig == signal.SIGKILL and (status.get("cpu_s") or 0) >= 0.9 * limits.cpu_s:
            # SIGXCPU caught or ignored: the hard limit, a second later, sends SIGKILL
            # (and rusage may read a little under the limit)
            return say(SIGNAL_CAUSES[signal.SIGXCPU], **limits.__dict__, where=where)
        if sig == signal.SIGKILL:
            return say("err_killed", mb=limits.memory_mb, cpu_s=limits.cpu_s, where=where)
        return say("err_signal", name=signal.Signals(sig).name, where=where)
    return say("err_exit_status", code=code, where=where)


def _text(value: object, cap: int = protocol.MAX_TEXT) -> str:
    """A student's string as the grader may keep it: capped (protocol.loads has
    already made it valid UTF-8)."""
    text = value if isinstance(value, str) else ""
    return text if len(text) <= cap else text[:cap] + " […]"


def _error_from(err: dict, limits: Limits, allowed: Iterable[str] = ()) -> StudentError:
    """The child's error report, as the student sees it: a kind the grader knows
    (a child must not claim a timeout or a grader fault), every string capped."""
    if not isinstance(err, dict):
        return StudentError("protocol", "malformed error report")
    kind = err.get("kind")
    kind = kind if kind in KINDS else "exception"
    message = _text(err.get("message"))
    type_ = _text(err.get("type"), MAX_TYPE)
    if kind == "memory":
        message = say("err_memory", mb=limits.memory_mb, detail=f"{type_}: {message[:300]}")
    elif kind == "exit":
        message = say("err_sys_exit", code=message)
    elif kind == "not_implemented":
        message = (say("err_not_implemented_why", detail=message) if message
                   else say("err_not_implemented"))
    elif kind == "import" and (missing := _NOT_PROVIDED.fullmatch(message)) \
            and missing[1] not in allowed:  # the harness's import guard refused it
        message = say("err_not_provided", message=f"{type_}: {message}",
                      allowed=", ".join(sorted(allowed)))
    elif kind not in ("load", "contract"):  # the grader's own sentence needs no type in front
        message = f"{type_}: {message}" if type_ else message
    if "[Errno 28]" in message:  # ENOSPC: in the sandbox only the scratch fills up
        message = say("err_no_space", message=message, mb=limits.scratch_mb)
    return StudentError(kind, message, _text(err.get("traceback")), type_)
