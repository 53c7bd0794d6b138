"""The template (grader/sandbox/template.py) holds nothing private. The Gradescope run's
zygotes are forks of it, in container mode with and without namespaces: torch's pages
are shared with the trusted process, so the template must fork before that process
reads anything a submission must not see.

A trusted process here loads a marker (a string it keeps, and a descriptor it keeps
open: what the course, the hidden tests or the recording would be) after starting its
template, as the Gradescope run does; a submission scans its own memory (gc objects,
its frames, every writable mapping) and its descriptors for it and finds nothing.
The control loads the marker before starting the template: there the scan must find
it, so the test fails if the template ever held private data.
"""
from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from test_no_reach import COURSE_PARTS, PREFIX, _container_reason, _spy
from conftest import REPO, SOLUTION

TRUSTED = r'''
import os, sys
from pathlib import Path

course_yml, marker_file, when, refused = sys.argv[1:5]
held = []

def load():
    """What the trusted side read that no submission may see: kept, and left open."""
    held.append(Path(marker_file).read_text(encoding="utf-8"))
    held.append(os.open(marker_file, os.O_RDONLY))

if when == "before":  # the control: a template forked after the private data was read
    load()
from grader.sandbox.template import Template

template = Template.start()
if when == "after":  # as the Gradescope run: the template first
    load()
from grader import config
from grader.sandbox import bwrap
from grader.sandbox.limits import Limits, StudentError
from grader.sandbox.session import Session
from grader.sandbox.slot import Sandbox

course = config.load(Path(course_yml))
lesson = course.lesson("13")
support = bwrap.Support("container", refused=refused or None)
limits = Limits(test_wall_s=120, submission_wall_s=300, cpu_s=300)
with template, Sandbox(course.path(lesson.probes), True, tuple(lesson.preload),
                       support=support, template=template) as sandbox:
    assert sandbox.proc.__class__.__name__ == "Made", sandbox.proc  # made from the template
    slot = sandbox.slot()
    session = Session(slot, sys.stdin.read(), lesson.exercise, lesson.provides, limits)
    try:
        session.call("route", {})
    except StudentError as exc:
        print(exc.message)
    finally:
        session.close()
        slot.close()
'''

# the spy's descriptors, each read for the marker (its own socket and pipes among them)
FDS = r'''
def _fds(want):
    seen = set()
    for name in _os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if _os.path.isfile(f"/proc/self/fd/{fd}"):
                seen |= _kinds(_os.pread(fd, 1 << 20, 0))
        except (OSError, ValueError):
            continue
    return seen
'''


def _scan_fds(spy: str) -> str:
    """The spy, with its descriptors scanned too (said as `fds=` in its message)."""
    head, sep, tail = spy.partition("_mem, _objects,")
    assert sep
    return (head + FDS + sep + tail).replace(
        'raise RuntimeError("REACH memory="',
        'raise RuntimeError("FDS " + ",".join(sorted(_fds(_WANT))) + " REACH memory="')


@pytest.fixture
def course_copy():
    """The course in a folder any uid may cross (container mode without namespaces
    closes the course's folder to submissions: a copy's, not the repository's)."""
    top = Path(tempfile.mkdtemp(prefix="template-"))
    top.chmod(0o755)
    for name in COURSE_PARTS:
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, top / name)
    yield top
    shutil.rmtree(top)


@pytest.mark.parametrize("refused", ["", "the test refuses namespaces"],
                         ids=["namespaced", "no-namespaces"])
@pytest.mark.parametrize("when", ["after", "before"], ids=["template-first", "control"])
def test_a_zygote_from_the_template_holds_nothing_the_trusted_side_read(
        course_copy, tmp_path, refused, when):
    if reason := _container_reason():
        pytest.skip(reason)
    tag = secrets.token_hex(4)
    marker = course_copy / "private.txt"
    marker.write_text(f"{PREFIX}private{tag}\n", encoding="utf-8")
    marker.chmod(0o600)
    own = f"OWN{tag}"
    spy = _scan_fds(_spy([], own, {"private": f"private{tag}", "own": own}))
    done = subprocess.run([sys.executable, "-c", TRUSTED, str(course_copy / "course.yml"),
                           str(marker), when, refused], input=spy, capture_output=True,
                          text=True, timeout=600, cwd=course_copy,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                               "PYTHONPATH": str(REPO)})
    said = re.search(r"FDS (\S*) REACH (memory=\S* disk=\S* objects=\d+ files=\d+ mem=\S+)",
                     done.stdout)
    assert said, done.stdout[-3000:] + done.stderr[-3000:]
    fds = set(filter(None, said.group(1).split(",")))
    found = dict(kv.split("=", 1) for kv in said.group(2).split())
    how, _, raw = found["mem"].partition(":")
    assert "own" in found["memory"] and how in ("read", "ctypes") and "own" in raw, said.group(0)
    assert "private" not in fds, said.group(0)  # no descriptor of the trusted side's
    if when == "before":  # the control: the scan finds what the template held
        assert "private" in found["memory"], said.group(0)
    else:
        assert "private" not in found["memory"], said.group(0)


def test_the_gradescope_run_loads_the_earlier_solutions_after_its_template(
        autograder_zip13b, tmp_path):
    """Lesson 13b's Gradescope run loads lessons 10-13's solutions on the trusted side
    (its stand-ins' answers), before the submission imports: a marker the zip's
    lesson-10 solution holds is nowhere in the submission's memory or descriptors,
    where its own marker is found (the scan's control). The zip's real run_autograder,
    sandboxed where this machine can."""
    import json
    import os
    import zipfile

    from grader.sandbox import bwrap

    tag = secrets.token_hex(4)
    top = Path(tempfile.mkdtemp(prefix="template-gs-"))
    top.chmod(0o755)
    try:
        root = top / "autograder"
        with zipfile.ZipFile(autograder_zip13b) as z:
            z.extractall(root / "source")
        (root / "source" / "run_autograder").chmod(0o755)
        earlier = root / "source" / "solutions" / "10_rmsnorm.py"
        earlier.write_text(earlier.read_text(encoding="utf-8")
                           + f'\n_HELD = "{PREFIX}earlier{tag}"\n', encoding="utf-8")
        course_yml = root / "source" / "course.yml"  # the spy's scan within its limits
        doc = yaml.safe_load(course_yml.read_text(encoding="utf-8"))
        doc.setdefault("defaults", {}).setdefault("limits", {}).update(
            test_wall_s=120, submission_wall_s=300, cpu_s=300)
        course_yml.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
        own = f"OWN{tag}"
        spy = _scan_fds(_spy([], own, {"earlier": f"earlier{tag}", "own": own}))
        assert spy.startswith(SOLUTION.read_text(encoding="utf-8"))
        (root / "submission").mkdir()
        (root / "submission" / "13b_assembly.py").write_text(
            (REPO / "solutions" / "13b_assembly.py").read_text(encoding="utf-8")
            + spy[len(SOLUTION.read_text(encoding="utf-8")):], encoding="utf-8")
        (root / "submission_metadata.json").write_text(json.dumps({"users": [{"sid": "s1"}]}))
        env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable,
               "GRADER_ARGS": "--unsandboxed" if bwrap.probe().reason else ""}
        done = subprocess.run([str(root / "source" / "run_autograder")], env=env,
                              capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        output = json.loads((root / "results" / "results.json").read_text())["output"]
    finally:
        shutil.rmtree(top)
    said = re.search(r"FDS (\S*) REACH (memory=\S* disk=\S* objects=\d+ files=\d+ mem=\S+)",
                     output)
    assert said, output[-3000:]
    found = dict(kv.split("=", 1) for kv in said.group(2).split())
    assert "own" in found["memory"], said.group(0)  # the control: the scan works
    assert "earlier" not in found["memory"] and "earlier" not in said.group(1), said.group(0)


def test_the_preload_imports_no_file_of_the_course_folder(tmp_path, monkeypatch):
    """The Gradescope run starts the template in the zip's folder (the course's): a
    preloaded name that a file there also has is imported from the installed
    libraries, never from that file, which would be read before the fork."""
    from grader.sandbox import template

    (tmp_path / "gs_preload_probe.py").write_text("HELD = 'read from the course folder'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path])
    with pytest.raises(ModuleNotFoundError):
        template._preload(("gs_preload_probe",))
    assert "gs_preload_probe" not in sys.modules and sys.path[:2] == ["", str(tmp_path)]
    template._preload(("json",))  # an installed one is imported
