"""`grader check` on a machine students share: two users, one after the other and at
the same time, each get their own verdict, never an error caused by the other (a fixed
scratch path used to make the second user's run fail as "your code ended the process").
Every run's scratch directory is its own and is gone when it ends."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import unprivileged
from conftest import REPO, SOLUTION

pytestmark = pytest.mark.slow
GRADER = Path(sys.executable).parent / "grader"
SANDBOXED, UNSANDBOXED = "/usr/bin:/bin", "/usr/sbin:/sbin"  # PATHs with and without bwrap
MISTAKE = ("topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)",
           "topk_weight = topk_weight")


@pytest.fixture(scope="module")
def users():
    reason = unprivileged.usable()
    if reason:
        pytest.skip(reason)
    with unprivileged.user("ann") as ann, unprivileged.user("bob") as bob:
        yield ann, bob


def start_check(who, source: str, path: str = UNSANDBOXED) -> tuple[subprocess.Popen, Path]:
    """`grader check` on `source`, run by `who` from their own folder (with bwrap on
    `path` or not: sandboxed rootless, or unsandboxed)."""
    home = unprivileged.private_dir(who, "mmg-home")
    tmp = home / "tmp"
    tmp.mkdir()
    (home / "13_moe.py").write_text(source, encoding="utf-8")
    for mine in (tmp, home / "13_moe.py"):
        os.chown(mine, who.pw_uid, who.pw_gid)
    env = {"PATH": path, "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C.UTF-8"}
    cmd = unprivileged.command(who, [str(GRADER), "check", "--course", str(REPO / "course.yml"),
                                     "--lesson", "13", str(home / "13_moe.py")], env, REPO)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True), home


def finish(proc: subprocess.Popen, home: Path) -> tuple[int, str, list[str]]:
    """Exit status, output and what the run left in its TMPDIR."""
    out, _ = proc.communicate(timeout=300)
    left = sorted(p.name for p in (home / "tmp").iterdir())
    shutil.rmtree(home)
    return proc.returncode, out, left


def test_two_users_one_after_the_other(users):
    for who in users:
        code, out, left = finish(*start_check(who, SOLUTION.read_text()))
        assert code == 0, out[-3000:]
        assert "exit status" not in out and left == []


@pytest.mark.parametrize("path", [UNSANDBOXED, SANDBOXED], ids=["unsandboxed", "rootless"])
def test_two_users_at_the_same_time(users, path):
    right, wrong = SOLUTION.read_text(), SOLUTION.read_text().replace(*MISTAKE)
    assert wrong != right
    runs = [start_check(users[0], right, path), start_check(users[1], wrong, path)]
    (code_a, out_a, left_a), (code_b, out_b, left_b) = [finish(*r) for r in runs]
    assert code_a == 0, out_a[-3000:]
    for out in (out_a, out_b):
        assert ("without the sandbox" in out) == (path == UNSANDBOXED), out[-3000:]
    assert code_b == 1 and "router" in out_b and "exit status" not in out_b, out_b[-3000:]
    assert left_a == left_b == []
