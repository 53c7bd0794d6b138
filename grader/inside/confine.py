"""How the zygote, its slots and each submission's child are confined. Runs inside
the sandbox, loaded by path (zygote.py says why); only the standard library here.

The zygote sheds what it inherited (`shed_inheritance`); a slot takes its own pid,
mount and network namespaces (`enter_slot_namespaces`); a child, in this order, takes
its cgroup, closes every other descriptor, takes its rlimits, its own user (rootless),
IPC and cgroup namespaces, an empty keyring, the slot's uid with no capability, writes
beneath its scratch only (Landlock), and the syscall allowlist of syscalls.py, the
same in every mode (`become_student`). In container mode without namespaces (a
container that refuses even a user namespace of the grader's), where no tmpfs can be
mounted, the slot keeps the scratch cap (`ScratchWatch`) and removes what a
child's uid left in the machine's shared folders (`remove_leftovers`). Rootless, every child runs as the one uid the user has, so
each makes a user namespace of its own (`_own_user_namespace` says why).
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import resource
import shutil
import signal
import stat
import struct
import sys
from collections.abc import Callable, Iterator
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded by path at run time (zygote.py says why)
    from grader.inside.slot_cgroup import SlotCgroup

# a signal's disposition, as signal.signal takes and returns it
Handler = Callable[[int, FrameType | None], Any] | int | None

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
MNT_DETACH = 2
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
PR_CAPBSET_DROP = 24
# What the zygote and its slots use (bwrap.KEPT_CAPS less CAP_SETPCAP): CAP_KILL,
# CAP_SETGID, CAP_SETUID, CAP_SYS_ADMIN
ZYGOTE_CAPS = (5, 6, 7, 21)
USERNS_CAPS = (31,)  # rootless also CAP_SETFCAP (bwrap.USERNS_CAPS says why)
KEYCTL_JOIN_SESSION_KEYRING = 1
CAP_VERSION_3 = 0x20080522
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2

libc = ctypes.CDLL(None, use_errno=True)


def _load_syscalls() -> ModuleType:
    """The allowlist's module, a sibling loaded by path (as this one is)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "syscalls.py")
    spec = importlib.util.spec_from_file_location("grader_syscalls", path)
    if spec is None or spec.loader is None:  # not a .py file: no loader for it
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


syscalls = _load_syscalls()
MACHINE = os.uname().machine


def shed_inheritance(caps: tuple[int, ...]) -> None:
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
    column = syscalls.MACHINES.get(MACHINE, (None,))[0]
    nr = None if column is None else syscalls.DENIED["keyctl"][column]
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


# The one signal a slot handles: a child's end wakes it (zygote.py's `_serve`)
SLOT_HANDLED = (signal.SIGCHLD,)


def deaf_slot() -> dict[int, Handler]:
    """Make this slot ignore every signal it does not handle, and return what each was
    for its children (`hear_signals`). A slot is the init of its pid namespace (but in
    container mode and unsandboxed, where its children are another uid, or are the
    user's own anyway), and such an init receives only the signals it has a handler
    for: rootless, a child is the slot's own uid outside and, before Landlock's signal
    scoping (Linux 6.12), its `kill(1, SIGINT)` ended the slot through Python's
    KeyboardInterrupt handler. Ignored, a signal is dropped, on every kernel."""
    kept: dict[int, Handler] = {}
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP, *SLOT_HANDLED):
            continue
        try:
            kept[sig] = signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):  # one the interpreter may not set (none on Linux)
            continue
    return kept


def hear_signals(kept: dict[int, Handler]) -> None:
    """In a fresh child: every signal as it was before its slot ignored it (`deaf_slot`),
    so a submission meets the dispositions of an ordinary Python process."""
    for sig, handler in kept.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def become_subreaper() -> None:
    """Container mode: orphans come to the slot, to be reaped."""
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def enter_slot_namespaces(scratch: str) -> None:
    """Make this process pid 1 of a new pid namespace with its own mounts and network:
    `kill -1` then reaches exactly this slot's submissions, its scratch mount and /proc
    are its own (in which a child does not see the slot), students graded at once in two slots share no loopback or abstract
    socket (lo stays down), and when it ends the kernel kills whatever they left."""
    if libc.unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID | NEWNS | NEWNET) failed")
    if os.fork() != 0:
        os._exit(0)  # the slot lives on in the child: pid 1 of the new namespace
    os.setsid()  # its own group, visible in its namespace: killpg(getpgid(1)) is refused
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making the slot's mounts private failed")
    # hidepid=2: a process sees in /proc only those it may trace, so a child sees
    # neither the slot nor its command line. Rootless the slot is the child's own uid
    # outside, and without Landlock a child wrote the slot's /proc/1/oom_score_adj and
    # autogroup nice, which outlived it for every later student of the slot.
    if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  b"hidepid=2") != 0:
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
    os.makedirs(scratch, exist_ok=True)
    for path in (b"/", b"/tmp", b"/dev"):
        if libc.mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID
                      | MS_NODEV, None) != 0:
            raise OSError(ctypes.get_errno(), f"making the slot's {path.decode()} read-only failed")


def detach_cgroup(path: str) -> None:
    """Unmount the cgroup tree from the slot once its files are open: rootless, they
    belong to the student's own uid outside, and a child could raise its cap."""
    if libc.umount2(path.encode(), MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "unmounting the cgroup tree from the slot failed")


def fresh_scratch(path: str, uid: int, size_mb: int) -> None:
    """A new size-capped tmpfs per child: nothing of the previous student survives."""
    unmount(path)
    os.makedirs(path, exist_ok=True)
    opts = f"size={size_mb}m,nr_inodes={SCRATCH_FILES},mode=0700,uid={uid},gid={uid}".encode()
    if libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0, opts) != 0:
        raise OSError(ctypes.get_errno(), "mounting the scratch tmpfs failed")


SCRATCH_FILES = 4096  # files and folders a scratch may hold, in every mode
OPEN_FILES = 256  # descriptors a child may hold at once (RLIMIT_NOFILE, soft and hard)
IN_NONBLOCK_CLOEXEC = os.O_NONBLOCK | os.O_CLOEXEC
IN_WRITES = 0x2 | 0x8 | 0x80 | 0x100  # IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE


class ScratchWatch:
    """Container mode, where no tmpfs can be mounted: the scratch cap, kept by the
    slot, one child at a time (`start`, `stop`). Its descriptor wakes the slot whenever
    the child writes in its scratch folder (elsewhere Landlock keeps it from writing,
    or where there is none, the slot removes what it wrote once it ends); `over` then
    measures the folder. The child is killed at once when over, so it may have
    written a little more than the cap by then, never much more (each file is capped
    by RLIMIT_FSIZE too). One inotify descriptor serves the slot's life: closing one
    waits for the kernel (milliseconds), removing a watch does not."""

    def __init__(self) -> None:
        self.fd = libc.inotify_init1(IN_NONBLOCK_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.path, self.cap = "", 0
        self.watches: dict[str, int] = {}

    def start(self, path: str, size_mb: int) -> None:
        self.path, self.cap = path, size_mb * 1024 * 1024
        self._watch(path)

    def stop(self) -> None:
        for wd in self.watches.values():
            libc.inotify_rm_watch(self.fd, wd)
        self.watches.clear()
        self._drain()

    def _watch(self, path: str) -> None:
        if path not in self.watches:
            wd = libc.inotify_add_watch(self.fd, path.encode(), IN_WRITES)
            if wd >= 0:
                self.watches[path] = wd

    def _drain(self) -> None:
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass

    def over(self) -> bool:
        """Does the scratch hold more than its cap, in bytes or in files? (Every
        folder found is watched from now on.)"""
        self._drain()
        used, files = 0, 0
        for path, st in _entries(self.path, lambda st: True):
            files += 1
            if files > SCRATCH_FILES:
                return True
            used += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                self._watch(path)
        return used > self.cap


def unmount(path: str) -> None:
    """Detach whatever is mounted at `path` (nothing there is fine)."""
    libc.umount2(path.encode(), MNT_DETACH)


def become_student(data_fd: int, out_fd: int, failure: int, limits: dict, uid: int | None,
                   cgroup: SlotCgroup | None, scratch: str, userns: bool,
                   container: bool) -> None:
    """Confine this freshly forked child before the harness imports the submission: it
    keeps only the data socket and the harness's failure pipe, and its stdout and stderr
    go to the output pipe. `uid` None: unsandboxed, nothing to drop to."""
    os.setsid()
    _first_to_go_when_memory_runs_out()
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    if cgroup is not None:  # while privileged: the cgroup's files are root's
        cgroup.enter()
    _close_all_but(data_fd, failure)
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
        # soft == hard: open files (pipes' buffers among them) can not be raised
        (resource.RLIMIT_NOFILE, OPEN_FILES, None),
    ):
        resource.setrlimit(res, (value, value if hard is None else hard))
    if uid is not None and userns:
        _own_user_namespace(uid)
    if uid is not None:
        # A fresh IPC namespace per child: SysV shared memory and message queues
        # outlive their creator, so in the zygote's namespace one submission could
        # leave data (or memory held outside RLIMIT_AS) for the next. This one dies
        # with the child and everything it started. And a cgroup namespace rooted at
        # the cgroup it just entered: /proc/self/cgroup names no cgroup of the
        # machine's (the sandbox has none of its own: cgroup v2's `nsdelegate` would
        # refuse a move out of it into the slot's cgroup).
        if not container and libc.unshare(CLONE_NEWIPC | CLONE_NEWCGROUP) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWIPC | NEWCGROUP) failed")
        # nothing a student leaves there outlives it (a container's own filter may
        # refuse keyrings: ours refuses them to the student anyway)
        _join_fresh_keyring(required=not container)
        if not userns:
            os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        _set_capabilities(0, 0, 0)  # (rootless, setresuid to the same uid keeps them)
    os.chdir(scratch)
    # temporary files go to the scratch (the only place a child may write, Landlock
    # permitting); tempfile may have cached another folder in the zygote
    os.environ["TMPDIR"] = scratch
    if "tempfile" in sys.modules:
        # (sys.modules holds plain ModuleType: typeshed cannot know it is tempfile)
        sys.modules["tempfile"].tempdir = None  # type: ignore[attr-defined]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("prctl(NO_NEW_PRIVS) failed")
    if uid is not None:
        write_only_beneath(scratch)
        _allow_only_listed_syscalls(alone=cgroup is None)


def _first_to_go_when_memory_runs_out() -> None:
    """In a machine (or container) too small for the grader and a submission under its
    own cap, the kernel's OOM killer picks by size, and it picked the grader (the run
    then ended with no scores at all). The child asks to be picked first; raising one's
    own score needs no privilege. Without /proc (never in these sandboxes) nothing to do."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except FileNotFoundError:
        pass


# Landlock (an unprivileged LSM, Linux 5.13+): what a child may write, wherever it runs
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
# write a file, remove a dir or file, make a char device, dir, file, socket, fifo,
# block device or symlink (ABI 1); rename or link across dirs (2); truncate (3)
LANDLOCK_WRITES = {1: sum(1 << bit for bit in (1, *range(4, 13))), 2: 1 << 13, 3: 1 << 14}
LANDLOCK_FILE_WRITES = (1 << 1) | (1 << 14)  # on a file: write, truncate
LANDLOCK_NET_TCP = 0b11  # bind, connect (ABI 4)
LANDLOCK_SCOPES = 0b11  # abstract Unix sockets and signals outside the child (ABI 6)
WRITABLE_FILES = ("/dev/null",)
NR_LANDLOCK = (444, 445, 446)  # create_ruleset, add_rule, restrict_self (every machine)


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers, 0 when none (not built, disabled, or a
    container's seccomp profile refuses it)."""
    abi = libc.syscall(NR_LANDLOCK[0], None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(abi, 0)


LANDLOCK_ABI = landlock_abi()  # asked once, in the zygote (or the trusted process)
LANDLOCK_CAP = "GRADER_LANDLOCK_ABI"  # the trusted side's environment: see `capped_abi`


def capped_abi(environ: dict[str, str]) -> int:
    """The Landlock ABI a run confines with: this kernel's, or less where the trusted
    side's environment names a lower one (GRADER_LANDLOCK_ABI=5: as before Linux 6.12,
    0: no Landlock), so that what an older kernel gives can be tried on this one. Read
    by the trusted side alone and handed to the zygote as an argument: a submission can
    neither see nor set it for another."""
    text = environ.get(LANDLOCK_CAP, "").strip()
    if not text:
        return LANDLOCK_ABI
    if not text.isdigit():
        raise ValueError(f"{LANDLOCK_CAP} must be a whole number of 0 or more, not {text!r}")
    return min(LANDLOCK_ABI, int(text))


def cap_abi(abi: int) -> None:
    """Confine this run's children with Landlock ABI `abi` at most (`capped_abi`)."""
    global LANDLOCK_ABI
    LANDLOCK_ABI = min(LANDLOCK_ABI, abi)


def write_only_beneath(scratch: str) -> None:
    """Let this process (and all it starts) write, create or remove files only beneath
    `scratch`, and write to /dev/null: in container mode nothing else keeps a student
    from leaving files in the machine's shared folders (/tmp, /dev/shm, ...), or from
    writing past its scratch cap there. Also no TCP (ABI 4), and no abstract Unix
    socket or signal reaching a process outside (ABI 6). Without Landlock nothing is
    done here; the trusted side says so (slot.Sandbox's `confine_note`) and the slot
    removes what the uid left (`remove_leftovers`)."""
    abi = LANDLOCK_ABI
    if abi < 1:
        return
    handled = sum(bits for version, bits in LANDLOCK_WRITES.items() if version <= abi)
    net = LANDLOCK_NET_TCP if abi >= 4 else 0
    scoped = LANDLOCK_SCOPES if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr = struct.pack("QQQ", handled, net, scoped)[:size]
    ruleset = libc.syscall(NR_LANDLOCK[0], attr, size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "creating the Landlock ruleset failed")
    try:
        for path, access in ((scratch, handled),
                             *((f, LANDLOCK_FILE_WRITES & handled) for f in WRITABLE_FILES)):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", access, fd)  # struct landlock_path_beneath_attr
                if libc.syscall(NR_LANDLOCK[1], ruleset, LANDLOCK_RULE_PATH_BENEATH,
                                rule, 0) != 0:
                    raise OSError(ctypes.get_errno(), f"a Landlock rule for {path} failed")
            finally:
                os.close(fd)
        if libc.syscall(NR_LANDLOCK[2], ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "entering the Landlock domain failed")
    finally:
        os.close(ruleset)


# Container mode: the machine's folders any uid may write to (a student's files there
# would outlive it), and its SysV IPC objects' tables
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
SYSV_TABLES = {"shm": "shmctl", "sem": "semctl", "msg": "msgctl"}  # table: its ctl call
IPC_RMID = 0


def remove_leftovers(uid: int, files: bool = True,
                     folders: tuple[str, ...] = SHARED_FOLDERS) -> None:
    """Container mode, once the uid's processes are all killed and reaped (nothing of
    the student moves any more): remove every file and folder the uid owns in the
    shared folders, at any depth it could reach (`files`: after a child Landlock kept
    to its scratch there can be none, and the walk is skipped), and every SysV IPC
    object it owns. No link is followed (each entry is looked at, never through); IPC
    objects are removed as the uid, in a fork (root without CAP_SYS_ADMIN may not), and
    only when it owns one: a fork of the slot costs tens of milliseconds."""
    for folder in folders if files else ():
        _remove_owned(folder, uid)
    if _ipc_of(uid):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                for table, ident in _ipc_of(uid):
                    libc.syscall(_ipc_ctl(table), ident, IPC_RMID, 0, 0)
                code = 0
            finally:
                os._exit(code)
        os.waitpid(pid, 0)


def _remove_owned(folder: str, uid: int) -> None:
    """Below `folder`: remove what `uid` owns, and look into every other folder it
    could have crossed (others may search it: a world-writable one may sit deeper)."""

    def crossable(st: os.stat_result) -> bool:  # what is the uid's is gone already
        return st.st_uid != uid and bool(st.st_mode & stat.S_IXOTH)

    for path, st in _entries(folder, crossable):
        if st.st_uid == uid:
            if stat.S_ISDIR(st.st_mode):  # by descriptors: no link is followed
                shutil.rmtree(path, ignore_errors=True)
            else:
                _unlink(path)


def _entries(top: str, descend: Callable[[os.stat_result], bool]
             ) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below `top` with its lstat (no link is followed, nor looked through),
    the scratch cap's walk and the leftovers' both: a folder is entered when `descend`
    says so of it, asked once the caller has seen it (and may have removed it). What
    cannot be listed or looked at (gone meanwhile) is passed over."""
    todo = [top]
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, st
            if stat.S_ISDIR(st.st_mode) and descend(st):
                todo.append(entry.path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _ipc_of(uid: int) -> list[tuple[str, int]]:
    """The SysV IPC objects `uid` owns or made: (table, id)."""
    found = []
    for table in SYSV_TABLES:
        try:
            with open(f"/proc/sysvipc/{table}") as f:
                header, *rows = f.read().splitlines()
        except (OSError, ValueError):
            continue
        names = header.split()
        for row in rows:
            fields = dict(zip(names, row.split()))
            if uid in (int(fields.get("uid", -1)), int(fields.get("cuid", -1))):
                found.append((table, int(fields.get("shmid") or fields.get("semid")
                                         or fields["msqid"])))
    return found


def _ipc_ctl(table: str) -> int:
    column = syscalls.MACHINES[MACHINE][0]
    return syscalls.DENIED[SYSV_TABLES[table]][column]


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


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def _compile(machine: str, alone: bool) -> _Prog | None:
    """The child's filter for this machine, built once in the zygote (each child
    inherits it and only installs it); None on a machine the table does not know."""
    if machine not in syscalls.MACHINES:
        return None
    program = syscalls.program(machine, alone)
    return _Prog(len(program), (_Insn * len(program))(*[_Insn(*i) for i in program]))


# {alone: filter}: alone, where no memory cgroup caps a child's processes together
FILTERS = {alone: _compile(MACHINE, alone) for alone in (False, True)}
ONE_PROCESS = ("the grader runs a submission as one process on this machine, which has "
               "no memory cgroup to cap several together: starting another (os.fork, "
               "subprocess, multiprocessing) is refused; threads work")


def _allow_only_listed_syscalls(alone: bool) -> None:
    """Install syscalls.py's allowlist on this process and all it starts (for good:
    NO_NEW_PRIVS is set); `alone`, it may start no process, and the calls that would
    say so with a bare EPERM say why (`_say_why_alone`). A machine the table does not
    know (neither x86_64 nor aarch64) keeps the other limits only."""
    chosen = FILTERS[alone]
    if chosen is None:
        return
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(chosen), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")
    if alone:
        _say_why_alone()


def _say_why_alone() -> None:
    """Python's ways to start a process raise PermissionError with `ONE_PROCESS`, not
    the kernel's bare "Operation not permitted" (the filter refuses them all the same)."""
    import _posixsubprocess

    def refused(*_args, **_kwargs):
        raise PermissionError(1, ONE_PROCESS)

    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            setattr(os, name, refused)
    _posixsubprocess.fork_exec = refused
    if "subprocess" in sys.modules:  # it keeps its own name for fork_exec
        # (a private name, which typeshed does not declare)
        sys.modules["subprocess"]._fork_exec = refused  # type: ignore[attr-defined]
