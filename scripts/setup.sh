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
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages (torch is pinned to the CPU wheel 2.13.0)"
  log=$VENV/install.log
  if ! { "$VENV/bin/python" -m pip install -q --upgrade pip &&
         "$VENV/bin/python" -m pip install -q -e '.[cluster,nbgrader,test]'; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "setup: pip failed; the full log is $log" >&2
    exit 1
  fi
  touch "$stamp"
fi
