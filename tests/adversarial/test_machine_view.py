"""What of the machine a child sees, in every mode: the machine's processes (with their
command lines), its /tmp, and a world-readable file of the host. In container mode (the
Gradescope run) a child once listed every process of the machine and read its /tmp:
no pid or mount namespace was made there. Now bwrap runs in a user namespace the
grader makes, and the child sees what it sees in root mode: none of the three. Where
the container refuses a user namespace too (Docker's default seccomp profile,
simulated by no_userns.py), the run says what a child then sees."""
from __future__ import annotations

import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import modes

from conftest import SOLUTION

pytestmark = pytest.mark.slow

# At import, before any probe: report what it found and fail the run (its problem says it)
SPY = '''
import os as _os
def _seen():
    procs, lines = 0, 0
    for pid in filter(str.isdigit, _os.listdir("/proc")):
        procs += 1
        try:
            if {marker!r} in open(f"/proc/{{pid}}/cmdline", "rb").read().decode(errors="ignore"):
                lines += 1
        except OSError:
            pass
    try:
        tmp = sum({marker!r} in name for name in _os.listdir("/tmp"))
    except OSError:
        tmp = 0
    files = 0
    for path in {paths!r}:
        try:
            files += {marker!r} in open(path).read()
        except OSError:
            pass
    return f"procs={{procs}} cmdlines={{lines}} tmp={{tmp}} files={{files}}"
raise RuntimeError("SEEN " + _seen() + " END")
'''


@pytest.mark.parametrize("mode", ["own", "container"])
def test_a_child_sees_nothing_of_the_machine(mode):
    """The machine's process list, /tmp and world-readable files, as in root mode."""
    if reason := modes.reason(mode):
        pytest.skip(reason)
    marker = "MMGVIEW" + secrets.token_hex(6)
    top = modes.class_folder()
    # a process of the machine, a file in its /tmp and one beside the class, all open
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", marker])
    in_tmp = Path(tempfile.gettempdir()) / f"{marker}.txt"
    beside = top / f"{marker}.txt"
    try:
        for path in (in_tmp, beside):
            path.write_text(marker)
            path.chmod(0o644)
        spy = SOLUTION.read_text(encoding="utf-8") + SPY.format(
            marker=marker, paths=[str(in_tmp), str(beside), f"/tmp/{marker}.txt"])
        records, said = modes.grade(top, mode, {"spy": spy})
    finally:
        host.kill()
        host.wait()
        in_tmp.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(top)], check=True)
    problem = records["spy"]["problem"] or ""
    seen = problem[problem.find("SEEN "):problem.find(" END")]
    assert seen.startswith("SEEN procs="), (records["spy"]["status"], problem, said[-2000:])
    found = dict(kv.split("=") for kv in seen.split()[1:])
    # its own processes only (the slot's and its own, as in root mode), none of the host's
    assert int(found["procs"]) < 5, seen
    assert found["cmdlines"] == found["tmp"] == found["files"] == "0", seen
    if mode == "container":
        assert records["spy"]["sandbox"] == "container"
        assert "container mode:" in said and "without namespaces" not in said, said[-2000:]


def test_without_a_user_namespace_the_run_says_what_a_child_sees():
    """Container mode where no namespace can be had: the note names the cause and the
    three things a child then sees (the test above shows it no longer sees them)."""
    if reason := modes.reason("container-no-userns"):
        pytest.skip(reason)
    top = modes.class_folder()
    try:
        records, said = modes.grade(top, "container-no-userns",
                                    {"alice": SOLUTION.read_text(encoding="utf-8")})
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=True)
    assert records["alice"]["sandbox"] == "container"
    assert records["alice"]["score"] == pytest.approx(10.0), said[-2000:]
    said = " ".join(said.split())  # (the note is wrapped to the terminal's width)
    for words in ("container mode without namespaces", "refuses a user namespace",
                  "processes with their command lines", "/tmp", "world-readable file"):
        assert words in said, (words, said[-2000:])
