"""The Gradescope autograder zip runs in Gradescope's folder layout, laid out locally;
Canvas zips and notebooks are graded like plain files."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.export import build_autograder_zip
from grader.sandbox.bwrap import unavailable_reason

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "13_moe.py"
STUB = REPO / "exercises" / "13_moe.py"
GRADER_ARGS = ["--unsandboxed"] if unavailable_reason() else []

pytestmark = pytest.mark.slow


def as_notebook(source: str) -> str:
    """The solution as a notebook: one cell per top-level block, plus IPython lines."""
    blocks = source.split("\n\n\n")
    cells = [["%matplotlib inline\n", "!pip install torch\n"]] + \
        [b.splitlines(keepends=True) for b in blocks]
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": c} for c in cells]})


def gradescope_layout(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "autograder"
    zip_path = build_autograder_zip(REPO, "13", tmp_path / "zip")
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        assert "setup.sh" in names and "run_autograder" in names
        z.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    for name, text in files.items():
        (root / "submission").mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text, encoding="utf-8")
    (root / "submission_metadata.json").write_text(json.dumps(
        {"users": [{"email": "ava@u.edu", "id": 1, "name": "Ava", "sid": "s123"}]}))
    return root


def run_autograder(root: Path) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable,
           "GRADER_ARGS": " ".join(GRADER_ARGS)}
    done = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def check_results(res: dict) -> None:
    assert isinstance(res["score"], (int, float)) and isinstance(res["tests"], list)
    for t in res["tests"]:
        assert t["status"] in {"passed", "failed"}
        assert {"score", "max_score", "name", "number", "output", "tags",
                "visibility"} <= set(t)
        assert t["score"] <= t["max_score"]


@pytest.mark.parametrize("name, text", [
    ("13_moe.py", SOLUTION.read_text()),
    ("13_moe.ipynb", as_notebook(SOLUTION.read_text())),
], ids=["py", "ipynb"])
def test_autograder_grades_the_solution_in_full(tmp_path, name, text):
    res = run_autograder(gradescope_layout(tmp_path, {name: text}))
    check_results(res)
    assert res["score"] == pytest.approx(10.0)
    assert all(t["status"] == "passed" for t in res["tests"])
    if name.endswith(".ipynb"):
        assert "Left out 2 IPython" in res["output"]


def test_autograder_grades_the_stub_at_zero(tmp_path):
    res = run_autograder(gradescope_layout(tmp_path, {"13_moe.py": STUB.read_text()}))
    check_results(res)
    assert res["score"] == 0 and any(t["status"] == "failed" for t in res["tests"])


def test_canvas_zip_is_graded_like_plain_files(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "submissions.zip", "w") as z:
        z.writestr("alvarezava_4001_77001_13_moe.py", SOLUTION.read_text())
        z.writestr("brownbob_late_4002_77002_13_moe.ipynb", as_notebook(SOLUTION.read_text()))
        z.writestr("chencarl_4003_77003_13_moe.py", STUB.read_text())
    out = tmp_path / "out"
    grader = Path(sys.executable).parent / "grader"
    done = subprocess.run([str(grader), "run", "--lesson", "13", "--submissions", str(subs),
                           "--out", str(out), *GRADER_ARGS], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert (out / "scores.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    scores = {s["student_id"]: s for s in json.loads((out / "scores.json").read_text())
              ["students"]}
    assert scores["4001"]["score"] == scores["4002"]["score"] == pytest.approx(10.0)
    assert scores["4003"]["score"] == 0
