#!/usr/bin/env bash
# The unit suite on Python 3.10, the oldest Python the package supports (Gradescope's
# default image has it), in its own venv made by scripts/setup.sh, with the zip's recording
# (tests/e2e/test_recording.py); then the autograder
# zip run as Gradescope runs it, on that same 3.10: CAP_SYS_ADMIN dropped, a 768 MB
# memory cgroup, setup.sh then run_autograder (the container tests of
# tests/e2e/test_gradescope_layout.py; they skip themselves where not root).
#   scripts/test-py310.sh          set up the venv if needed, then run those tests on it
#   scripts/test-py310.sh --find   print the 3.10 interpreter; exit 1 when there is none
# PY310 names the interpreter; otherwise pyenv's 3.10, else python3.10 on PATH.
# VENV310 names the venv. By default it lives outside the checkout, so CI's fresh clones
# reuse it: where the PyTorch CPU index is out of reach, torch for 3.10 comes with its
# CUDA packages (about 5 GB, minutes to install).
set -euo pipefail
cd "$(dirname "$0")/.."

# Print a Python 3.10 interpreter that runs, or nothing.
find_py310() {
  local candidates=()
  [ -n "${PY310:-}" ] && candidates+=("$PY310")
  if command -v pyenv >/dev/null 2>&1; then
    local prefix
    prefix=$(pyenv prefix "$(pyenv latest 3.10 2>/dev/null)" 2>/dev/null) &&
      candidates+=("$prefix/bin/python3.10")
  fi
  candidates+=(python3.10)
  local py
  for py in "${candidates[@]}"; do
    if "$py" -c 'import sys; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1; then
      echo "$py"
      return
    fi
  done
}

py=$(find_py310)
if [ "${1:-}" = --find ]; then
  [ -n "$py" ] || exit 1
  echo "$py"
  exit 0
fi
if [ -z "$py" ]; then
  echo "test-py310: no Python 3.10 interpreter (set PY310, or install 3.10 with pyenv)" >&2
  exit 1
fi
venv=${VENV310:-${XDG_CACHE_HOME:-$HOME/.cache}/minimind-grader/venv-py310}
# The venv's editable install may point at another checkout: install this one again.
if [ -x "$venv/bin/python" ] &&
   ! (cd / && "$venv/bin/python" -c 'import grader, os; print(os.path.realpath(grader.__file__))' 2>/dev/null) |
     grep -qx "$(pwd -P)/grader/__init__.py"; then
  rm -f "$venv/.installed"
fi
PYTHON=$py VENV=$venv scripts/setup.sh
exec "$venv/bin/python" -m pytest -q -s tests/unit tests/e2e/test_recording.py \
  "tests/e2e/test_gradescope_layout.py::test_container_mode_grades_the_solution_in_full" \
  "tests/e2e/test_gradescope_layout.py::test_container_mode_costs_a_known_mistake_its_part" \
  "tests/e2e/test_gradescope_layout.py::test_container_mode_keeps_the_graders_files_from_the_submission"
