"""Container mode without namespaces (a container that refuses a user namespace too,
no_userns.py) closes the course's folder to the submission's uid: with the
virtualenv inside that folder, honest code that makes torch import a part of itself
lazily (`torch.use_deterministic_algorithms` imports torch._inductor) once failed with
ModuleNotFoundError and scored 0. What the interpreter may import stays readable; the
course's own files (course.yml, solutions, hidden tests) stay closed."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import outside_bwrap

from modes import NO_USERNS

from conftest import SOLUTION
from test_no_reach import class_folder  # noqa: F401 - the fixture: a course copy

LAZY = "\nimport torch as _torch\n_torch.use_deterministic_algorithms(True)\n"
PEEK = '''
import errno as _errno, os as _os
def _peek(path):
    try:
        if _os.path.isdir(path):
            _os.listdir(path)
        else:
            open(path, "rb").read(1)
        return "READ"
    except OSError as exc:
        return _errno.errorcode.get(exc.errno, "?")
raise RuntimeError("PEEK " + " ".join(f"{{n}}={{_peek(p)}}" for n, p in {paths!r}) + " END")
'''


def test_lazy_imports_of_a_venv_in_the_course_folder_work_in_container_mode(class_folder):  # noqa: F811 - the fixture
    if os.geteuid() != 0:
        pytest.skip("container mode needs root (as in a Docker-like container)")
    if not shutil.which("capsh"):
        pytest.skip("capsh is missing")
    top = class_folder
    course = top / "course"
    venv = course / ".venv"  # the grader's virtualenv, reached through the course folder
    venv.symlink_to(sys.prefix, target_is_directory=True)
    private = {"yml": course / "course.yml", "solution": course / "solutions" / "13_moe.py",
               "tests": course / "hidden_tests", "course": course}
    sources = {"honest": SOLUTION.read_text(encoding="utf-8") + LAZY,
               "peek": SOLUTION.read_text(encoding="utf-8")
               + PEEK.format(paths=[(k, str(v)) for k, v in private.items()])}
    for sid, text in sources.items():
        (top / "class" / sid).mkdir(parents=True)
        (top / "class" / sid / "13_moe.py").write_text(text, encoding="utf-8")
    cmd = [str(venv / "bin" / "python"), "-c", "from grader.cli import main; main()", "run",
           "--lesson", "13", "--course", str(course / "course.yml"), "--submissions",
           str(top / "class"), "--out", str(top / "out"), "--jobs", "1"]
    with outside_bwrap(shared=True):  # (tests/conftest.py)
        done = subprocess.run(
            [shutil.which("capsh"), "--drop=cap_sys_admin", "--", "-c",
             "exec " + shlex.join([sys.executable, str(NO_USERNS), *cmd])],
            # a container's environment holds more than plain variables (a CI job's token)
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "GRADER_CONTAINER": "1",
                 "CI_JOB_TOKEN": "not-a-real-token"},
            capture_output=True, text=True, timeout=600, cwd=top)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = {sid: json.loads((top / "out" / "results" / f"{sid}.json").read_text())
               for sid in sources}
    honest = records["honest"]
    assert honest["sandbox"] == "container"
    assert honest["score"] == pytest.approx(10.0), (honest["problem"],
                                                    honest.get("import_traceback"))
    seen = (records["peek"]["problem"] or "") + (records["peek"].get("import_traceback") or "")
    assert "PEEK " in seen, seen
    for name in private:
        assert f"{name}=EACCES" in seen, seen
