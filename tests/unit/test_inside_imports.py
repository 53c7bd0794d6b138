"""The trust line in the layout: grader/inside/ is what runs inside the sandbox, and
it imports nothing of the trusted side.

Allowed, and why:
- the standard library: every interpreter bound into the sandbox has it;
- `torch`: the tensors the child computes and sends (the virtualenv is bound);
- `grader.inside`: its own folder, the only part of the package that is bound.
Nothing else: no numpy, no yaml, no other `grader` module. (A lesson's `preload`
packages are imported by the zygote by name, from course.yml, not by this code.)
The lessons' probes run in the same place, so they are held to the same list.
"""
import ast
import sys
from pathlib import Path

import grader.inside

INSIDE = Path(grader.inside.__file__).parent
PROBES = sorted((Path(__file__).resolve().parents[2] / "hidden_tests").glob("*/probes.py"))
ALLOWED = set(sys.stdlib_module_names) | {"__future__", "torch"}


def outside_imports(source: str) -> list[str]:
    """Every module `source` imports (at any depth, TYPE_CHECKING blocks included)
    that is neither allowed nor in grader/inside/."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: stays in the package only if it is this folder
                names = ["grader.inside" + "." * (node.level - 1) + (node.module or "")]
                if node.level > 1:
                    found.append(names[0])
                    continue
            else:
                names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in ALLOWED and not (
                    name == "grader.inside" or name.startswith("grader.inside.")):
                found.append(name)
    return found


def test_the_checker_flags_what_crosses_the_line():
    """It can fail: the trusted side's modules, a bare `grader`, a third-party package,
    a relative import that leaves the folder."""
    assert outside_imports("import os, torch\nfrom grader.inside import protocol\n") == []
    assert outside_imports("from grader import config") == ["grader"]
    assert outside_imports("import grader.sandbox.slot") == ["grader.sandbox.slot"]
    assert outside_imports("if x:\n    import numpy as np") == ["numpy"]
    assert outside_imports("from .. import store") != []


def test_nothing_inside_imports_from_outside():
    modules = sorted(INSIDE.glob("*.py"))
    assert {"zygote.py", "confine.py", "harness.py", "protocol.py", "probekit.py"} <= {
        m.name for m in modules}
    crossing = {m.name: outside_imports(m.read_text()) for m in modules}
    assert {name: found for name, found in crossing.items() if found} == {}


def test_the_lessons_probes_import_nothing_else_either():
    assert PROBES, "no hidden_tests/*/probes.py found"
    crossing = {str(p): outside_imports(p.read_text()) for p in PROBES}
    assert {name: found for name, found in crossing.items() if found} == {}

