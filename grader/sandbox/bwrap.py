"""The bubblewrap command line that confines the warm worker, and which way to run it.

As root ("root" mode) it runs without a user namespace, so the zygote keeps just the
capabilities it needs to give each slot its own pid and mount namespaces, mount a
scratch tmpfs, drop each child to the slot's own uid and kill what the child leaves
behind. As any other user ("userns" mode) bwrap makes an unprivileged user namespace
in which that user is root: the zygote has the same capabilities there (and none
outside), and each child makes a user namespace of its own (confine.py says why).
As root alone in a container without CAP_SYS_ADMIN ("container" mode: Gradescope, a
CI job), the grader first makes a user namespace in which root and the sandbox uids
are themselves (`user_namespace`), and bwrap runs in it as in root mode: the same
namespaces, filesystem and uids. Where the container refuses that too, the worker runs
without bwrap and the container is the boundary: each slot still has its own uid,
limits and scratch, but a child sees the container's processes, /tmp and files.
Inside, the filesystem holds only the interpreter, the virtualenv, the sandbox's own
code (grader/inside/, with the probes' shared helpers, grader/inside/probekit.py) and
the lesson's probe module, all read-only: no project tree, no solutions, hidden tests,
other students or /etc. Each is bound at a neutral path that names nothing of the
machine's (`_interpreter`): the virtualenv at /venv, the interpreter's installation at
/python (one under /usr stays there), the grader's code and the probes at /grader.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

GRADER_ROOT = "/grader"
VENV = "/venv"  # the virtualenv, inside (`_interpreter`)
PYTHON = "/python"  # the interpreter's installation, inside (but one under /usr)
PROBES_PATH = "/grader/probes.py"
CGROUP_PATH = "/grader/cgroup"  # the run's memory cgroup (zygote.CGROUP), read-write
# CAP_SETPCAP only lets the zygote empty its bounding set; it then drops it too.
KEPT_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SETPCAP")
# Rootless, a child maps its own uid to the sandbox's root, which the kernel allows
# only a namespace whose creator held CAP_SETFCAP (in the sandbox's namespace only).
USERNS_CAPS = ("CAP_SETFCAP",)


def interpreter_paths() -> list[str]:
    """Real paths the venv's interpreter needs: the venv and the base install."""
    paths = {sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)}
    paths.add(os.path.realpath(os.path.dirname(os.path.realpath(sys.executable))))
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    # keep only the outermost of nested paths
    ordered = sorted({p for p in paths if p and not p.startswith("/usr/")})
    roots: list[str] = []
    for p in ordered:
        if not any(p == r or p.startswith(r + "/") for r in roots):
            roots.append(p)
    return roots


def _dirs_for(path: str) -> list[str]:
    """Create every ancestor world-traversable, whatever its mode on the host."""
    args: list[str] = []
    parts = Path(path).parents
    for parent in reversed(list(parts)[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _system(read_only: list[str]) -> list[str]:
    """What every sandbox here sees: /usr, /proc, /dev, its own /tmp, and these host
    paths read-only at the same place (their parents made traversable)."""
    args = ["--ro-bind", "/usr", "/usr",
            "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/sbin", "/sbin",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in read_only:
        args += _dirs_for(path) + ["--ro-bind", path, path]
    return args


def _interpreter() -> tuple[list[str], str, bytes]:
    """bwrap's arguments that show this interpreter at neutral paths, not the TA's (a
    home, a course's folder): its installation at `PYTHON` (one under /usr is bound
    there already, and names no one) and, run from a virtualenv, that virtualenv's
    libraries at `VENV`, beside the interpreter's binary as /venv/bin/python and a
    pyvenv.cfg that points at the installation inside (`copies` binds it: the
    `cfg` bytes, empty when there is no virtualenv). Also the interpreter's path
    inside. The binary finds its shared library (libpython, linked with the
    installation's own path) through LD_LIBRARY_PATH."""
    base = os.path.realpath(sys.base_prefix)
    binary = os.path.realpath(sys.executable)
    moved = not base.startswith("/usr/")
    home = PYTHON if moved else base
    args = (["--ro-bind", base, PYTHON, "--setenv", "LD_LIBRARY_PATH", f"{PYTHON}/lib"]
            if moved else [])
    inside = home + binary[len(base):] if binary.startswith(base + "/") else binary
    if sys.prefix == sys.base_prefix:
        return args, inside, b""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    cfg = (f"home = {home}/bin\ninclude-system-site-packages = false\n"
           f"version = {version}.{sys.version_info[2]}\n").encode()
    args += ["--dir", f"{VENV}/bin", "--ro-bind", binary, f"{VENV}/bin/python",
             "--ro-bind", os.path.join(sys.prefix, "lib"), f"{VENV}/lib"]
    return args, f"{VENV}/bin/python", cfg


def _package() -> Path:
    """The `grader` package this process runs (PYTHONPATH's, an editable install's
    project, or the virtualenv's): the zygote puts its parent first on sys.path
    (--package-root), so probes import this one's probekit, not another install's."""
    spec = importlib.util.find_spec("grader")
    if spec is None or not spec.submodule_search_locations:  # (this module is its own)
        raise RuntimeError("the grader package is not importable")
    return Path(spec.submodule_search_locations[0])


def copies(probes: Path) -> dict[str, bytes]:
    """The files `command` binds as copies, not from the host (`copy_fds`), by their
    path inside: the sandbox's own code, the lesson's probes and the virtualenv's
    pyvenv.cfg. A file bound from the host shows where it lies there in
    /proc/self/mountinfo (the mount's root: the course's layout, the TA's checkout);
    a copy shows none."""
    grader_pkg = Path(__file__).resolve().parent.parent
    files = {f"{GRADER_ROOT}/grader/__init__.py": (grader_pkg / "__init__.py").read_bytes()}
    for path in sorted((grader_pkg / "inside").glob("*.py")):
        files[f"{GRADER_ROOT}/grader/inside/{path.name}"] = path.read_bytes()
    files[PROBES_PATH] = probes.read_bytes()
    if cfg := _interpreter()[2]:
        files[f"{VENV}/pyvenv.cfg"] = cfg
    return files


def command(probes: Path, ctrl_fd: int, preload: list[str],
            cgroup: Path | None = None, userns: bool = False,
            landlock_abi: int | None = None, userns_fd: int | None = None,
            copy_fds: dict[str, int] | None = None,
            holder: int | None = None) -> list[str]:
    """`userns_fd`: container mode, the user namespace bwrap joins (`user_namespace`);
    `landlock_abi`: the ABI the children confine with, where the run caps it;
    `copy_fds`: each of `copies(probes)`, in a descriptor that holds it, by its path
    inside (without them, the files are bound from the host).
    `holder`: instead of the zygote, run only a holder that says "ready" on its stdout
    once the sandbox is made and lasts until its stdin closes, and write bwrap's
    information (the sandbox's first process) to this descriptor: a zygote forked
    from the template joins its namespaces (sandbox/template.py)."""
    grader_pkg = Path(__file__).resolve().parent.parent
    interpreter, executable, _ = _interpreter()
    if copy_fds is None:
        binds = {f"{GRADER_ROOT}/grader/__init__.py": grader_pkg / "__init__.py",
                 f"{GRADER_ROOT}/grader/inside": grader_pkg / "inside", PROBES_PATH: probes}
        files = [a for inside, host in binds.items() for a in ("--ro-bind", str(host), inside)]
    else:
        files = [a for inside, fd in copy_fds.items() for a in ("--ro-bind-data", str(fd), inside)]
    args = [
        shutil.which("bwrap") or "bwrap",
        *(["--unshare-user", "--uid", "0", "--gid", "0"] if userns else []),
        *(["--userns", str(userns_fd)] if userns_fd is not None else []),
        # no cgroup namespace: each child makes its own once in its slot's cgroup
        # (confine.become_student says why)
        "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--die-with-parent", "--new-session", "--clearenv",
        "--cap-drop", "ALL", *[a for cap in KEPT_CAPS + (USERNS_CAPS if userns else ())
                               for a in ("--cap-add", cap)],
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", "/tmp/work",
        "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "PYTHONHASHSEED", "0",
        *_system([]), *interpreter, "--dir", GRADER_ROOT, *files,
        *(["--bind", str(cgroup), CGROUP_PATH] if cgroup else []),
        "--chdir", "/tmp",
    ]
    if holder is not None:
        return args + ["--info-fd", str(holder), "--", "/bin/sh", "-c", "echo ready && exec cat"]
    args += [
        "--", executable, "-I", "-u",
        f"{GRADER_ROOT}/grader/inside/zygote.py",
        "--probes", PROBES_PATH, "--sandboxed", *(["--userns"] if userns else []),
        "--ctrl-fd", str(ctrl_fd), "--preload", ",".join(preload),
        "--package-root", GRADER_ROOT, *_landlock(landlock_abi),
    ]
    return args



def _landlock(abi: int | None) -> list[str]:
    """The zygote's argument that caps its Landlock ABI (confine.capped_abi), if any."""
    return [] if abi is None else ["--landlock-abi", str(abi)]


# What of the student's environment a whole check inside bwrap keeps (the terminal's)
CHECK_ENV = ("LANG", "LC_ALL", "TERM", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")


def practice_command(course_root: Path, file: Path, argv: list[str],
                     also: Iterable[Path] = ()) -> list[str]:
    """`grader check` run whole inside one bubblewrap sandbox: for a student bundle,
    whose files hide nothing (no solution, no graded test). Inside, the grader and the
    student's code share torch's import (the zygote is a fork of the grader), so the
    check costs about the student's own imports on one core as on two, and the machine
    is kept from the student's code all the same: the bundle, the file (and `also`, an
    assembly lesson's earlier files beside it) and the interpreter read-only, no
    network, a private /tmp, nothing else of the host."""
    from grader.text.strings import TEMPLATES  # (their one home: package data or a checkout's)

    package = _package()
    binds = {str(course_root), str(file), str(package), str(TEMPLATES),
             *(str(p) for p in also)}
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent",
            "--new-session", "--clearenv", "--cap-drop", "ALL",
            "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            # the package this process runs, first (not another install's finder)
            "--setenv", "PYTHONPATH", str(package.parent)]
    for name in CHECK_ENV:
        if name in os.environ:
            args += ["--setenv", name, os.environ[name]]
    args += _system(sorted(set(interpreter_paths()) | binds))
    cwd = os.getcwd()
    inside = any(cwd == b or cwd.startswith(b.rstrip("/") + "/") for b in binds)
    args += ["--chdir", cwd if inside else str(course_root),
             "--", sys.executable, "-s", "-c", "from grader.cli import main; main()", *argv]
    return args


def plain_command(probes: Path, ctrl_fd: int, preload: list[str], scratch: str,
                  container: bool = False, cgroup: Path | None = None,
                  landlock_abi: int | None = None) -> list[str]:
    """The worker without bwrap: in container mode (a uid per slot, limits), or the
    unsandboxed fallback (no isolation, only when asked for)."""
    zygote = Path(__file__).resolve().parent.parent / "inside" / "zygote.py"
    return [sys.executable, "-I", "-u", str(zygote), "--probes", str(probes),
            "--ctrl-fd", str(ctrl_fd), "--preload", ",".join(preload), "--scratch", scratch,
            "--package-root", str(_package().parent),
            *(["--container"] if container else []),
            *(["--cgroup", str(cgroup)] if cgroup else []), *_landlock(landlock_abi)]


CLONE_NEWUSER = 0x10000000
_unshare = ctypes.CDLL(None, use_errno=True).unshare
# The sandbox uids (slot.BASE_UID, slot.UID_COUNT): container mode maps them to
# themselves, so a child there is the uid it is in root mode, no one else's.
SANDBOX_UIDS = (61000, 4096)


def _enter_new_user_namespace() -> None:
    """(In the holder's fork, before it execs.) A new user namespace, not yet mapped."""
    if _unshare(CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER) failed")


class UserNamespace:
    """Container mode: a user namespace for bwrap to join (`fd`, given as --userns), in
    which uid and gid 0 and the sandbox uids are themselves outside. Root without
    CAP_SYS_ADMIN may make one and write such a map (CAP_SETUID and CAP_SETGID are
    enough), and holds every capability inside: bwrap then makes the pid, mount and
    network namespaces root mode has. A process (`cat`, waiting on its stdin) holds the
    namespace until bwrap has joined it; `close` ends it, the namespace lives on in
    bwrap's processes."""

    def __init__(self) -> None:
        self.holder = subprocess.Popen(["cat"], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       preexec_fn=_enter_new_user_namespace)
        self._fd: int | None = None
        try:
            first, count = SANDBOX_UIDS
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{self.holder.pid}/{name}", "w") as f:
                    f.write(f"0 0 1\n{first} {first} {count}\n")
            self._fd = os.open(f"/proc/{self.holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            self.close()
            raise

    @property
    def fd(self) -> int:
        """The namespace's descriptor, while it is open (what bwrap --userns joins)."""
        if self._fd is None:
            raise ValueError("the user namespace is closed")
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.holder.stdin is not None:  # (always: a pipe the holder waits on)
            self.holder.stdin.close()
        self.holder.wait()

    def __enter__(self) -> "UserNamespace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


PROBE = ["--unshare-pid", "--unshare-net", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
         "--symlink", "usr/lib64", "/lib64", "--", "/bin/true"]
USERNS_FIX = {
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": (
        "1", "AppArmor restricts unprivileged user namespaces "
        "(kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10 and later). Fix: an "
        "administrator allows them for bwrap with an AppArmor profile (/etc/apparmor.d/bwrap: "
        "`abi <abi/4.0>, include <tunables/global> profile bwrap /usr/bin/bwrap flags=("
        "unconfined) { userns, }`, then `apparmor_parser -r /etc/apparmor.d/bwrap`) or "
        "sets `sysctl kernel.apparmor_restrict_unprivileged_userns=0`"),
    "/proc/sys/user/max_user_namespaces": (
        "0", "user namespaces are disabled (user.max_user_namespaces=0). Fix: an "
        "administrator sets `sysctl user.max_user_namespaces=15000`"),
    "/proc/sys/kernel/unprivileged_userns_clone": (
        "0", "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)."
        " Fix: an administrator sets `sysctl kernel.unprivileged_userns_clone=1`"),
}


def _userns_blocked() -> str:
    """Why an unprivileged user namespace was refused, and what fixes it."""
    for path, (blocked, why) in USERNS_FIX.items():
        try:
            if Path(path).read_text().strip() == blocked:
                return why
        except OSError:
            continue
    return ("this machine or container forbids new namespaces (e.g. Docker's default "
            "seccomp profile). Fix: run as root, or start the container with "
            "`--security-opt seccomp=unconfined` (or grade in container mode as root)")


def _in_container(declared: bool = False) -> bool:
    """Alone in a container: `declared` so by the caller (the Gradescope run), a
    container runtime's marker, or no init system as pid 1 (a container's entry
    point is)."""
    if declared or os.environ.get("container"):
        return True
    if any(Path(p).exists() for p in ("/.dockerenv", "/run/.containerenv")):
        return True
    try:
        return Path("/proc/1/comm").read_text().strip() not in ("systemd", "init")
    except OSError:
        return False


@dataclass(frozen=True)
class Support:
    """Whether bwrap works here as this user (`probe`). `mode`: "root" or "userns" (how
    `command` confines the worker here), "container" (root without CAP_SYS_ADMIN), or
    None, and then `reason` says why not. In container mode, `refused` is None where
    bwrap works in a user namespace of the grader's (`UserNamespace`), else why not
    (the worker then runs without namespaces: `plain_command(container=True)`)."""

    mode: str | None
    reason: str | None = None
    refused: str | None = None

    @property
    def namespaced(self) -> bool:
        """bwrap confines the worker here (every mode but container mode without it)."""
        return self.mode in ("root", "userns") or (self.mode == "container"
                                                   and self.refused is None)


def _probe_user_namespace() -> str | None:
    """Container mode: None where bwrap works in a `UserNamespace` with a /proc and a
    /tmp of its own, else why not."""
    try:
        with UserNamespace() as userns:
            done = subprocess.run(["bwrap", "--userns", str(userns.fd), "--proc", "/proc",
                                   "--tmpfs", "/tmp", *PROBE], pass_fds=[userns.fd],
                                  capture_output=True, text=True)
    except subprocess.SubprocessError:  # the holder's unshare, before its exec
        return ("the container refuses a user namespace (unshare(CLONE_NEWUSER): a seccomp "
                "profile such as Docker's default)")
    except OSError as exc:
        return f"no user namespace can be made here ({exc})"
    if done.returncode != 0:
        return f"bubblewrap cannot run in a user namespace here ({done.stderr.strip()[:200]})"
    return None


def probe(container: bool = False) -> Support:
    """Try bwrap here (a process, some milliseconds): whoever picks the sandbox mode
    probes once and passes the answer on; slot.Sandbox holds it for its life.
    `container`: the caller knows this is a container (`_in_container`)."""
    if shutil.which("bwrap") is None:
        return Support(None, "bubblewrap (bwrap) is not installed")
    userns = os.geteuid() != 0
    done = subprocess.run(["bwrap", *(["--unshare-user"] if userns else []), *PROBE],
                          capture_output=True, text=True)
    if done.returncode == 0:
        return Support("userns" if userns else "root")
    err = done.stderr.strip()[:200]
    if userns:
        return Support(None, f"bubblewrap cannot create a user namespace ({err}): "
                             f"{_userns_blocked()}")
    if _in_container(container):
        return Support("container", refused=_probe_user_namespace())
    return Support(None, f"bubblewrap cannot create namespaces here: {err}")
