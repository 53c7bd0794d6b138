"""The torch a graded run uses, and where its CPU build comes from: the pin is
pyproject.toml's `torch==X` (the project's own install, scripts/setup.sh, reads it
there too), the CPU index is named here. The autograder zip's setup.sh, the student
bundle's install.py and scripts/setup.sh take both from this one place."""
from __future__ import annotations

import re

CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # scripts/setup.sh reads this line


def torch_pin(pyproject: str) -> str:
    """The torch version pyproject.toml's text pins: the one the grader is tested with."""
    pin = re.search(r'"torch==([^";\s]+)', pyproject)
    if pin is None:
        raise ValueError("pyproject.toml pins no torch version (torch==X)")
    return pin.group(1)
