"""The Gradescope run (the autograder zip's run_autograder, in container mode): the
submission's code looks in its own memory (frames, gc objects, its raw writable
memory) and on disk for a roster planted in the autograder's course.yml and a marker
in a hidden test's source, and for any graded request; it finds none. (When the
zygote was a fork of the grader, boot's frames held the course and its roster.)"""
from __future__ import annotations

import re
import secrets
import shutil

import yaml

from test_no_reach import PREFIX, _spy
from tests.e2e.test_gradescope_layout import (  # noqa: F401 - fixtures
    gradescope_run,
    gradescope_setup,
    gs_root,
)


def test_the_gradescope_run_holds_nothing_private_in_the_childs_memory(
        gradescope_setup, gs_root, tmp_path):  # noqa: F811 - the fixtures
    tag = secrets.token_hex(4)
    source = tmp_path / "source"  # the autograder's files, with what must stay hidden
    shutil.copytree(gradescope_setup, source, symlinks=True)
    yml = source / "course.yml"
    doc = yaml.safe_load(yml.read_text(encoding="utf-8"))
    # the spy scans at import, within a test's wall limit: a loaded machine must not
    # end it as a timeout, with nothing said
    doc.setdefault("defaults", {}).setdefault("limits", {}).update(
        test_wall_s=120, submission_wall_s=300, cpu_s=300)
    doc["roster"] = {"someone": {"name": "Ada Roster",
                                 "email": f"{PREFIX}roster{tag}@example.edu"}}
    yml.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    tests = sorted((source / "hidden_tests" / "13_moe").glob("test_*.py"))
    assert tests
    with tests[0].open("a", encoding="utf-8") as f:
        f.write(f"\n# {PREFIX}hidden{tag}: only the hidden test says this\n")
    root = gs_root
    roots = [str(root / "source"), str(root / "submission"), str(root / "results"), "/tmp"]
    spy = _spy(roots, f"OWN{tag}", {"roster": f"roster{tag}@example.edu",
                                    "hidden": f"hidden{tag}", "own": f"OWN{tag}"})
    res, output, _, _ = gradescope_run(root, source, spy)
    said = re.search(r"REACH (memory=\S* disk=\S* objects=\d+ files=\d+ mem=\S+ forked=\d "
                     r"requests=\d+ requests_in_memory=\d+) END", res.get("output", ""))
    assert said, (res.get("output", "")[-3000:], output[-3000:])
    print(f"\ngradescope: {said.group(1)}")
    found = dict(kv.split("=", 1) for kv in said.group(1).split())
    assert "own" in found["memory"] and "own" in found["disk"], said.group(1)
    how, _, raw = found["mem"].partition(":")
    assert how in ("read", "ctypes") and "own" in raw.split(","), said.group(1)
    assert found["forked"] == "0", said.group(1)
    for what in ("roster", "hidden"):
        assert what not in found["memory"] and what not in found["disk"], said.group(1)
    assert found["requests"] == "0" and found["requests_in_memory"] == "0", said.group(1)
    assert res["score"] == 0
