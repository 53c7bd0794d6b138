"""One home per rule (docs/design.md, "One home per rule"): each rule below is written
in one module, and a copy elsewhere fails here, before it can drift from the first."""
from __future__ import annotations

import re
from pathlib import Path

from grader.deliver.torch_pin import CPU_INDEX, torch_pin
from grader.lesson import seeds

ROOT = Path(__file__).resolve().parents[2]
GRADER = ROOT / "grader"


def _sources(*folders: str) -> dict[str, str]:
    """Every Python and shell file under `folders`, by its path in the project."""
    found = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".sh") and "__pycache__" not in path.parts:
                found[path.relative_to(ROOT).as_posix()] = path.read_text(encoding="utf-8")
    return found


def _holding(pattern: str, *folders: str) -> list[str]:
    return [name for name, text in _sources(*folders).items() if re.search(pattern, text)]


def test_the_torch_pin_is_pyproject_s_and_the_cpu_index_is_named_once():
    pin = torch_pin((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert _holding(re.escape(f'"{pin}"') + "|" + re.escape(f"=={pin}"), "grader",
                    "scripts") == []
    assert _holding(re.escape(CPU_INDEX), "grader", "scripts") == [
        "grader/deliver/torch_pin.py"]


def test_a_lesson_s_sandbox_is_booted_by_sandbox_for_lesson():
    assert _holding(r"\bSandbox\(", "grader") == ["grader/sandbox/slot.py"]


def test_the_non_finite_sentinel_and_the_languages_are_defined_once():
    assert [n for n, t in _sources("grader").items()
            if re.search(r"^NON_FINITE\s*=", t, re.M)] == ["grader/text/shown.py"]
    assert [n for n, t in _sources("grader").items()
            if re.search(r"""[\[(]["']en["'], ["']zh["'][\])]""", t)] == [
        "grader/text/__init__.py"]


def test_the_seed_bands_are_lesson_seeds_and_do_not_overlap():
    assert [n for n, t in _sources("grader").items()
            if re.search(r"^\w*SEED\w*\s*=\s*[\d_]+\s*(#|$)", t, re.M)] == []
    assert 0 < seeds.PRACTICE < seeds.EXAMPLES
    assert seeds.EXAMPLES + (1 << 20) < seeds.TRACES  # smallest's offsets stay in its band


def test_a_capped_read_and_a_safe_name_are_written_once():
    assert _holding(r"os\.read\([^)]*1 << 20", "grader") == ["grader/intake/capped.py"]
    assert _holding(r"\[\^\\w", "grader") == ["grader/store.py"]


def test_the_shared_options_are_declared_in_cli_options():
    declared = r"""click\.option\(\s*["']--(out|course|lesson|language|trust-worksheet)["']"""
    assert _holding(declared, "grader") == ["grader/cli/options.py"]


def test_grader_checks_steps_are_practice_run_steps():
    """`grader check`'s steps are `practice_run.STEPS`, which the CLI and grader.api run:
    nothing else grades a check's practice tests or marks its shapes question (the CLI
    marked it itself, so grader.api's outcome lacked the marks)."""
    grading = [name for name, text in _sources("grader").items()
               if re.search(r"\brunner\.grade(_many)?\(", text) and "PRACTICE_TESTS" in text]
    assert grading == ["grader/run/practice_run.py"]
    assert _holding(r"\bshapes_marks\(", "grader") == ["grader/judge/written.py",
                                                       "grader/run/practice_run.py"]


def test_the_closeness_rule_is_written_once():
    """The elementwise rule (|got - ref| <= atol + rtol·|ref|, a non-finite reference
    matched only by itself) is computed in judge/closeness.py alone: the divergence
    search and the smallest example call it, so a page's line never disagrees with the
    verdict."""
    assert _holding(r"atol \+ (\w+\.)?rtol \*", "grader") == ["grader/judge/closeness.py"]


def test_the_trusted_side_s_one_thread_is_set_where_references_are_made():
    """The reference computed on one thread, as the child computes (its float noise the
    same on any machine): set by `lesson_refs`, which every run's references go
    through; the sandbox side sets its own (the zygote, and the template it may fork
    from)."""
    assert _holding(r"set_num_threads\(", "grader") == [
        "grader/inside/zygote.py", "grader/judge/reference.py", "grader/sandbox/template.py"]
