"""`grader new-lesson` writes a skeleton that `grader selftest` fails only for its
TODOs, and passes once they are filled (done here as an instructor would, in a copy
of the course)."""
import difflib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import config
from grader.author.newlesson.templates import MARK

ROOT = Path(__file__).resolve().parents[2]
MODULE = "99_toy"
# What the instructor writes: each part's reference computation, and one mistake each.
BODIES = {"scale": "return 2 * x", "shift": "return x + 1"}
MISTAKES = """
- id: triple
  part: scale
  title: "x is scaled by 3"
  hint: "The lesson scales by two: y = 2x."
  edits: [{old: "return 2 * x", new: "return 3 * x"}]
- id: minus
  part: shift
  title: "one is subtracted"
  hint: "The lesson adds one: y = x + 1."
  edits: [{old: "return x + 1", new: "return x - 1"}]
"""


def grader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], cwd=course,
                          capture_output=True, text=True, timeout=600)


def failed_checks(output: str) -> set[str]:
    return {line.split()[1] for line in output.splitlines() if line.startswith("failed")}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "course.yml", root)
    for folder in ("solutions", "exercises", "hidden_tests"):
        shutil.copytree(ROOT / folder, root / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    proc = grader(root, "new-lesson", "99", "--name", "toy", "--parts", "scale,shift",
                  "--composite", "shift")
    assert proc.returncode == 0, proc.stderr
    return root


def fill(course: Path) -> None:
    """Every TODO filled: the bodies written, the markers' notes taken as done."""
    solution = course / "solutions" / f"{MODULE}.py"
    text = solution.read_text()
    for part, body in BODIES.items():
        text = re.sub(rf"(def {part}\(.*?### BEGIN SOLUTION\n\s*)return x\.clone\(\)[^\n]*",
                      rf"\g<1>{body}", text, count=1, flags=re.S)
    solution.write_text(text)
    tests = course / "hidden_tests" / MODULE
    for path in [solution, course / "course.yml", *tests.glob("*.*"),
                 tests / "correct" / "README.md", course / "examples" / "99" / "README.md"]:
        text = re.sub(rf"\s*# {re.escape(MARK)}[^\n]*", "", path.read_text())
        path.write_text(text.replace(f"{MARK}: ", "").replace(MARK, "done"))
    (tests / "mistakes.yml").write_text(MISTAKES)
    # a correct variant written otherwise: selftest grades it from `correct:`
    (tests / "correct" / "added.py").write_text(
        solution.read_text().replace("return 2 * x", "return x + x"))


def test_the_entry_is_appended_and_course_yml_keeps_its_comments(course):
    before = (ROOT / "course.yml").read_text().splitlines()
    after = (course / "course.yml").read_text().splitlines()
    ops = {op for op, *_ in difflib.SequenceMatcher(None, before, after).get_opcodes()}
    assert ops == {"equal", "insert"}  # lines only added: no comment lost, nothing moved
    lesson = config.load(course / "course.yml").lesson("99")
    assert list(lesson.parts) == ["scale", "shift"] and lesson.exercise == f"{MODULE}.py"
    tests = course / "hidden_tests" / MODULE
    assert {p.name for p in tests.iterdir()} == {
        "probes.py", "mistakes.yml", "equivalent_mutants.yml", "test_scale.py",
        "test_practice_scale.py", "test_shift.py", "test_practice_shift.py", "correct"}
    assert lesson.correct == Path(f"hidden_tests/{MODULE}/correct")
    assert MARK in (tests / "correct" / "README.md").read_text()
    assert "from grader.inside.probekit import" in (tests / "probes.py").read_text()
    assert "explained" not in (tests / "test_practice_scale.py").read_text()
    for name in ("test_shift.py", "test_practice_shift.py"):  # the composite part's
        assert "alt=lambda: [r[\"y\"] for r in explained.call(" in (tests / name).read_text()
    examples = course / "examples" / "99"
    assert lesson.submissions == Path("examples/99") and (examples / "README.md").is_file()
    assert (examples / "unchanged_stub" / f"{MODULE}.py").read_text() == (
        course / "exercises" / f"{MODULE}.py").read_text()


def test_nothing_is_overwritten_and_names_stay_unique(course):
    yml = (course / "course.yml").read_text()
    again = grader(course, "new-lesson", "99", "--name", "toy", "--parts", "scale")
    assert again.returncode != 0 and "already has a lesson '99'" in again.stderr
    clash = grader(course, "new-lesson", "98", "--name", "other", "--parts", "norm")
    assert clash.returncode != 0 and "part 'norm' is lesson 10's" in clash.stderr
    first = grader(course, "new-lesson", "97", "--name", "x", "--parts", "a,b", "--composite", "a")
    assert first.returncode != 0 and "composite part 'a'" in first.stderr
    assert (course / "course.yml").read_text() == yml


def test_selftest_fails_only_on_the_todos_until_they_are_filled(course):
    fresh = grader(course, "selftest", "--lesson", "99", "--jobs", "2")
    assert fresh.returncode == 1 and failed_checks(fresh.stdout) == {"todos"}, fresh.stdout
    fill(course)
    assert grader(course, "release", "--lesson", "99").returncode == 0
    done = grader(course, "selftest", "--lesson", "99", "--jobs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "triple: named" in done.stdout and "minus: named" in done.stdout
    assert "solution: full marks (2/2)" in done.stdout
    assert "added: full marks (2/2" in done.stdout, done.stdout
