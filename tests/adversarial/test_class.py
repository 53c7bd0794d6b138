"""A class mixing hostile and honest submissions, graded by `grader run --jobs 2`:
every honest one is scored right, every hostile one loses what it should, and no
process of either slot's uid is left afterwards."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import outside_bwrap

from conftest import (FULL, PARTS, REPO, SOLUTION, course_copy, hostile, require_sandbox,
                      wait_no_processes)
from test_limits import MEMORY_HOG
from test_limits import SOURCES as LIMIT_ATTACKS

WRONG_DISPATCH = hostile(dispatch="return torch.zeros_like(x_flat)")

CLASS = {
    # honest: right, and honestly wrong
    "amy": (SOLUTION.read_text(), FULL),
    "ben": (SOLUTION.read_text() + "\n# ben's own copy\n", FULL),
    "cat": (WRONG_DISPATCH, FULL - PARTS["dispatch"]),
    "dan": (SOLUTION.read_text(), FULL),
    # hostile
    "eve-loop": (LIMIT_ATTACKS["loop-import"], 0.0),
    "fay-fork": (LIMIT_ATTACKS["fork-storm"], FULL - PARTS["dispatch"]),
    "gus-daemon": (LIMIT_ATTACKS["daemon"], FULL),
    "hal-segv": (LIMIT_ATTACKS["segfault"], FULL - PARTS["dispatch"]),
    "ivy-kill": (LIMIT_ATTACKS["kill-parent"], FULL),
    "jon-mem": (MEMORY_HOG, PARTS["ffn"] + PARTS["moe"]),
    "kim-flood": (LIMIT_ATTACKS["stdout-flood"], FULL),
    "lea-exit": (LIMIT_ATTACKS["os-exit"], FULL - PARTS["dispatch"]),
}


def test_mixed_class_with_two_jobs(tmp_path):
    require_sandbox()
    course = course_copy(tmp_path)
    subs = tmp_path / "subs"
    for sid, (source, _) in CLASS.items():
        (subs / sid).mkdir(parents=True)
        (subs / sid / "13_moe.py").write_text(source, encoding="utf-8")
    out = tmp_path / "out"
    # alone: no other test's container-mode run has a student process under a slot uid
    # outside bwrap while this one's are counted
    with outside_bwrap(shared=False):
        done = subprocess.run(
            [sys.executable, "-m", "grader.cli", "run", "--course",
             str(course.root / "course.yml"), "--lesson", "13", "--submissions", str(subs),
             "--out", str(out), "--jobs", "2"],
            capture_output=True, text=True, timeout=300, cwd=REPO)
        left = wait_no_processes()
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "scores.json").read_text())
    got = {s["student_id"]: s for s in doc["students"]}
    assert set(got) == set(CLASS)
    for sid, (_, want) in CLASS.items():
        assert got[sid]["score"] == pytest.approx(want), (sid, got[sid]["status"])
        assert got[sid]["sandboxed"] is True
        assert (out / "feedback" / f"{sid}.html").exists()
    assert got["eve-loop"]["status"] == "timeout"
    # the run's sandboxes are gone; no student process of any slot got out of one
    assert left == []
