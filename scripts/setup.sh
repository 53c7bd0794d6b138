#!/usr/bin/env bash
# Idempotent set-up: the Debian packages the grader and its tests use, then .venv.
# PYTHON and VENV choose the interpreter and the venv (CI's Python 3.10 run uses both).
#   bubblewrap        the sandbox for student code
#   chromium          headless browser that checks the HTML pages in the tests
#   fonts-wqy-zenhei  a CJK font, so Chinese feedback renders (and screenshots read)
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -e /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc ] || missing+=(fonts-wqy-zenhei)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: please install these Debian packages as root: ${missing[*]}" >&2
  fi
fi

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# Reinstall only when the project's requirements changed since the last install.
stamp=$VENV/.installed
# torch first, as its CPU build: by name from the PyTorch CPU index where it can be
# reached, else the plain package (pip's own indexes and local wheels: on Linux, PyPI's
# is a CUDA build). A torch already at the pinned version is kept. It says which.
CPU_INDEX=$(sed -n 's/^CPU_INDEX = "\([^"]*\)".*/\1/p' grader/deliver/torch_pin.py)
TORCH=$(sed -n 's/.*"torch==\([^"]*\)".*/\1/p' pyproject.toml)
torch_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null
}
install_torch() {
  if [ "$(torch_version | cut -d+ -f1)" = "$TORCH" ]; then
    return
  fi
  if "$VENV/bin/python" -c "import urllib.request as u; u.urlopen('$CPU_INDEX/torch/', timeout=10)" \
     >/dev/null 2>&1; then
    echo "setup: torch==$TORCH+cpu, the CPU build, from $CPU_INDEX"
    "$VENV/bin/python" -m pip install -q --index-url "$CPU_INDEX" "torch==$TORCH+cpu"
  else
    echo "setup: $CPU_INDEX cannot be reached: torch==$TORCH from pip's own indexes"
    "$VENV/bin/python" -m pip install -q "torch==$TORCH"
  fi
}
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages"
  log=$VENV/install.log
  if ! { "$VENV/bin/python" -m pip install -q --upgrade pip && install_torch &&
         "$VENV/bin/python" -m pip install -q -e '.[cluster,nbgrader,test]'; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "setup: pip failed; the full log is $log" >&2
    exit 1
  fi
  grep '^setup:' "$log" || true
  echo "setup: installed torch $(torch_version) ($("$VENV/bin/python" -c \
    'import torch; print(f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU build")'))"
  touch "$stamp"
fi
