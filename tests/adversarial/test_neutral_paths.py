"""No path of the machine's reaches a child: the virtualenv, the interpreter, the
grader's code and the probes are at neutral paths inside (/venv, /python, /grader),
and the course's folder, the class and the grader's checkout show nowhere a child
looks for them: its mounts, its cgroup, its interpreter's paths, its environment,
the command lines it can list, its traceback (what the page shows). A mount's root
in /proc/self/mountinfo is where the bound files lie on the host: the grader's code
and the probes are copies, so theirs name nothing; the interpreter's installation and
the virtualenv's libraries are too large to copy, and theirs still show (design.md).
Run in every mode that has namespaces; without any (container-no-userns) the child
sees the container's own paths, which the run says (test_machine_view.py)."""
from __future__ import annotations

import os
import re
import shutil
import sys

import pytest

import modes
from conftest import REPO, hostile, require_sandbox

pytestmark = pytest.mark.slow

# At import: what the child sees, in one message (its problem, on the page)
SPY = hostile(at_import='''
import os, sys
mounts = [line.split() for line in open("/proc/self/mountinfo")]
points = " ".join(m[4] for m in mounts)
roots = " ".join(m[3] for m in mounts if not m[4].startswith(("/python", "/venv", "/usr")))
lines = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        lines.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
    except OSError:
        pass
seen = " | ".join([points, roots, open("/proc/self/cgroup").read(), " ".join(sys.path),
                   sys.prefix, sys.base_prefix, sys.executable, repr(dict(os.environ)),
                   *lines, os.getcwd(), __file__])
raise RuntimeError("SEEN<<" + seen + ">>END")
''')


def _machine_paths(top) -> set[str]:
    """What must not show inside: the checkout, the run's folder (course, class, OUT),
    the virtualenv and the interpreter's installation (but one under /usr)."""
    paths = {str(REPO), str(top), sys.prefix, os.path.realpath(sys.prefix)}
    base = os.path.realpath(sys.base_prefix)
    if not base.startswith("/usr/"):
        paths.add(base)
    return paths


@pytest.mark.parametrize("mode", ["own", "userns", "container"])
def test_a_child_sees_no_path_of_the_machine(mode):
    if reason := modes.reason(mode):
        pytest.skip(reason)
    if mode == "own":
        require_sandbox()
    top = modes.class_folder()
    try:
        records, said = modes.grade(top, mode, {"spy": SPY})
        machine = _machine_paths(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    failed = [t for t in records["spy"]["tests"] if t["outcome"] != "passed"]
    assert failed, said
    text = " ".join(t["message"] + ((t["error"] or {}).get("traceback") or "") for t in failed)
    seen = re.findall(r"SEEN<<(.*?)>>END", text, re.S)
    assert seen, text[:2000]
    assert " /venv/lib " in seen[0] and "/grader/probes.py" in seen[0], seen[0][:2000]
    leaks = sorted(p for p in machine if p in text)
    assert leaks == [], (leaks, seen[0][:3000])
