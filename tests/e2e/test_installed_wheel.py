"""An installed grader (a wheel, not this editable checkout) finds its pages' templates:
pyproject.toml ships templates/ as package data, grader/templates (issue 28). The wheel
is built from a copy of the project's files, installed into a folder of its own, and a
student's page is rendered by that install alone (en and zh)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RENDER = """
import sys
from pathlib import Path
import grader
from grader import config
from grader.pages import feedback
from grader.text import strings
from grader.record import GradeRecord

target = Path(sys.argv[1]).resolve()
assert Path(grader.__file__).resolve().is_relative_to(target), grader.__file__
assert strings.TEMPLATES.resolve() == target / "grader" / "templates", strings.TEMPLATES
course = config.load(sys.argv[2])
record = GradeRecord(student_id="ann", lesson="13", score=0.0, max_score=10.0,
                     status="missing", parts={}, tests=[])
for lang in ("en", "zh"):
    page = feedback.render_student(record, course, "13", lang)
    assert page.startswith("<!DOCTYPE html>") and "ann" in page, page[:200]
print("rendered")
"""


@pytest.mark.slow
def test_an_installed_wheel_renders_a_page(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("grader", "templates"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", src)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(tmp_path / "dist"), str(src)], check=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True, cwd=tmp_path)
    assert not (target / "templates").exists()  # inside the package, not beside it
    done = subprocess.run([sys.executable, "-c", RENDER, str(target), str(ROOT / "course.yml")],
                          cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "rendered", done.stderr[-2000:]
