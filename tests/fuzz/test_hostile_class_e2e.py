"""One graded run of a small hostile class through `grader run`, sandboxed, as a TA
runs it: the fuzz suite's invariant end to end (issue 11, item 6).

The class holds an honest student (the reference solution) beside one classmate per
intake attack. The run must exit 0, grade the honest student at the solution's score,
change nothing outside OUT, keep OUT small and name what intake left out.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader.intake.capped import MAX_FILE
from grader.sandbox import bwrap
from tests.fuzz.hostile import EX, MARKERS, SECRET, World, size_of, snapshot, write

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / EX
OUT_CAP = 30 * 1024 * 1024
REFUSED = {  # student -> what the problem must say
    "link-to-solution": "links are never followed",
    "link-to-secret": "links are never followed",
    "folder-link": "links are never followed",
    "link-to-root": "links are never followed",
    "deep": "folders deep",
    "huge": f"over the {MAX_FILE}-byte limit for one file",  # intake leaves it out
    "fifo": "not a regular file",
    "broken-notebook": "not a readable Jupyter notebook",
}


def course_copy(world: World) -> Path:
    """course.yml with lesson 13 only, its paths absolute (other lessons may be mid-edit)."""
    data = yaml.safe_load((REPO / "course.yml").read_text(encoding="utf-8"))
    lesson = data["lessons"]["13"]
    data["lessons"] = {"13": lesson}
    for key in ("solution", "stub", "tests"):
        lesson[key] = str(REPO / lesson[key])
    lesson.pop("submissions", None)
    lesson.pop("out", None)
    if isinstance(data.get("roster"), str):
        data["roster"] = str(REPO / data["roster"])
    return write(world.root / "course.yml", yaml.safe_dump(data, allow_unicode=True).encode())


def hostile_class(world: World) -> None:
    solution = SOLUTION.read_bytes()
    subs = world.subs
    write(subs / "honest" / EX, solution)
    write(subs / os.fsdecode(b"caf\xe9") / EX, solution)             # non-UTF-8 folder
    write(subs / "odd-name" / os.fsdecode(b"moe\xff.py"), solution)  # non-UTF-8 file
    (subs / "link-to-solution").mkdir()
    (subs / "link-to-solution" / EX).symlink_to(SOLUTION)
    (subs / "link-to-secret").mkdir()
    (subs / "link-to-secret" / EX).symlink_to(world.secret)
    write(world.root / "host/elsewhere" / EX, solution)
    (subs / "folder-link").symlink_to(world.root / "host/elsewhere")
    (subs / "link-to-root").symlink_to("/")
    write(subs / "deep" / Path(*["d"] * 40) / EX, solution)
    (subs / "huge").mkdir()
    with (subs / "huge" / EX).open("wb") as f:
        f.truncate(2 << 30)
    (subs / "fifo").mkdir()
    os.mkfifo(subs / "fifo" / EX)
    write(subs / "broken-notebook/13_moe.ipynb", json.dumps(
        {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
            {"cell_type": "code", "metadata": {}, "source": None, "outputs": [],
             "execution_count": None}]}).encode())


@pytest.mark.slow
def test_hostile_class_graded_end_to_end():
    reason = bwrap.probe().reason or (None if os.geteuid() == 0 else "not root")
    if reason:
        pytest.skip(f"sandbox not available: {reason}")
    world = World()
    try:
        course = course_copy(world)
        hostile_class(world)
        solution_digest = hashlib.sha256(SOLUTION.read_bytes()).hexdigest()
        world.freeze()
        proc = subprocess.run(
            [sys.executable, "-m", "grader.cli", "run", "--course", str(course), "--lesson", "13",
             "--submissions", str(world.subs), "--out", str(world.out), "--jobs", "1"],
            cwd=REPO, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads((world.out / "scores.json").read_text(encoding="utf-8"))
        got = {s["student_id"]: s for s in doc["students"]}

        def full(sid: str) -> bool:  # every code part at full marks (no check question
            parts = got[sid]["parts"].values()  # is answered: the written part is 0)
            return sum(p["score"] for p in parts) == sum(p["max_score"] for p in parts) > 0

        assert full("honest"), got["honest"]["tests"]
        odd = [sid for sid in got if sid.startswith("caf\ufffd~")]
        assert len(odd) == 1 and full(odd[0])
        assert full("odd-name")
        for sid, why in REFUSED.items():
            assert got[sid]["score"] == 0 and why in got[sid]["problem"], (sid, got[sid]["problem"])
        assert "left out by intake" in proc.stderr and "link-to-secret: Left out" in proc.stderr
        # outside OUT, only the class's answers to the check questions, beside course.yml
        # (grades/13/answers.jsonl: a new OUT must not lose what TAs mark against)
        after = snapshot(world.root, world.out)
        grades = str(world.root / "grades")
        kept = {p: what for p, what in after.items() if not p.startswith(grades + "/")
                and p != grades}
        assert kept == world.before, "the run wrote outside OUT"
        assert set(after) - set(kept) == {grades, f"{grades}/13", f"{grades}/13/answers.jsonl"}
        assert hashlib.sha256(SOLUTION.read_bytes()).hexdigest() == solution_digest
        assert size_of(world.out) < OUT_CAP
        leaked = [str(p) for p in world.out.rglob("*") if p.is_file()
                  and any(m.encode() in p.read_bytes() for m in MARKERS)]
        assert leaked == [] and SECRET not in proc.stderr + proc.stdout
    finally:
        world.close()
