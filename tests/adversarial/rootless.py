"""Run adversarial test files as an unprivileged user this script creates (and deletes):
the sandbox then runs rootless, in user namespaces. Run as root:

    .venv/bin/python tests/adversarial/rootless.py tests/adversarial/test_escape.py ...

It exits with pytest's status; the output ends with pytest's summary line.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import unprivileged

REPO = Path(__file__).resolve().parents[2]


def main(files: list[str]) -> int:
    reason = unprivileged.usable()
    if reason:
        print(f"rootless: cannot run the adversarial suite as another user: {reason}")
        return 1
    with unprivileged.user("ci") as who:
        home = unprivileged.private_dir(who, "mmg-rootless")
        try:
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home),
                   "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
            argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files]
            return subprocess.run(unprivileged.command(who, argv, env, REPO)).returncode
        finally:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
