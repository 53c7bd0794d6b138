"""Trusted-side handles on the warm sandbox (`Sandbox`) and its slots (`Slot`).

A Sandbox is one zygote: one bubblewrap boot (or, when explicitly allowed, a
plain process) that pays for torch and the lesson's imports once. Each Slot is a
fork of it with its own uid and namespaces, serving one submission at a time
(a `session.Session` runs one submission on a slot). Nothing here imports torch, so the sandbox boots
while the grader's own process is still importing it; except unsandboxed, where the
zygote may be a fork of this process (`_fork_zygote`), which imports it first, once
for both. Given a template (the Gradescope run), the zygote is made from it instead
(`Sandbox._from_template`).
"""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Protocol

from grader.inside import confine
from grader.sandbox import bwrap, cgroup
from grader.sandbox.limits import Limits, SandboxError, SlotLost
from grader.sandbox.template import Made, Template

BASE_UID, UID_COUNT = bwrap.SANDBOX_UIDS  # (container mode's user namespace maps them)
# the modes whose zygote a template makes, when the run has one (`Sandbox`)
TEMPLATED = ("container", "none")
HANG_UP_S = 60  # s a closing slot may take to clean up before its uid is freed anyway


LOCK_DIR = Path("/run/minimind-grader")  # root's alone: no one else can plant a file


def claim_uid(lock_dir: Path = LOCK_DIR, skip: frozenset[int] = frozenset()) -> tuple[int, int]:
    """The lowest sandbox uid no live grader process on this host holds, but those in
    `skip`, and the locked file that holds it (released when the holder exits, however
    it exits).
    RLIMIT_NPROC counts a uid machine-wide: two runs must never share one. As root,
    in a folder only root may write: a lock that is not a plain file of ours (a link,
    a folder, a fifo) is passed over, and nothing is ever made through a link."""
    folder = _lock_folder(lock_dir)
    try:
        for uid in range(BASE_UID, BASE_UID + UID_COUNT):
            fd = None if uid in skip else _lock(folder, f"uid-{uid}.lock")
            if fd is not None:
                return uid, fd
    finally:
        os.close(folder)
    raise SandboxError(f"all {UID_COUNT} sandbox uids are in use on this host")


def _lock_folder(path: Path) -> int:
    """The lock folder, opened (made if missing): a real folder of this user's that
    no one else may write, else a clear refusal."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot use the sandbox's lock folder {path}: {exc}") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise SandboxError(f"the sandbox's lock folder {path} is not this user's alone "
                           "(others may write it): remove it, and the grader makes it again")
    return fd


def _lock(folder: int, name: str) -> int | None:
    """The lock `name` in `folder`, made if missing and held (None: taken by a live
    run, or not a plain file of ours)."""
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                     | os.O_NONBLOCK, 0o600, dir_fd=folder)
    except OSError:  # a link (ELOOP), a folder (EISDIR), ...
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
            raise BlockingIOError
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def available(allow_unsandboxed: bool, support: bwrap.Support) -> bool:
    """True to sandbox (`support`: what `bwrap.probe` found); False only when the
    caller explicitly allowed running without."""
    reason = support.reason
    if reason is None:
        return True
    if allow_unsandboxed:
        return False
    raise RuntimeError(f"cannot sandbox student code: {reason}. Or pass --unsandboxed to "
                       "grade trusted work without isolation")


def _keep_from_submissions(probes: Path, scratch: Path, private: tuple[Path, ...]) -> None:
    """Container mode: no mount namespace hides the grader's files, so the course's
    folder (solutions, hidden tests), the class and OUT the run was given (`private`:
    classmates' files, results and pages, and for the Gradescope run the autograder's
    submission and results folders) are made readable by their owner only,
    but for what the interpreter may import while a submission runs (a virtualenv in
    the course's folder: torch imports parts of itself lazily); the run's scratch
    folder may be crossed, not listed, to reach a child's own."""
    course = next((p for p in probes.resolve().parents if (p / "course.yml").exists()), None)
    closed = [p.resolve() for p in filter(None, [course, *private]) if p.exists()]
    kept = {Path(p) for p in bwrap.interpreter_paths()}
    kept |= {p.resolve() for p in kept}
    _open_way(kept, closed)
    for path in closed:
        _close(path, kept)
    scratch.chmod(0o711)


def _open_way(kept: set[Path], closed: list[Path]) -> None:
    """Every folder above the `kept` paths that others may not cross (a Python
    installed under /root) made crossable, not listable, so that the submission's uid
    reaches the interpreter's modules; folders in `closed` paths are `_close`'s. Left
    so: a run that closed them again at its end would break the lazy imports of
    another run still grading in the same container."""
    for path in sorted(kept):
        for folder in reversed(path.parents):
            if any(folder == c or c in folder.parents for c in closed):
                break
            mode = stat.S_IMODE(folder.stat().st_mode)
            if not mode & 0o001:
                folder.chmod(mode | 0o001)


def _close(path: Path, kept: set[Path]) -> None:
    """`path` made its owner's alone, but for the ways down to the `kept` paths in it:
    a folder on one may be crossed, not listed, and all else in it is closed the same
    way. (A link is never followed: what it leads to is closed where it lies, or not
    the run's to close.)"""
    inside = {k for k in kept if path in k.parents}
    if path in kept:
        return
    mode = path.stat().st_mode & 0o700
    if not inside:
        path.chmod(mode)
        return
    path.chmod(mode | 0o011)
    for entry in path.iterdir():
        if not entry.is_symlink():
            _close(entry, inside)


def _expect(sock: socket.socket, event: str, timeout: float) -> dict:
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except socket.timeout:
        raise SandboxError(f"worker gave no '{event}' in {timeout} s") from None
    if not data:
        raise SlotLost("worker exited")
    msg = json.loads(data)
    if msg.get("event") != event:
        raise SandboxError(f"worker sent {msg!r}, expected {event}")
    return msg


def forkable(mode: str) -> bool:
    """May the zygote be a fork of this process, in `mode` (a `bwrap.Support` mode, or
    "none": unsandboxed)? Only unsandboxed, where a submission runs as this user and
    could read all of this process anyway. Everywhere else it is a fresh exec, or a
    fork of a template that forked before anything was read (sandbox/template.py): a
    fork of this process would hold whatever it ever held (the course, its roster, the
    class), even where no reference to it is left."""
    return mode == "none"


def _landlock_abi() -> int:
    """The Landlock ABI this run confines with (confine.capped_abi)."""
    try:
        return confine.capped_abi(dict(os.environ))
    except ValueError as exc:
        raise SandboxError(str(exc)) from None


def _confine_note(mode: str, landlock_abi: int) -> str:
    """What a TA must know of how far a child is kept to its scratch folder in `mode`
    ("container": container mode without namespaces): that takes Landlock there
    (confine.write_only_beneath)."""
    if mode != "container" or landlock_abi >= 1:
        return ""
    return ("container mode without Landlock (this kernel, or the container's seccomp "
            "profile, refuses it): while a submission runs it may write wherever its uid "
            "may (/tmp, /dev/shm, ...), outside its scratch cap; after each submission the "
            "grader removes every file and IPC object of that uid in the machine's shared "
            "folders (/tmp, /var/tmp, /dev/shm, /run/lock)")


def _memfd_of(name: str, data: bytes) -> int:
    """A memory file holding `data`, read from its start (what bwrap's --ro-bind-data
    reads a copy from)."""
    fd = os.memfd_create(name.rsplit("/", 1)[-1], os.MFD_CLOEXEC)
    os.write(fd, data)  # (a file's write of tens of KiB is whole)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _Forked:
    """A zygote forked from this process: the part of Popen that Sandbox uses."""

    def __init__(self, pid: int, stderr_fd: int):
        self.pid = pid
        self.returncode: int | None = None
        self.stderr = open(stderr_fd, "rb")

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        start = time.monotonic()
        while (code := self.poll()) is None:
            if timeout is not None and time.monotonic() > start + timeout:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout)
            time.sleep(0.01)
        return code


def _fork_zygote(child: socket.socket, probes: Path, preload: tuple[str, ...],
                 scratch: str) -> _Forked:
    """Start the unsandboxed zygote as a fork of this process once it has imported
    torch: one import serves both sides (half the CPU on one core, and the pages are
    shared). Call it from the main thread, with no other thread running."""
    import torch  # noqa: F401 - the point of forking: imported once, for both sides

    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the zygote: a fresh session, only its socket, a clean environment
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(err_w, 2)
            keep = {0, 1, 2, child.fileno()}
            for fd in map(int, os.listdir("/proc/self/fd")):
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass  # the listing's own descriptor, already gone
            os.environ.clear()
            os.environ.update({"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
            from grader.inside import zygote

            zygote.start(str(probes), child.fileno(), list(preload), scratch=scratch)
        except BaseException:  # noqa: BLE001 - reported on the stderr pipe
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(70)
        os._exit(0)
    os.close(err_w)
    return _Forked(pid, err_r)


class LessonFiles(Protocol):
    """What a sandbox needs of a course's lesson (config.Lesson): its probes, and the
    modules every slot imports once."""

    @property
    def probes(self) -> Path: ...

    preload: list[str]


class CourseFolder(Protocol):
    """Where a course's relative paths start (config.Course.path)."""

    def path(self, p: Path) -> Path: ...


class Sandbox:
    """The warm zygote. It starts booting at once; `slot()` waits for it to be ready.
    Start it from the thread that will outlive it: bwrap dies with the thread that
    started it (PR_SET_PDEATHSIG). `fork`: unsandboxed, the zygote may be a fork of
    this process (`forkable`, `_fork_zygote`); sandboxed, it never is.
    `private`: the class and OUT, closed to submissions in container mode. `support`:
    what the caller's `bwrap.probe` found, when it has probed (else probed here).
    `template`: in container mode and unsandboxed, the zygote is made from it
    (sandbox/template.py): torch's pages shared, nothing private held."""

    @classmethod
    def for_lesson(cls, course: CourseFolder, lesson: LessonFiles, sandboxed: bool, *,
                   fork: bool = False, private: tuple[Path, ...] = (),
                   support: bwrap.Support | None = None,
                   template: Template | None = None) -> Sandbox:
        """The sandbox a lesson's submissions run in, booted from the lesson's probes
        with its preloaded modules: the one way every command boots one."""
        return cls(course.path(lesson.probes), sandboxed, tuple(lesson.preload), fork=fork,
                   private=private, support=support, template=template)

    def __init__(self, probes: Path, sandboxed: bool = True,
                 preload: tuple[str, ...] = ("torch",), fork: bool = False,
                 private: tuple[Path, ...] = (), support: bwrap.Support | None = None,
                 template: Template | None = None):
        self.sandboxed = sandboxed
        # how this sandbox confines, for its life (what records say: "sandbox")
        if sandboxed and support is None:
            support = bwrap.probe()
        if sandboxed and (support is None or support.mode is None):
            raise SandboxError(f"cannot sandbox: {support and support.reason}")
        self.mode: str = support.mode if sandboxed and support and support.mode else "none"
        # container mode: bwrap in a user namespace of ours, or (`refused`) no namespaces
        self.refused = support.refused if sandboxed and support else None
        self.landlock_abi = _landlock_abi()  # before anything is made: it may refuse
        cap = self.landlock_abi if self.landlock_abi < confine.LANDLOCK_ABI else None
        # Rootless, every child runs as the one uid the user has: its uid number inside
        # (a name for its processes and cgroup) need not be claimed from other runs.
        self._inner_uids = itertools.count(BASE_UID)
        self._served: set[int] = set()  # root and container modes: the uids claimed
        # The sum of a submission's processes is capped by a memory cgroup where the
        # machine has one to give; `memory_note` says when it has not.
        self.cgroup_path, self.memory_note = cgroup.create() if sandboxed else (None, "")
        # Unsandboxed, submissions are written here: a directory only this user can
        # enter, made for this run (a fixed path is another user's, or a symlink).
        plain = not sandboxed or support is None or not support.namespaced
        self.confine_note = _confine_note(self.mode, self.landlock_abi) if plain else ""
        # (a scratch of its own exactly when plain)
        scratch = tempfile.mkdtemp(prefix="minimind-grader-") if plain else None
        self.scratch = scratch
        if scratch is not None and self.mode == "container":
            _keep_from_submissions(probes, Path(scratch), private)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = child.fileno()
        self.forked = plain and fork and forkable(self.mode)
        self.proc: subprocess.Popen | _Forked | Made
        if self.forked and scratch is not None:
            self.proc = _fork_zygote(child, probes, preload, scratch)
        elif template is not None and self.mode in TEMPLATED:
            self.proc = self._from_template(template, child, probes, preload, cap)
        else:
            userns = (bwrap.UserNamespace() if self.mode == "container" and not plain
                      else None)
            copies = {} if plain else {inside: _memfd_of(inside, data) for inside, data
                                       in bwrap.copies(probes).items()}
            try:
                cmd = (bwrap.plain_command(probes, fd, list(preload), scratch,
                                           self.mode == "container", self.cgroup_path, cap)
                       if scratch is not None else
                       bwrap.command(probes, fd, list(preload), self.cgroup_path,
                                     userns=self.mode == "userns", landlock_abi=cap,
                                     userns_fd=userns.fd if userns else None,
                                     copy_fds=copies))
                env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"} if plain else None
                self.proc = subprocess.Popen(
                    cmd, pass_fds=[fd, *([userns.fd] if userns else []), *copies.values()],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE, env=env, start_new_session=True)
            finally:  # bwrap holds its own descriptor of the namespace, and its copies
                if userns is not None:
                    userns.close()
                for copy in copies.values():
                    os.close(copy)
        child.close()
        self.ctrl = parent
        self._ready = False
        # request key -> the frame that asks a child for it by index (`hold`)
        self.held: dict[str, bytes] = {}

    def _from_template(self, template: Template, child: socket.socket, probes: Path,
                       preload: tuple[str, ...], cap: int | None) -> Made:
        """The zygote, forked from `template`: without namespaces, that fork is the
        zygote; else it joins a sandbox that bwrap makes around a holder (`_holder`)."""
        options: dict[str, object] = {"probes": str(probes), "preload": list(preload),
                                      "landlock_abi": cap}
        holder, join = None, None
        if self.scratch is not None:
            options.update(container=self.mode == "container", scratch=self.scratch)
            if self.cgroup_path is not None:
                options["cgroup"] = str(self.cgroup_path)
        else:
            holder, join = self._holder(probes, preload, cap)
            options["sandboxed"] = True
        err_r, err_w = os.pipe()
        try:
            pid = template.zygote(child, err_w, join, **options)
        except BaseException:
            os.close(err_r)
            if holder is not None:
                holder.kill()
                holder.wait()
            raise
        finally:
            os.close(err_w)
        return Made(pid, err_r, holder)

    def _holder(self, probes: Path, preload: tuple[str, ...],
                cap: int | None) -> tuple[subprocess.Popen, int]:
        """bwrap's sandbox, made as for a fresh zygote, around a holder process; and the
        pid of its first process, whose namespaces the zygote joins."""
        userns = bwrap.UserNamespace() if self.mode == "container" else None
        info_r, info_w = os.pipe()
        try:
            cmd = bwrap.command(probes, -1, list(preload), self.cgroup_path,
                                landlock_abi=cap, userns_fd=userns.fd if userns else None,
                                holder=info_w)
            holder = subprocess.Popen(cmd, pass_fds=[info_w, *([userns.fd] if userns else [])],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, start_new_session=True)
        finally:  # bwrap holds its own descriptors of both now
            os.close(info_w)
            if userns is not None:
                userns.close()
        with open(info_r, "rb") as info:
            text = b""
            while b"}" not in text and (chunk := info.read1(4096)):
                text += chunk
        ready = holder.stdout.readline() if holder.stdout is not None else b""
        if ready != b"ready\n" or b"}" not in text:
            holder.kill()
            _, err = holder.communicate()
            raise SandboxError(f"the sandbox did not start: {err.decode(errors='replace')[-2000:]}")
        return holder, int(json.loads(text)["child-pid"])

    def wait_ready(self) -> None:
        if self._ready:
            return
        try:
            _expect(self.ctrl, "ready", 120)
        except (OSError, SandboxError) as exc:
            stderr = self.proc.stderr  # (a pipe, always: Popen's stderr=PIPE, or _Forked's)
            err = (stderr.read().decode(errors="replace")[-2000:]
                   if self.proc.poll() is not None and stderr is not None else "")
            self.close()
            raise SandboxError(f"the worker did not start: {exc} {err}") from None
        self._ready = True

    def hold(self, requests: dict[str, dict]) -> None:
        """Give the zygote the graded requests ({key: {"probe", "args"}}, the same for
        every student): the slots made after this inherit them, and their children are
        asked for one by index, so its inputs are not sent, received and decoded per
        student. Every child is sent these inputs anyway; no expected result goes with
        them. A slot made earlier keeps what was held when it was forked."""
        from grader.inside import protocol  # torch: imported by now, never before a boot

        self.wait_ready()
        fd = os.memfd_create("graded-requests", os.MFD_CLOEXEC)
        try:
            with open(fd, "wb", closefd=False) as f:
                for part in protocol.encode(list(requests.values())):
                    f.write(part)
            os.lseek(fd, 0, os.SEEK_SET)
            socket.send_fds(self.ctrl, [b'{"op": "hold"}'], [fd])
        finally:
            os.close(fd)
        _expect(self.ctrl, "held", 30)
        self.held = {key: protocol.dumps({protocol.HELD: i}) for i, key in enumerate(requests)}

    def slot(self) -> "Slot":
        """A new slot: a fork of the warm zygote, under a uid no other slot holds."""
        self.wait_ready()
        uid, lock = self._claim_uid()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self.ctrl, [json.dumps({"op": "slot", "uid": uid}).encode()],
                            [theirs.fileno()])
            _expect(self.ctrl, "slot", 30)
        except BaseException:
            ours.close()
            if lock is not None:
                os.close(lock)
            raise
        finally:
            theirs.close()
        return Slot(ours, self, uid if self.sandboxed else None, lock, self.held)

    def _claim_uid(self) -> tuple[int, int | None]:
        """The slot's uid (and the lock that holds it on this host, as root): one that
        no earlier slot of this sandbox had, since a slot's memory cgroup is named for
        its uid and made once (a sandbox that opens slots after closing others, as
        the tests' shared one does, would otherwise meet the old one's)."""
        if self.mode in ("root", "container"):
            uid, lock = claim_uid(skip=frozenset(self._served))
            self._served.add(uid)
            return uid, lock
        return (next(self._inner_uids), None) if self.sandboxed else (0, None)

    def sole_slot(self) -> "Slot":
        """The sandbox's only slot, which closes the sandbox when it closes."""
        try:
            slot = self.slot()
        except BaseException:
            self.close()
            raise
        slot.owns_sandbox = True
        return slot

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the zygote and every slot still open (they live in its namespaces)."""
        try:
            self.ctrl.close()
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                if isinstance(self.proc, Made):
                    self.proc.kill()
                else:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
            if self.cgroup_path is not None:
                cgroup.remove(self.cgroup_path)
                self.cgroup_path = None
            if self.proc.stderr is not None:  # (always: a pipe)
                self.proc.stderr.close()
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
                self.scratch = None


class SlotLike(Protocol):
    """What a session and its record use of a slot: a `Slot`, or a stand-in that takes
    one when the first child is spawned (run/pool.py's `_LazySlot`)."""
    sandbox: Sandbox
    sandboxed: bool
    held: dict[str, bytes]

    def spawn(self, limits: Limits) -> tuple[socket.socket, int]: ...

    def kill(self) -> dict: ...


class Slot:
    """One warm worker: opens sessions one after another (see `Sandbox.slot`)."""

    def __init__(self, ctrl: socket.socket, sandbox: Sandbox, uid: int | None,
                 uid_lock: int | None, held: dict[str, bytes]):
        self.ctrl, self.sandbox, self.uid = ctrl, sandbox, uid
        self.sandboxed = sandbox.sandboxed
        # request key -> the frame that asks a child for it: what the zygote held when it
        # forked this slot (`Sandbox.hold`; a later hold is its later slots' alone)
        self.held = held
        self._uid_lock = uid_lock
        self.owns_sandbox = False  # close the sandbox with this slot (`sole_slot`)
        self.lost = False  # its server ended while a child ran (`kill`): replace the slot

    def spawn(self, limits: Limits) -> tuple[socket.socket, int]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        msg = json.dumps({"op": "spawn", "limits": limits.__dict__}).encode()
        try:
            try:
                socket.send_fds(self.ctrl, [msg], [theirs.fileno(), out_w])
            finally:  # the child's ends are the zygote's now, or no one's
                theirs.close()
                os.close(out_w)
            _expect(self.ctrl, "spawned", 30)
        except BaseException:  # a dead worker: our ends would be left open
            ours.close()
            os.close(out_r)
            raise
        return ours, out_r

    def kill(self) -> dict:
        """Kill the child and all it started; its exit status. SlotLost: the slot's
        server is gone, and with it the child."""
        try:
            self.ctrl.send(b'{"op": "kill"}')
            return self.wait_exit()
        except (SlotLost, OSError) as exc:
            self.lost = True
            raise SlotLost(f"the worker stopped ({exc})") from None

    def wait_exit(self, timeout: float = 30) -> dict:
        return _expect(self.ctrl, "exit", timeout)

    def alive(self) -> bool:
        """Is the slot's server still there? (It never speaks unasked: any EOF is death.)"""
        self.ctrl.setblocking(False)
        try:
            return self.ctrl.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return self.sandbox.proc.poll() is None
        except OSError:
            return False
        finally:
            self.ctrl.setblocking(True)

    def close(self) -> None:
        """Hang up: the slot kills its last child, removes what its uid left (container
        mode) and exits; only then is its uid freed. Freed at once, another run could
        claim the uid while this slot still cleaned up, and the slot removed that run's
        files, which the uid owns as well (a scratch folder, gone before its child could
        enter it: seen once with two container-mode runs at a time, on a loaded
        machine)."""
        try:
            self._hang_up()
        finally:
            if self._uid_lock is not None:
                os.close(self._uid_lock)
                self._uid_lock = None
            if self.owns_sandbox:
                self.sandbox.close()

    def _hang_up(self) -> None:
        """Tell the slot to end, and wait until it has: its end of the socket closes when
        it exits (its children close theirs before a submission runs)."""
        try:
            self.ctrl.shutdown(socket.SHUT_WR)
            self.ctrl.settimeout(HANG_UP_S)
            while self.ctrl.recv(65536):  # a last child's exit, which no one awaits now
                pass
        except OSError:  # gone already (a dead sandbox), or stuck past HANG_UP_S
            pass
        finally:
            self.ctrl.close()


def open_slot(probes: Path, sandboxed: bool = True,
              preload: tuple[str, ...] = ("torch",), fork: bool = False,
              support: bwrap.Support | None = None) -> Slot:
    """A sandbox with a single slot, closed with it (one-off uses, tests)."""
    return Sandbox(probes, sandboxed, preload, fork, support=support).sole_slot()
