"""docs/authoring.md stays true: what it names exists, and what exists is named."""
import inspect
import re
from fractions import Fraction
from pathlib import Path

import _pytest.fixtures
import pytest

from grader.cli import staff as cli
from grader.judge import plugin
from grader import points
from grader.judge.compare import Checks
from grader.config import Lesson
from grader.record import ERROR_STATUSES
from grader.author.selftest import findings

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text under a `##`/`###` heading, up to the next heading."""
    start = GUIDE.index(f" {title}\n")
    rest = GUIDE[start:].split("\n", 1)[1]
    end = re.search(r"^#{2,3} ", rest, re.M)
    return rest[:end.start()] if end else rest


def first_column(text: str) -> set[str]:
    """The backticked names in the first column of a table's rows."""
    return set(re.findall(r"^\| `([^`]+)`", text, re.M))


def test_every_checks_method_is_named_and_every_named_one_exists():
    public = {n for n, _ in inspect.getmembers(Checks, inspect.isfunction)
              if not n.startswith("_")}
    named = set(re.findall(r"check\.(\w+)\(", GUIDE))
    assert named == public


def test_every_fixture_is_named_and_exists():
    fixtures = {n for n, o in vars(plugin).items()
                if isinstance(o, _pytest.fixtures.FixtureFunctionDefinition)}
    assert first_column(section("Hidden tests")) == fixtures


def test_every_command_named_exists():
    named = set(re.findall(r"`grader ([a-z][a-z-]*)", GUIDE))
    assert named and named <= set(cli.main.commands), named - set(cli.main.commands)


def test_every_lesson_key_is_named():
    assert first_column(section("course.yml keys of a lesson")) == set(Lesson.model_fields)


def test_statuses_are_those_a_record_can_have():
    assert first_column(section("Statuses")) == {"graded", "timeout", *ERROR_STATUSES}


def test_selftest_statuses_are_named():
    statuses = {findings.OK, findings.FAILED, findings.RAISES, findings.INDISTINGUISHABLE,
                findings.SKIPPED}
    text = section("Testing a lesson")
    assert all(f"`{s}`" in text for s in statuses)
    assert set(findings.CHECKS) >= {"todos", "names", "leaks", "hints"}


def test_scoring_facts():
    assert points.UNIT == Fraction(1, 1024) and "1/1024" in section("Scoring")
    assert f"up to {plugin._Explained.MAX_COMBINATIONS} combinations" in GUIDE


@pytest.mark.parametrize("block", re.findall(r"```(?:python|yaml)\n(# (\S+)\n.*?)```",
                                             GUIDE, re.S), ids=lambda b: b[1])
def test_quoted_files_are_quoted_verbatim(block):
    """A code block that starts with `# <path>` quotes that file."""
    text, path = block
    body = text.split("\n", 1)[1]
    assert body in (ROOT / path).read_text(encoding="utf-8")


def test_quoted_course_and_mistakes_entries_are_verbatim():
    yaml_blocks = re.findall(r"```yaml\n(.*?)```", GUIDE, re.S)
    entry = next(b for b in yaml_blocks if b.startswith('  "10":'))
    course = (ROOT / "course.yml").read_text(encoding="utf-8").splitlines(keepends=True)
    assert entry in "".join(line for line in course if not line.lstrip().startswith("#"))
    mistake = next(b for b in yaml_blocks if b.startswith("- id: no_eps"))
    assert mistake in (ROOT / "hidden_tests" / "10_rmsnorm" / "mistakes.yml").read_text(
        encoding="utf-8")
