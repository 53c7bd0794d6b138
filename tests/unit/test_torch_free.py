"""Pages, the class report, every exporter and the LMS comment import no torch
(issue 53): rendering a page or writing an export must not pay torch's import (about
1.3 s), and a stage that does is one that climbed into the judge's numbers. A fresh
interpreter imports them, then looks for torch in sys.modules."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _torch_after(modules: list[str]) -> list[str]:
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return eval(out)  # a list of module names this test printed itself


def _exporters() -> list[str]:
    folder = ROOT / "grader" / "deliver" / "export"
    return ["grader.deliver.export"] + [f"grader.deliver.export.{p.stem}"
                                        for p in sorted(folder.glob("*.py"))
                                        if p.name != "__init__.py"]


def test_pages_report_and_exports_import_no_torch():
    modules = ["grader.pages.feedback", "grader.pages.report", "grader.pages.where",
               *_exporters(), "grader.deliver.upload.lti"]
    assert "grader.deliver.export.one_line" in modules  # the LMS comment
    assert _torch_after(modules) == []


def test_the_check_can_fail():
    """The same probe sees torch where a module does import it."""
    assert "torch" in _torch_after(["grader.judge.divergence"])
