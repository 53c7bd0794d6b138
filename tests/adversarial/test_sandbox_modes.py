"""Which sandbox mode the grader picks, and what it says when it can pick none: a TA
whose machine blocks unprivileged user namespaces is told the cause and the fix."""
from __future__ import annotations

import os

import pytest

from grader.sandbox import bwrap


@pytest.mark.parametrize("cause, fix", [
    ("kernel.apparmor_restrict_unprivileged_userns=1", "apparmor_parser"),
    ("user.max_user_namespaces=0", "sysctl user.max_user_namespaces="),
    ("kernel.unprivileged_userns_clone=0", "unprivileged_userns_clone=1"),
], ids=["apparmor", "max", "clone"])
def test_a_blocked_user_namespace_is_named_with_its_fix(monkeypatch, tmp_path, cause, fix):
    """Each setting that blocks them is reported (the others read as allowing)."""
    files = {}
    for i, (_path, (value, why)) in enumerate(bwrap.USERNS_FIX.items()):
        mine = tmp_path / f"setting{i}"
        mine.write_text(value if cause in why else str(1 - int(value)))
        files[str(mine)] = (value, why)
    monkeypatch.setattr(bwrap, "USERNS_FIX", files)
    message = bwrap._userns_blocked()
    assert cause in message and fix in message


def test_otherwise_the_container_profile_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(bwrap, "USERNS_FIX", {str(tmp_path / "absent"): ("1", "never")})
    message = bwrap._userns_blocked()
    assert "seccomp" in message and "Fix:" in message


def test_a_caller_may_declare_a_container():
    """The Gradescope run says so (an argument), whatever markers the container has."""
    assert bwrap._in_container(declared=True)


def test_a_zygote_is_forked_only_unsandboxed(monkeypatch):
    """A fork holds all its parent ever held (course.yml and its roster, the class),
    even with no reference left: sandboxed, in every mode, the zygote is a fresh exec,
    however plain the environment; only unsandboxed (the code runs as this user) may
    it share the grader's torch import as a fork."""
    from grader.sandbox import slot as slots

    for key in list(os.environ):
        monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert not any(slots.forkable(mode) for mode in ("root", "userns", "container"))
    assert slots.forkable("none")
