"""The autograder zip carries the hidden tests' reference results, computed when it is
built: a Gradescope run loads them instead of importing the solution and its known
mistakes and computing everything again for each submission. A recording made from
other files than the ones beside it is ignored, never trusted."""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from grader.judge import runner
from grader.config import load
from grader.judge.context import LessonContext
from grader.judge.reference import Caller, lesson_digest, lesson_refs, load_module

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "13_moe.py"
HIDDEN = REPO / "hidden_tests" / "13_moe"
RENORM = ("topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)",
          "topk_weight = topk_weight")


def test_modules_load_on_first_need_and_once(tmp_path):
    tests = tmp_path / "13_moe"
    shutil.copytree(HIDDEN, tests, ignore=shutil.ignore_patterns("__pycache__"))
    refs = lesson_refs("lazy-13", SOLUTION, tests)
    assert refs.reference._module is None and not refs.recorded
    assert all(v.caller._module is None for v in refs.variants)
    twin = refs.reference.twin()
    assert twin.module is not None and refs.reference.module is twin.module


@pytest.fixture(scope="module")
def zip_root(autograder_zip13, tmp_path_factory) -> Path:
    """The suite's lesson-13 zip (tests/conftest.py), unpacked."""
    tmp = tmp_path_factory.mktemp("zip")
    with zipfile.ZipFile(autograder_zip13) as z:
        z.extractall(tmp / "source")
    return tmp / "source"


def test_the_zip_grades_from_its_recording_alone(zip_root):
    lesson = yaml.safe_load((zip_root / "course.yml").read_text())["lessons"]["13"]
    assert lesson["recorded"] == "reference/13.bin"
    ctx = LessonContext(load(zip_root / "course.yml"), "13")
    refs = ctx.refs
    assert refs.recorded and len(refs.reference.cache) >= 30
    assert set(refs.signatures) == {v.mistake.id for v in refs.variants}
    # where each raised: top-k + 1 is named where the student's code raises as it does
    assert refs.raises is not None and set(refs.raises["topk_plus_one"]) == {
        name for name in refs.signatures["topk_plus_one"] if "E=3 K=3" in name}
    reports: list[dict] = []
    runner.run_tests(ctx, [(refs.reference.twin(), reports.append)])
    assert runner.score(ctx, reports[0]).score == 10.0
    # a submission with a known mistake: diagnosed, and the moe part compares with
    # that mistake's results, all from the recording
    student = Caller(load_module("_student_renorm", SOLUTION.read_text().replace(*RENORM),
                                 "13_moe.py"), refs.probes)
    runner.run_tests(ctx, [(student, reports.append)])
    parts = runner.score(ctx, reports[1]).parts
    assert parts["router"].diagnosis.id == "no_renorm"
    assert parts["moe"].score == parts["moe"].max_score
    # neither the solution nor any of its known mistakes was imported
    assert refs.reference._module is None
    assert all(v.caller._module is None for v in refs.variants)


def test_a_recording_beside_other_files_is_ignored(zip_root, tmp_path):
    solution = tmp_path / "13_moe.py"
    solution.write_text(SOLUTION.read_text() + "\n# edited after the zip was built\n")
    tests = zip_root / "hidden_tests" / "13_moe"
    assert lesson_digest(solution, tests) != lesson_digest(SOLUTION, tests)
    stale = lesson_refs("edited-13", solution, tests, zip_root / "reference" / "13.bin")
    assert not stale.recorded and stale.reference.cache == {} and stale.signatures is None
