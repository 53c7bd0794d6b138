"""Unprivileged users for tests that run the grader as someone other than root: create
them, and build the command that runs a program as one of them.

Sessions run as root and the interpreter may live under a directory only root can
enter (pyenv in /root): the command then runs in a private mount namespace in which
that directory is replaced by an empty, enterable one holding only the interpreter's
tree again. The host's permissions are never changed.
"""
from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def usable() -> str | None:
    """Why users cannot be created and switched to here, or None."""
    if os.geteuid() != 0:
        return "creating users needs root"
    missing = [t for t in ("useradd", "userdel", "setpriv", "unshare") if not shutil.which(t)]
    return f"missing {', '.join(missing)}" if missing else None


@contextmanager
def user(tag: str) -> Iterator[pwd.struct_passwd]:
    """A fresh system user without a home or a login shell, deleted afterwards."""
    name = f"mmg-{tag}-{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--user-group",
                    "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False)


def _hidden_ancestor(path: Path) -> Path | None:
    """The outermost ancestor of `path` others cannot enter."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not os.stat(parent).st_mode & 0o001:
            return parent
    return None


def delegation_refused() -> str | None:
    """Why no memory cgroup can be delegated to a user here (root's own has none to
    give: `cgroup._bases`), or None."""
    from grader.sandbox import cgroup

    return None if cgroup._bases() else "root has no writable memory cgroup here"


# What systemd chowns of a cgroup it delegates (Delegate=yes): the folder and these
DELEGATED_FILES = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")


@contextmanager
def delegated_cgroup(who: pwd.struct_passwd) -> Iterator[Path]:
    """A memory cgroup given to `who`, as an administrator or systemd's user manager
    delegates one: made below root's own (v1 `memory`, or v2 with the memory
    controller), the folder and its control files `who`'s. A process `command` starts
    in it (`cgroup=`) then runs in a cgroup of its own user's. Removed afterwards."""
    from grader.sandbox import cgroup

    path = cgroup._bases()[0] / f"mmg-delegated-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        v1 = (path / "memory.limit_in_bytes").exists()
        for item in [path, *(path.iterdir() if v1 else
                             (path / name for name in DELEGATED_FILES))]:
            if item.exists():
                os.chown(item, who.pw_uid, who.pw_gid)
        yield path
    finally:  # (with the leaf `_make_room` made in v2: its processes are gone by now)
        cgroup.remove(path)


def command(who: pwd.struct_passwd, argv: list[str], env: dict[str, str],
            cwd: Path, cgroup: Path | None = None) -> list[str]:
    """`argv` run as `who` (no capability, no supplementary group) with only `env`,
    in the cgroup `cgroup` (one `delegated_cgroup` gave `who`) where one is named."""
    steps = [f"echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))}"] if cgroup else []
    prefix = Path(os.path.realpath(sys.base_prefix))
    hidden = _hidden_ancestor(prefix)
    if hidden is not None:
        inner = hidden / prefix.relative_to(hidden).parts[0]
        stage = f"/run/mmg-stage-{uuid.uuid4().hex[:8]}"
        steps += [f"mkdir {stage}", f"mount --bind {shlex.quote(str(inner))} {stage}",
                  f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(hidden))}",
                  f"mkdir {shlex.quote(str(inner))}",
                  f"mount --move {stage} {shlex.quote(str(inner))}", f"rmdir {stage}"]
    run_as = ["setpriv", f"--reuid={who.pw_uid}", f"--regid={who.pw_gid}", "--clear-groups",
              "--inh-caps=-all", "--", "env", "-i",
              *[f"{k}={v}" for k, v in env.items()], *argv]
    steps.append(f"cd {shlex.quote(str(cwd))} && exec " + shlex.join(run_as))
    return ["unshare", "--mount", "--propagation", "private", "sh", "-ec", "\n".join(steps)]


def private_dir(who: pwd.struct_passwd, name: str) -> Path:
    """A directory of `who`'s own (mode 0700) in the machine's /tmp."""
    path = Path("/tmp") / f"{name}-{uuid.uuid4().hex[:8]}"
    path.mkdir(mode=0o700)
    os.chown(path, who.pw_uid, who.pw_gid)
    return path
