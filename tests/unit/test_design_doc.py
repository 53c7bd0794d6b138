"""docs/design.md's layout names every module under grader/ (issue 28: it had fallen
behind the code), each on its side of the trust line, and its map of the stages is the
import-linter contract's (issue 53)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_layout_names_every_module():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    inside, trusted = layout.split("The trusted side", 1)
    modules = [p for p in (ROOT / "grader").rglob("*.py") if p.name != "__init__.py"]
    assert modules
    unnamed = sorted(str(p.relative_to(ROOT)) for p in modules
                     if p.name not in (inside if p.parent.name == "inside" else trusted))
    assert unnamed == []


def _contract(contract_id: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return next(c for c in config["tool"]["importlinter"]["contracts"]
                if c["id"] == contract_id)


def test_the_stage_map_is_the_linter_contract():
    """design.md's map of the stages lists the layers of pyproject.toml's import-linter
    contract (issue 53), in its order, each where it lives: the map a newcomer reads
    is the one `make lint` holds the code to."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    table = layout.split("```", 2)[1].strip().splitlines()[1:]  # less its header
    rows = [line.split()[:2] for line in table]
    layers = _contract("stages")["layers"]
    assert [stage for stage, _ in rows] == layers
    for stage, where in rows:
        module = ROOT / where
        assert module.is_dir() if where.endswith("/") else module.is_file(), where
        assert where.rstrip("/").removesuffix(".py") == f"grader/{stage}"


def test_every_top_level_module_and_package_is_a_layer():
    """Nothing under grader/ escapes the layers: the contract is exhaustive."""
    stages = _contract("stages")
    assert stages["exhaustive"] is True
    top = {p.stem for p in (ROOT / "grader").glob("*.py") if p.name != "__init__.py"}
    top |= {p.parent.name for p in (ROOT / "grader").glob("*/__init__.py")}
    assert top == set(stages["layers"])
    assert len([p for p in (ROOT / "grader").glob("*.py")
                if p.name not in ("__init__.py", "__main__.py", "api.py")]) <= 6
