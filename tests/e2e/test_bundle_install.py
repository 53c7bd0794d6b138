"""A student bundle installs into a fresh venv on Python 3.10 and 3.13 with the torch
already there: `install.py` keeps it, installs no second torch, and the installed
`grader` (the student's commands only) passes the solution. Each interpreter, and a
torch built for it, must already be on this machine (pyenv's, and scripts/test-py310.sh's
venv for 3.10): downloading one is not this test's job, so it skips where either is
missing and says which."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.10", "3.13")

pytestmark = pytest.mark.slow


def interpreter(version: str) -> str | None:
    """This machine's Python `version` (pyenv's, else pythonX.Y on PATH), or None."""
    candidates = []
    if shutil.which("pyenv"):
        done = subprocess.run(["pyenv", "latest", version], capture_output=True, text=True)
        prefix = subprocess.run(["pyenv", "prefix", done.stdout.strip()], capture_output=True,
                                text=True).stdout.strip() if done.returncode == 0 else ""
        if prefix:
            candidates.append(f"{prefix}/bin/python{version}")
    candidates.append(f"python{version}")
    for python in candidates:
        ok = subprocess.run([python, "-c", f"import sys; assert sys.version.startswith("
                             f"'{version}.')"], capture_output=True) if shutil.which(
            python) else None
        if ok is not None and ok.returncode == 0:
            return python
    return None


def torch_site(python: str, version: str) -> Path | None:
    """A site-packages folder on this machine holding a torch for this interpreter."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    venvs = [Path(os.environ["VENV310"])] if version == "3.10" and "VENV310" in os.environ \
        else [cache / "minimind-grader" / f"venv-py{version.replace('.', '')}"]
    for venv in venvs:
        sites = list(venv.glob(f"lib/python{version}/site-packages"))
        if sites and (sites[0] / "torch" / "__init__.py").exists():
            return sites[0]
    return None


@pytest.fixture
def bundle(student_bundle, tmp_path) -> Path:
    """Lesson 10's bundle, built once for the suite (tests/conftest.py), copied: the
    install runs in it and may leave its build files there."""
    return Path(shutil.copytree(student_bundle("10"), tmp_path / "lesson10"))


@pytest.mark.parametrize("version", PYTHONS)
def test_bundle_installs_keeping_the_torch_there(version, bundle, tmp_path):
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    site = torch_site(python, version)
    if site is None:
        pytest.skip(f"no torch for Python {version} on this machine")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    # the torch already there: that folder on the fresh venv's path
    (next(venv.glob("lib/python*/site-packages")) / "torch_here.pth").write_text(f"{site}\n")
    bin_dir = venv / "bin"
    before = subprocess.run([bin_dir / "python", "-c",
                             "import importlib.metadata as m; print(m.version('torch'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    done = subprocess.run([bin_dir / "python", "install.py"], cwd=bundle, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"torch {before} is already installed: kept" in done.stdout
    listed = subprocess.run([bin_dir / "python", "-m", "pip", "list", "--format=json"],
                            capture_output=True, text=True, check=True).stdout
    torches = [d for d in json.loads(listed) if d["name"] == "torch"]
    assert [t["version"] for t in torches] == [before]
    assert not list(next(venv.glob("lib/python*/site-packages")).glob("torch*.dist-info"))
    helped = subprocess.run([bin_dir / "grader", "--help"], capture_output=True, text=True)
    commands = [line.split()[0] for line in helped.stdout.split("Commands:")[1].splitlines()
                if line.strip()]
    assert commands == ["check"], helped.stdout
    work = tmp_path / "10_rmsnorm.py"
    work.write_text((ROOT / "solutions" / "10_rmsnorm.py").read_text())
    # without bwrap (as on macOS): inside it the torch borrowed through a .pth file,
    # outside the venv, would not be there (tests/e2e/test_bundle.py checks in bwrap)
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    # from the student's work folder, as install.py's last line says (no course.yml there)
    checked = subprocess.run([bin_dir / "grader", "check", "--json", str(work)], cwd=tmp_path,
                             capture_output=True, text=True, timeout=600,
                             env={**os.environ, "PATH": str(no_bwrap)})
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["passed"] == report["total"] > 0
