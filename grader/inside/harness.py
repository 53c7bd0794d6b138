"""The child's harness: import the submission from its scratch, then answer probe
calls on the data socket, echoing each request's nonce. Runs inside the sandbox,
in the child the zygote forked for one submission, loaded by path (zygote.py says
why); only the standard library here (the protocol module is handed in).

Until the submission's code first runs, a failure is the harness's own and goes to
the failure pipe (`Harness.run`): the slot passes it on as a grader error. After,
whatever fails is in the student's output, theirs to see.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib.util
import os
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

MODULE_NAME = "submission"
TRACE = "trace"  # a request's flag: answer with the values its lines produced too
HARNESS_FAILED = 70  # a child's exit status when the harness failed (also reported aside)


class Harness:
    """One child's harness. `failure`: the pipe for its own failure, held until the
    submission runs. `held`: the graded requests the zygote holds, which a request
    names by index ({"held": k}) instead of carrying its inputs."""

    def __init__(self, failure: int, protocol: ModuleType, probes: ModuleType,
                 held: Sequence = ()):
        self.failure: int | None = failure
        self.protocol, self.probes, self.held = protocol, probes, held
        self.pid = os.getpid()  # the harness's own process (see `_answer`)

    def run(self, confine: Callable[[], None], data_fd: int, scratch: str) -> int:
        """Confine this process, then serve the submission; the exit status."""
        try:
            confine()
            self._serve_submission(socket.socket(fileno=data_fd), scratch)
        except BaseException:  # noqa: BLE001 - the harness's failure, or the student's
            return self._failed()
        return 0

    def _failed(self) -> int:
        """Report the exception being handled on the harness's pipe if the submission has
        not run yet (the student cannot have caused it); else in the output, theirs."""
        if self.failure is None:
            traceback.print_exc()
        else:
            os.write(self.failure, traceback.format_exc()[-self.protocol.MAX_TEXT:].encode())
        return HARNESS_FAILED

    def _close_failure(self) -> None:
        """The submission's code is about to run: nothing it causes may look like ours."""
        failure, self.failure = self.failure, None
        if failure is not None:
            os.close(failure)

    def _serve_submission(self, data: socket.socket, scratch: str) -> None:
        nonce, init = self.protocol.recv(data)
        path = os.path.join(scratch, init["filename"])
        with open(path, "w", encoding="utf-8") as f:
            f.write(init["source"])
        _guard_imports(init["allowed_imports"])
        self._close_failure()
        try:
            module = _import_submission(path)
            reply: dict = {"ok": True}
        except BaseException as exc:  # noqa: BLE001 - every failure is the student's to see
            reply = {"ok": False, "error": self._describe(exc, path)}
        self._answer(data, reply, nonce, path)
        if not reply["ok"]:
            return
        while True:
            try:
                nonce, request = self.protocol.recv(data)
            except EOFError:
                return
            if self.protocol.HELD in request:  # the trusted side's index: in range
                request = self.held[request[self.protocol.HELD]]
            kit: Any = sys.modules.get("grader.inside.probekit")  # loaded by the probes
            if kit is not None:  # its stand-ins ask on behalf of this request
                kit.channel = lambda frame, n=nonce: self._stand_in(data, frame, n)
            try:
                probe = getattr(self.probes, request["probe"])
                if request.get(TRACE):
                    reply = _traced(probe, module, request["args"], path)
                else:
                    reply = {"ok": True, "result": probe(module, **request["args"])}
            except BaseException as exc:  # noqa: BLE001 - the student's to see
                reply = {"ok": False, "error": self._describe(exc, path)}
            self._answer(data, reply, nonce, path)

    def _stand_in(self, data: socket.socket, frame: dict, nonce: int) -> object:
        """Send a stand-in's call frame (probekit.stand_in) bound to the request being
        served, and return the trusted side's answer to it."""
        if os.getpid() != self.pid:
            raise RuntimeError("a stand-in can be called from the harness's process only")
        self.protocol.send(data, frame, nonce)
        got, reply = self.protocol.recv(data)
        if got != nonce:
            raise RuntimeError("the answer to a stand-in named another request")
        return reply

    def _answer(self, data: socket.socket, reply: dict, nonce: int, path: str) -> None:
        """Answer request `nonce`, from the harness's own process only: a fork the
        submission made that returned into this loop ends silently here (two processes
        serving one socket would answer each other's requests)."""
        if os.getpid() != self.pid:
            os._exit(0)
        _flush_output()
        try:
            self.protocol.send(data, reply, nonce)
        except Exception as exc:  # e.g. a result torch cannot serialise
            self.protocol.send(data, {"ok": False, "error": self._describe(exc, path)}, nonce)

    def _describe(self, exc: BaseException, path: str) -> dict:
        return describe(exc, path, self.protocol.MAX_TEXT)


def _sibling(name: str) -> ModuleType:
    """A module of this folder, by path (as zygote.py loads this one), loaded with this
    module, before any child is forked and confined."""
    spec = importlib.util.spec_from_file_location(
        f"grader_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py"))
    if spec is None or spec.loader is None:  # not a .py file: no loader for it
        raise ImportError(f"cannot load {name}.py as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tracer = _sibling("tracer")


class _Discard:
    """Where the submission's prints go while it is traced: its tests printed them."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _traced(probe: Callable, module: ModuleType, args: dict, path: str) -> dict:
    """A probe's result with the values the submission's lines produced
    (grader/inside/tracer.py): feedback only, never a verdict."""
    with contextlib.redirect_stdout(_Discard()), contextlib.redirect_stderr(_Discard()):
        result, events, lines, error, leaves, raised = tracer.trace(path, probe, module,
                                                                    **args)
    return {"ok": True, "result": {"result": result, "trace": events, "lines": lines,
                                   "error": error, "leaves": leaves, "raised": raised}}


def _import_submission(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    if spec is None or spec.loader is None:  # not a .py file: no loader for it
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def _guard_imports(allowed: list[str]) -> None:
    """Give a clear error when the submission imports what the course does not provide."""
    real_import = builtins.__import__
    permitted = set(allowed) | set(sys.stdlib_module_names)

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and globals and globals.get("__name__") == MODULE_NAME:
            top = name.partition(".")[0]
            if top not in permitted:
                # the trusted side says what the environment provides (session.py)
                raise ModuleNotFoundError(f"No module named '{top}'", name=top)
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded


def syntax_lines(exc: SyntaxError) -> list[str]:
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
        width = (exc.end_offset or 0) - (exc.offset or 0)
    elif (exc.end_lineno or 0) > (exc.lineno or 0):  # to the end of this line
        width = len(code) - start
    else:
        width = 1
    return [*lines, f"    {code}\n", "    " + " " * start + "^" * max(width, 1) + "\n"]


def describe(exc: BaseException, path: str, max_text: int) -> dict:
    """The error as the student should see it: only frames from their own file, each
    text at most `max_text` characters."""
    try:
        return _describe_unguarded(exc, path, max_text)
    except BaseException:  # noqa: BLE001 - a hostile exception class (metaclass, properties)
        return {"kind": "exception", "type": "", "traceback": "",
                "message": "<the error your code raised could not be described>"}


def _describe_unguarded(exc: BaseException, path: str, max_text: int) -> dict:
    # str() first and guarded: a student's __str__ may raise anything (even
    # SystemExit), which used to escape here and end the child with status 70.
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "<the exception's message could not be shown>"
    kind = "exception"
    kit = sys.modules.get("grader.inside.probekit")  # loaded by the probes, if they use it
    if kit is not None and isinstance(exc, getattr(kit, "LoadError", ())):
        kind = "load"  # the grader's loader refused the module: not the student's raise
    elif kit is not None and isinstance(exc, getattr(kit, "ContractError", ())):
        kind = "contract"  # a probe says what the module lacks: not the student's raise
    elif isinstance(exc, NotImplementedError):
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
        lines += syntax_lines(exc)
    return {
        "kind": kind,
        "type": type(exc).__name__[:200],
        "message": message[:max_text],
        "traceback": "".join(lines).replace(os.path.dirname(path) + "/", "")[:max_text],
    }
