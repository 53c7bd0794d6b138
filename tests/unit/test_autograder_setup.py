"""The autograder zip's setup.sh: torch's CPU build first, the pinned version from the
default index where the CPU index fails, and a closing account of what it installed.
It runs here against stand-ins for apt-get, python3 and pip, so no network is used."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from grader.deliver import autograder_zip
from grader.config import LimitsConfig

ROOT = Path(__file__).resolve().parents[2]
PIN = re.search(r'"torch==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)

# A venv whose pip logs each call, fails for the CPU index unless CPU_OK is set, and
# reports torch, plus CUDA packages when the default index's torch was installed.
FAKE_PYTHON = r"""#!/usr/bin/env bash
[ "$1 $2" = "-m venv" ] || exit 2
mkdir -p "$3/bin"
cat > "$3/bin/pip" <<'EOF'
#!/usr/bin/env bash
echo "$*" >> "$PIP_LOG"
case "$*" in
  *--index-url*) [ -n "${CPU_OK:-}" ] && echo cpu > "$PIP_LOG.torch" || exit 1 ;;
  *source) [ -f "$PIP_LOG.torch" ] || echo pypi > "$PIP_LOG.torch" ;;
  "show torch") grep -q cpu "$PIP_LOG.torch" && echo "Version: 2.13.0+cpu" ||
                echo "Version: 2.13.0" ;;
  list*) echo torch==2.13.0; grep -q pypi "$PIP_LOG.torch" &&
         printf 'nvidia-cudnn-cu13==9.20.0.48\ntriton==3.7.1\n' ;;
esac
exit 0
EOF
chmod +x "$3/bin/pip"
"""


@pytest.fixture(scope="module")
def setup_sh() -> str:
    """The zip's setup.sh, made as a build makes it (without the build's grading: the
    zip itself, its setup.sh executable, is tested in tests/e2e/test_gradescope_layout.py)."""
    return autograder_zip.setup_script(ROOT)


def _run(setup_sh: str, tmp_path: Path, cpu_ok: bool) -> tuple[str, list[str]]:
    """Run setup.sh with stand-ins; its output and the pip calls it made."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("apt-get", "useradd"):  # the image's set-up, not under test here
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "python").write_text(FAKE_PYTHON)
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp_path / "setup.sh").write_text(setup_sh)
    log = tmp_path / "pip.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "AUTOGRADER_ROOT": str(tmp_path), "SETUP_PYTHON": str(bin_dir / "python"),
           "PIP_LOG": str(log), "CPU_OK": "1" if cpu_ok else ""}
    done = subprocess.run(["bash", str(tmp_path / "setup.sh")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout, log.read_text().splitlines()


def test_torch_is_pinned_as_in_pyproject(setup_sh):
    assert f"--index-url {autograder_zip.CPU_INDEX} torch=={PIN}" in setup_sh
    assert subprocess.run(["bash", "-n"], input=setup_sh, text=True).returncode == 0


def test_cpu_build_comes_first_and_is_reported(setup_sh, tmp_path):
    out, calls = _run(setup_sh, tmp_path, cpu_ok=True)
    assert f"--index-url {autograder_zip.CPU_INDEX}" in calls[0]
    assert calls[1].endswith(f"{tmp_path}/source")
    assert "setup: installed torch 2.13.0+cpu" in out
    assert "setup: CUDA packages pulled: none" in out
    assert "default index" not in out


def test_falls_back_to_the_default_index_and_says_so(setup_sh, tmp_path):
    out, calls = _run(setup_sh, tmp_path, cpu_ok=False)
    assert f"setup: no torch=={PIN} from {autograder_zip.CPU_INDEX}" in out
    assert calls[1].endswith(f"{tmp_path}/source")
    assert "setup: installed torch 2.13.0\n" in out
    assert re.search(r"CUDA packages pulled: nvidia-cudnn-cu13==\S+ triton==", out)


def test_a_memory_limit_gradescope_cannot_hold_is_warned_of(course):
    """autograder-zip built silently with memory_mb: 1024, which can exhaust 768 MB."""
    assert course.limits_config("13").memory_mb == 1024
    assert autograder_zip.memory_warning(course, "13") == (
        "lesson 13's limits.memory_mb is 1024: with the grader's own ~400 MB, a hungry "
        "submission can exhaust Gradescope's default 768 MB container before its own "
        "limit stops it. Set lessons.13.limits.memory_mb: 256 in course.yml, or give the "
        "autograder more memory in Gradescope's settings (docs/lms.md).")
    lesson = course.lesson("13").model_copy(update={"limits": LimitsConfig(memory_mb=256)})
    small = course.model_copy(update={"lessons": {"13": lesson}})
    assert autograder_zip.memory_warning(small, "13") == ""
