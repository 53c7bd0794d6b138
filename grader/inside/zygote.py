"""The warm fork server that runs student code. It executes inside the sandbox.

It pays for `import torch` (and the lesson's probe module) once, then serves
slots: each slot is a fork of the warm process with its own uid and, sandboxed,
its own pid, mount and network namespaces (one bubblewrap boot is shared by every
slot of a run). A slot forks one child per submission, which confine.py confines
and harness.py runs: it imports the submission from a private scratch tmpfs and
answers probe calls on a socket that leads straight to the trusted side. Neither
the zygote nor a slot ever sees a submission's source or results; they only spawn,
reap and kill.

Started three ways: by path (`python -I zygote.py`, `main`), inside bwrap, where only
this folder and grader/__init__.py are bound and the `grader` on sys.path is the
host's package with nothing but grader/inside/ in it (for grader.inside.probekit), or
without bwrap in a container that refuses namespaces; unsandboxed only, as a fork of
the trusted process (`start`, slot.py's `fork`); or as a fork of the template
(grader/sandbox/template.py), which loads everything, then joins the sandbox bwrap
made (`start`'s `enter`). So the siblings it needs (confine, harness, slot_cgroup,
protocol) are loaded by path from this file's folder (`_load`), which works the same
every way, and are handed down in the run's `Zygote` state: no module state here.

Control messages (JSON over SOCK_SEQPACKET sockets, file descriptors passed with
SCM_RIGHTS). To the zygote (--ctrl-fd):
  <- {"event": "ready"}
  -> {"op": "hold"}                    + [a memfd: one frame, the graded requests]
  <- {"event": "held"}
  -> {"op": "slot", "uid": int}        + [the new slot's control socket]
  <- {"event": "slot"}
To a slot:
  -> {"op": "spawn", "limits": {...}}  + [data socket, output pipe]
  <- {"event": "spawned"}
  -> {"op": "kill"}                    kill the child and all it started
  <- {"event": "exit", "code": int|None, "signal": int|None, "cpu_s": float,
       "oom": bool, "oom_outside": bool, "scratch": bool, "harness": str}
       ("scratch": container mode, killed for writing past the scratch cap;
       "oom_outside": killed for memory the machine lacked while under its own cap;
       "harness": what the harness reported on a side pipe if it failed before the
       submission ran. These two are grader errors, never the student's.)
Only the standard library, torch and the probe module are imported here.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import traceback
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded by path at run time (see above)
    from grader.inside.confine import Handler, ScratchWatch
    from grader.inside.slot_cgroup import SlotCgroup

SCRATCH = "/tmp/work"  # sandboxed: a fresh tmpfs per child, in the slot's own mounts
CGROUP = "/grader/cgroup"  # the run's memory cgroup, where the trusted side made one
HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Zygote:
    """What the zygote holds for its run, built once in `start` and inherited by every
    slot and child: the sibling modules, the probe module and the mode. Of the hidden
    tests, only the graded requests' inputs (`held`, once the trusted side gives them):
    the same for every student, each child would be sent them all anyway; held, a child
    is asked for request k and neither side encodes, sends and decodes them per
    student. Never an expected result."""

    protocol: ModuleType
    confine: ModuleType
    harness: ModuleType
    cgroups: ModuleType
    probes: ModuleType
    sandboxed: bool
    userns: bool  # rootless: a user namespace per child, not a uid per slot
    container: bool  # no namespaces to be had: the container is the boundary
    cgroup: str
    scratch: str
    held: list = field(default_factory=list)  # the graded requests, by index


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
    ap.add_argument("--landlock-abi", type=int,
                    help="confine with this Landlock ABI at most (confine.capped_abi)")
    ap.add_argument("--scratch", default=SCRATCH,
                    help="unsandboxed: the run's private directory (a child's goes in it)")
    ap.add_argument("--package-root",
                    help="where the trusted side's `grader` package is (for grader.inside.probekit)")
    args = ap.parse_args()
    if args.package_root:  # before the interpreter's own finders (another install's)
        sys.path.insert(0, args.package_root)
    start(args.probes, args.ctrl_fd, list(filter(None, args.preload.split(","))),
          sandboxed=args.sandboxed, userns=args.userns, container=args.container,
          cgroup=args.cgroup, scratch=args.scratch, landlock_abi=args.landlock_abi)


def start(probes_path: str, ctrl_fd: int, preload: list[str], *, sandboxed: bool = False,
          userns: bool = False, container: bool = False, cgroup: str = CGROUP,
          scratch: str = SCRATCH, landlock_abi: int | None = None,
          enter: Callable[[], None] | None = None) -> None:
    """Warm up, say ready, serve slots until the trusted side hangs up. Run by `main`
    in a fresh interpreter; unsandboxed only, in a fork of the trusted process that
    has imported torch (slot.Sandbox's `fork`: one import for both sides); or in a
    fork of the template (sandbox/template.py), which has imported torch and read
    nothing private: `enter`, where given, then takes this process into the sandbox
    once everything is loaded, and the capabilities are shed after it."""
    confine = _load("grader_confine", "confine.py")
    if landlock_abi is not None:
        confine.cap_abi(landlock_abi)
    caps = confine.ZYGOTE_CAPS + (confine.USERNS_CAPS if userns else ())
    if sandboxed and enter is None:
        confine.shed_inheritance(caps)
    import torch  # paid once per worker, inherited by every child

    torch.set_num_threads(1)
    for name in preload:
        importlib.import_module(name)  # e.g. transformers.activations: not per student
    state = Zygote(protocol=_load("grader_protocol", "protocol.py"), confine=confine,
                   harness=_load("grader_harness", "harness.py"),
                   cgroups=_load("grader_slot_cgroup", "slot_cgroup.py"),
                   probes=_load("probes", probes_path), sandboxed=sandboxed, userns=userns,
                   container=container, cgroup=cgroup, scratch=scratch)
    if hasattr(state.probes, "warm_up"):  # first-use costs paid once here, not per child
        state.probes.warm_up()
    if enter is not None:
        enter()
        if sandboxed:
            confine.shed_inheritance(caps)
    # Keep the garbage collector out of everything imported so far: a child's first
    # collection would otherwise touch (and so copy-on-write) the whole warm heap.
    gc.collect()
    gc.freeze()
    ctrl = socket.socket(fileno=ctrl_fd)
    ctrl.send(b'{"event": "ready"}')
    _serve_slots(ctrl, state)


def _load(name: str, path: str) -> ModuleType:
    """The module at `path` (relative: a sibling of this file), under `name`."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, path))
    if spec is None or spec.loader is None:  # not a .py file: no loader for it
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _serve_slots(ctrl: socket.socket, state: Zygote) -> None:
    """Fork a slot per request, until the trusted side hangs up (which ends the
    sandbox, and with it every slot: they live in namespaces nested in ours)."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reap slots (and their forks) at once
    while True:
        msg, fds, _, _ = socket.recv_fds(ctrl, 65536, 1)
        if not msg:
            return
        request = json.loads(msg)
        if request["op"] == "hold":  # before any slot: every slot and child inherits them
            state = replace(state, held=_held(state, fds[0]))
            ctrl.send(b'{"event": "held"}')
            continue
        uid = request["uid"]
        (slot_fd,) = fds
        if os.fork() == 0:
            try:
                ctrl.close()
                if state.sandboxed:
                    state.confine.enter_slot_namespaces(SCRATCH)
                elif state.container:  # orphans come to the slot, to be reaped
                    state.confine.become_subreaper()
                _serve(socket.socket(fileno=slot_fd), state,
                       uid if state.sandboxed or state.container else None)
            except BaseException:  # noqa: BLE001 - a harness failure: say so on stderr
                traceback.print_exc()
                os._exit(state.harness.HARNESS_FAILED)
            os._exit(0)
        os.close(slot_fd)
        ctrl.send(b'{"event": "slot"}')


def _held(state: Zygote, fd: int) -> list:
    """The graded requests in the memfd `fd` (one frame: a list of {"probe", "args"}),
    out of the garbage collector's reach as the warm heap is."""
    with os.fdopen(fd, "rb") as f:
        held = state.protocol.loads(f.read())
    gc.collect()
    gc.freeze()
    return held


class _Child:
    """A submission's process, the pipe on which its harness reports a failure of its
    own (closed before the submission runs: what comes through it is never the
    student's doing), and its scratch directory."""

    def __init__(self, pid: int, failure: int, scratch: str, uid: int | None,
                 watch: ScratchWatch | None):
        self.pid, self.failure, self.scratch, self.uid = pid, failure, scratch, uid
        self.watch = watch  # container mode: its scratch cap (confine.ScratchWatch)
        self.over_scratch = False  # killed for writing past it

    def harness_failure(self, max_text: int) -> str:
        """What the harness reported before it died (read once the child is gone)."""
        os.set_blocking(self.failure, False)
        try:
            return os.read(self.failure, max_text).decode(errors="replace")
        except BlockingIOError:
            return ""


def _serve(ctrl: socket.socket, state: Zygote, uid: int | None) -> None:
    """A slot: one child at a time, spawned, reaped and killed as the trusted side asks."""
    heard = state.confine.deaf_slot()  # before any child: what a child may send it
    cgroup = None
    if uid is not None and os.path.isdir(state.cgroup):
        cgroup = state.cgroups.SlotCgroup(os.path.join(state.cgroup, f"slot-{uid}"))
        if state.sandboxed:
            state.confine.detach_cgroup(state.cgroup)
    counts_before = (0, 0)
    # SIGCHLD wakes the select through a pipe: a child's end is reported at once,
    # not at the next poll (a poll cost every submission ~20 ms of idle time).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    watch = None
    if state.container:  # whatever this uid left on the machine earlier is not kept
        state.confine.remove_leftovers(uid)
        watch = state.confine.ScratchWatch()
    child = None
    while True:
        watching = watch if child is not None and child.watch is not None else None
        waits: list[socket.socket | int] = [ctrl, wake_r, *([watching.fd] if watching else [])]
        ready, _, _ = select.select(waits, [], [], 0.25 if watching else 1.0)
        if wake_r in ready:
            os.read(wake_r, 4096)
            ready.remove(wake_r)
        if watching is not None and child is not None:  # woken by a write, or 0.25 s passed
            if watching.fd in ready:
                ready.remove(watching.fd)
            if not child.over_scratch and watching.over():
                child.over_scratch = True
                _kill_all(child, state)
        if child is not None:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                harness = child.harness_failure(state.protocol.MAX_TEXT)
                over_scratch = child.over_scratch
                _cleanup(child, state)
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
                    "scratch": over_scratch,
                    "harness": harness,
                }).encode())
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(ctrl, 65536, 4)
        if not msg:
            if child is not None:
                _cleanup(child, state)
            elif state.container:
                state.confine.remove_leftovers(uid)
            return
        request = json.loads(msg)
        if request["op"] == "spawn":
            if child is not None:  # the trusted side always kills first; be safe anyway
                _cleanup(child, state)
            if cgroup is not None:
                counts_before = cgroup.cap(request["limits"]["memory_mb"])
            child = _spawn(ctrl, fds, request["limits"], state, uid, cgroup, watch, heard)
            ctrl.send(b'{"event": "spawned"}')
        elif request["op"] == "kill" and child is not None:
            _kill_all(child, state)


def _spawn(ctrl: socket.socket, fds: list[int], limits: dict, state: Zygote,
           uid: int | None, cgroup: SlotCgroup | None, watch: ScratchWatch | None,
           heard: dict[int, Handler]) -> _Child:
    """Fork the child that runs one submission: confined, then its harness."""
    data_fd, out_fd = fds
    if state.sandboxed:  # rootless, the child's own uid is root's of the sandbox, mapped
        state.confine.fresh_scratch(SCRATCH, 0 if state.userns else uid, limits["scratch_mb"])
        scratch = SCRATCH
    else:  # the run's private directory (0700, made by the trusted side): one per child
        scratch = tempfile.mkdtemp(prefix="submission-", dir=state.scratch)
    if watch is not None:  # container mode
        assert uid is not None  # container mode gives every slot a uid of its own
        os.chown(scratch, uid, uid)
        watch.start(scratch, limits["scratch_mb"])
    failure_r, failure_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0  # (what it stays if even reporting a failure fails)
        try:
            harness = state.harness.Harness(failure_w, state.protocol, state.probes,
                                            state.held)

            def confine() -> None:
                ctrl.close()
                os.close(failure_r)
                state.confine.hear_signals(heard)
                state.confine.become_student(data_fd, out_fd, failure_w, limits, uid, cgroup,
                                             scratch, state.userns, state.container)

            code = harness.run(confine, data_fd, scratch)
        finally:
            os._exit(code)
    os.close(data_fd)
    os.close(out_fd)
    os.close(failure_w)
    return _Child(pid, failure_r, scratch, uid, watch)


def _kill_all(child: _Child, state: Zygote) -> None:
    if state.sandboxed:
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
        if state.container:
            assert child.uid is not None  # container mode gives every slot a uid of its own
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


def _cleanup(child: _Child, state: Zygote) -> None:
    _kill_all(child, state)
    try:
        os.waitpid(child.pid, 0)
    except ChildProcessError:
        pass
    os.close(child.failure)
    if state.sandboxed or state.container:  # the slot inherits every orphan: reap them all
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    if child.watch is not None:
        child.watch.stop()
    if state.sandboxed:
        state.confine.unmount(SCRATCH)
    else:
        shutil.rmtree(child.scratch, ignore_errors=True)
    if state.container:  # its files in the machine's shared folders, its IPC objects
        state.confine.remove_leftovers(child.uid, files=state.confine.LANDLOCK_ABI < 1)


if __name__ == "__main__":
    main()
