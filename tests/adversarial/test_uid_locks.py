"""The locks that hold a sandbox uid for one run on this host: in a folder only root
may write, never made through a link, and a planted link, folder or fifo is passed
over (the next uid is taken), never a stop. A child in container mode once planted a
link at the old world-writable place, and a later run as root made its target; a
folder planted there stopped every later run."""
from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import outside_bwrap

from conftest import SOLUTION
from test_no_reach import class_folder  # noqa: F401 - the fixture: a course copy
from grader.sandbox import slot as slots
from grader.sandbox.limits import SandboxError


def _plant(folder: Path, target: Path) -> dict[int, str]:
    """A link (to `target`), a folder, a fifo and a hard link to a file of another
    owner at the first four uids' lock names; what is planted, by uid."""
    planted = {}
    uid = slots.BASE_UID
    other = folder / "others"
    other.write_text("")
    os.chown(other, 12345, 12345)
    for kind in ("link", "folder", "fifo", "foreign"):
        path = folder / f"uid-{uid}.lock"
        if kind == "link":
            path.symlink_to(target)
        elif kind == "folder":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            path.hardlink_to(other)
        planted[uid] = kind
        uid += 1
    return planted


@pytest.mark.skipif(os.geteuid() != 0, reason="the locks are root's (root and container mode)")
def test_planted_locks_are_passed_over_and_nothing_is_made_through_a_link(tmp_path):
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    target = tmp_path / "made-through-the-link"
    planted = _plant(folder, target)
    uid, fd = slots.claim_uid(folder)
    try:
        assert uid == slots.BASE_UID + len(planted), (uid, planted)
        assert not target.exists() and not target.is_symlink()
        assert (folder / f"uid-{uid}.lock").is_file()
        second, fd2 = slots.claim_uid(folder)  # held: the next one
        assert second == uid + 1
        os.close(fd2)
    finally:
        os.close(fd)
    assert not target.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the locks are root's (root and container mode)")
def test_a_lock_folder_others_may_write_or_a_link_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(SandboxError, match="not this user's alone"):
        slots.claim_uid(shared)
    assert not list(shared.iterdir())
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    with pytest.raises(SandboxError, match="lock folder"):
        slots.claim_uid(link)
    assert not list((tmp_path / "elsewhere").iterdir())


def _free(path: Path) -> bool:
    """Is `path` no live run's lock? A free lock file is removed (the run makes it
    again), so that what is planted there is what the run meets first."""
    if not os.path.lexists(path):
        return True
    if path.is_symlink() or not path.is_file():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        path.unlink()
        return True
    finally:
        os.close(fd)


def _container_reason() -> str | None:
    if os.geteuid() != 0:
        return "container mode needs root (as in a Docker-like container)"
    return None if shutil.which("capsh") else "capsh is missing"


def test_a_run_grades_past_planted_locks(class_folder):  # noqa: F811 - the fixture
    """Container mode, as a Docker-like container runs it: the lowest uids' locks are a
    link, a folder, a fifo and another owner's file; the run grades in full on the
    next uid and makes nothing at the link's target."""
    if reason := _container_reason():
        pytest.skip(reason)
    slots.LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    top = class_folder
    target = top / "made-through-the-link"
    planted: list[Path] = []
    try:
        uid = slots.BASE_UID
        for kind in ("link", "folder", "fifo"):
            while not _free(slots.LOCK_DIR / f"uid-{uid}.lock"):
                uid += 1  # a live run's lock: plant at the next free uid's
            path = slots.LOCK_DIR / f"uid-{uid}.lock"
            {"link": lambda p: p.symlink_to(target), "folder": Path.mkdir,
             "fifo": os.mkfifo}[kind](path)
            planted.append(path)
        (top / "class" / "s1").mkdir(parents=True)
        shutil.copy(SOLUTION, top / "class" / "s1" / "13_moe.py")
        cmd = [sys.executable, "-c", "from grader.cli import main; main()", "run",
               "--lesson", "13", "--course", str(top / "course" / "course.yml"), "--submissions",
               str(top / "class"), "--out", str(top / "out"), "--jobs", "1"]
        with outside_bwrap(shared=True):  # (tests/conftest.py)
            done = subprocess.run(
                [shutil.which("capsh"), "--drop=cap_sys_admin", "--", "-c", "exec " + shlex.join(cmd)],
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "GRADER_CONTAINER": "1"},
                capture_output=True, text=True, timeout=600, cwd=top)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        record = json.loads((top / "out" / "results" / "s1.json").read_text())
        assert record["score"] == pytest.approx(10.0) and record["sandbox"] == "container"
        assert not target.exists() and not target.is_symlink()
    finally:
        for path in planted:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink()
