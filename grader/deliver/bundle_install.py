"""Set up a student bundle on a laptop: `python install.py` (Linux, macOS, Windows).

It installs into the virtual environment it runs in, or else makes `.venv` beside
this file and runs itself there. A torch already installed is kept (the check works
with it, and says so when the graded run uses another version); otherwise torch
comes as the CPU build: from the PyTorch CPU index, or, where that index cannot be
reached, from pip's own indexes only if what they offer is a CPU build (macOS and
Windows wheels are; Linux ones from PyPI pull several GB of CUDA), never CUDA. Then
the bundle itself (`pip install -e .`), which needs no other torch. Standard library
only: it runs before anything is installed. The bundle writes the graded run's torch
version and the CPU index into TORCH and CPU_INDEX below.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import venv
from importlib import metadata
from pathlib import Path

# Both written here by `grader student-bundle` (grader/deliver/torch_pin.py): the
# graded run's torch version and the PyTorch CPU index
TORCH = ""
CPU_INDEX = ""
HERE = Path(__file__).resolve().parent


def _in_venv() -> bool:
    return sys.prefix != sys.base_prefix or bool(os.environ.get("CONDA_PREFIX"))


def _venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], text=True,
                          capture_output=True)


def _reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10):
            return True
    except (OSError, ValueError):
        return False


def _offered_torch() -> str | None:
    """The torch version pip's own indexes would install, resolved without
    downloading it, or None."""
    done = _pip("install", "--dry-run", "--quiet", "--no-deps", "--report", "-",
                f"torch=={TORCH}")
    try:
        return json.loads(done.stdout)["install"][0]["metadata"]["version"]
    except (ValueError, KeyError, IndexError):
        return None


def install_torch() -> str:
    """The torch this environment will use: kept, or a CPU build installed. Exits with
    a message where no CPU build can be had."""
    try:
        have = metadata.version("torch")
    except metadata.PackageNotFoundError:
        have = None
    if have is not None:
        note = "" if have.split("+")[0] == TORCH else f"; the graded run uses torch {TORCH}"
        print(f"install: torch {have} is already installed: kept{note}")
        return have
    if _reachable(f"{CPU_INDEX}/torch/"):
        print(f"install: torch {TORCH}+cpu, the CPU build, from {CPU_INDEX}")
        done = _pip("install", "--index-url", CPU_INDEX, f"torch=={TORCH}+cpu")
    else:
        offered = _offered_torch()
        if offered is None or (sys.platform.startswith("linux") and "+cpu" not in offered):
            sys.exit(f"install: {CPU_INDEX} cannot be reached, and pip's own indexes offer "
                     f"no CPU build of torch {TORCH} here (only one with CUDA, several GB)."
                     f" Install a CPU build of torch yourself, then run install.py again.")
        print(f"install: torch {offered} from pip's own indexes ({CPU_INDEX} cannot be "
              f"reached)")
        done = _pip("install", f"torch=={TORCH}")
    if done.returncode:
        sys.exit(f"install: pip could not install torch:\n{done.stderr[-3000:]}")
    return metadata.version("torch")


def main() -> None:
    if not _in_venv():
        folder = HERE / ".venv"
        if not _venv_python(folder).exists():
            print(f"install: creating {folder}")
            venv.create(folder, with_pip=True)
        sys.exit(subprocess.call([str(_venv_python(folder)), __file__, *sys.argv[1:]]))
    torch = install_torch()
    done = _pip("install", "-e", str(HERE))
    if done.returncode:
        sys.exit(f"install: pip could not install the bundle:\n{done.stderr[-3000:]}")
    grader = Path(sys.executable).parent / "grader"
    print(f"install: done, with torch {torch}. Check your work with: {grader} check")


if __name__ == "__main__":
    main()
