"""`grader run` on a small class in a chosen sandbox mode, as a TA runs it: `own` (this
user's: root, or userns when the suite runs as another user), `userns` (a user created
for the run), `userns-delegated` (the same user, given a memory cgroup of its own as
systemd's user manager or an administrator delegates one: unprivileged.py's
`delegated_cgroup`), `container` (root without CAP_SYS_ADMIN, as in Docker and on
Gradescope: bwrap in a user namespace of the grader's) or `container-no-userns` (the
same where the container also refuses a user namespace, as Docker's default seccomp
profile does: no namespace at all, no_userns.py). Each run gets a course copy under a
folder any uid may cross."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

import unprivileged

from tests.conftest import outside_bwrap

REPO = Path(__file__).resolve().parents[2]
COURSE_PARTS = ("course.yml", "solutions", "exercises", "hidden_tests", "templates")
MODES = ("own", "userns", "container", "container-no-userns")
NO_USERNS = Path(__file__).resolve().parent / "no_userns.py"
# The modes a slot runs in, each with the Landlock ABI the run is capped at (None: the
# kernel's; 5: a kernel before 6.12, without signal scoping; 0: one without Landlock)
SLOT_CASES = [("userns", None), ("userns", "5"), ("userns", "0"), ("own", None),
              ("own", "0"), ("container", None)]
# The reference's results `grader run` keeps between runs (grader/judge/kept.py: each
# recording named by the lesson's, torch's and the grader's versions), shared by every
# run here and every uid: a run's HOME is its own class folder, where nothing would be
# kept, and computing them again cost each run about 3 CPU-s before its first student.
KEPT = Path(tempfile.gettempdir()) / "mmg-modes-kept"


def reason(mode: str) -> str | None:
    """Why `mode` cannot be run here (None: it can)."""
    if mode == "own":
        return None
    if os.geteuid() != 0:
        return f"{mode} mode is run from root here (rootless, `own` is userns)"
    if mode.startswith("container"):
        return None if shutil.which("capsh") else "capsh is missing"
    if mode == "userns-delegated":
        return unprivileged.usable() or unprivileged.delegation_refused()
    return unprivileged.usable()


def class_folder(limits: dict[str, int] | None = None) -> Path:
    """A course copy (with `limits` changed) under a fresh folder, where the class and
    OUT go; the caller removes it."""
    top = Path(tempfile.mkdtemp(prefix="mmg-modes-"))
    top.chmod(0o755)
    (top / "course").mkdir()
    for name in COURSE_PARTS:
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, top / "course" / name)
    yml = top / "course" / "course.yml"
    text = yml.read_text(encoding="utf-8")
    for key, value in (limits or {}).items():
        text, n = re.subn(rf"^(\s+{key}:) *[0-9.]+", rf"\g<1> {value}", text, count=1,
                          flags=re.M)
        assert n == 1, key
    yml.write_text(text, encoding="utf-8")
    return top


def kept_cache(top: Path) -> Path:
    """`KEPT`'s folder for the course copy in `top` (one per course.yml: a course with
    other limits is another version of the lesson, whose recording would replace
    this one's), open to every uid (sticky, as /tmp is: a run may add a recording,
    not replace another uid's; where it may not write, it computes)."""
    yml = (top / "course" / "course.yml").read_bytes()
    home = KEPT / hashlib.sha256(yml).hexdigest()[:12]
    for folder in (KEPT, home, home / "minimind-grader", home / "minimind-grader" / "graded"):
        folder.mkdir(exist_ok=True)
        try:
            folder.chmod(0o1777)
        except PermissionError:
            pass  # another uid's, made so by its run
    return home


def grade_once(mode: str, abi: str | None, sources: dict[str, str],
               limits: dict[str, int] | None = None) -> tuple[dict[str, dict], str]:
    """`grade` in a course copy of its own (with `limits`), removed after, with the
    run's Landlock ABI capped at `abi`; skipped where `mode` cannot run here."""
    import pytest
    from conftest import require_sandbox

    if why := reason(mode):
        pytest.skip(why)
    if mode == "own":
        require_sandbox()
    top = class_folder(limits)
    try:
        return grade(top, mode, sources,
                     extra_env={"GRADER_LANDLOCK_ABI": abi} if abi else None)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def grade(top: Path, mode: str, sources: dict[str, str], out: str = "out",
          extra_env: dict[str, str] | None = None) -> tuple[dict[str, dict], str]:
    """`grader run --jobs 1` (one slot: the submissions one after another, in the order
    of their ids) on `sources` in `mode`, with `extra_env` in its environment:
    {student_id: record}, and its output."""
    for sid, text in sources.items():
        (top / "class" / sid).mkdir(parents=True, exist_ok=True)
        (top / "class" / sid / "13_moe.py").write_text(text, encoding="utf-8")
    argv = [sys.executable, "-c", "from grader.cli import main; main()", "run", "--lesson",
            "13", "--course", str(top / "course" / "course.yml"), "--submissions",
            str(top / "class"), "--out", str(top / out), "--jobs", "1", "--force"]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(top),
           "XDG_CACHE_HOME": str(kept_cache(top)), "PYTHONDONTWRITEBYTECODE": "1",
           **(extra_env or {})}
    if mode.startswith("userns"):
        with unprivileged.user("modes") as who, (
                unprivileged.delegated_cgroup(who) if mode == "userns-delegated"
                else nullcontext()) as cgroup:
            subprocess.run(["chown", "-R", f"{who.pw_uid}:{who.pw_gid}", str(top)], check=True)
            done = subprocess.run(unprivileged.command(who, argv, env, top, cgroup),
                                  capture_output=True, text=True, timeout=900)
            subprocess.run(["chown", "-R", "0:0", str(top)], check=True)
    else:
        cmd = argv
        if mode.startswith("container"):
            env["GRADER_CONTAINER"] = "1"
            if mode == "container-no-userns":
                argv = [sys.executable, str(NO_USERNS), *argv]
            cmd = [shutil.which("capsh") or "capsh", "--drop=cap_sys_admin", "--", "-c",
                   "exec " + shlex.join(argv)]
        with (outside_bwrap(shared=True) if mode == "container-no-userns"
              else nullcontext()):
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                                  cwd=top)
    said = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, said
    records = {sid: json.loads((top / out / "results" / f"{sid}.json").read_text())
               for sid in sources}
    return records, said
