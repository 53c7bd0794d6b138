"""`grader tolerance`: the advice follows the measurements. A tolerance far below what
correct variants need is called too tight and a larger one suggested; one so loose
that a known mistake passes is called unsafe; RoPE tables' drift is named as drift
along the position axis. Each runs one or two cases of lesson 12 (a few seconds)."""
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import staff as cli
from grader import config
from grader.config import Tolerance
from grader.author.tolerance import advise
from grader.author.tolerance.report import render

ROOT = Path(__file__).resolve().parents[2]
CORRECT = ROOT / "tests" / "fixtures" / "lesson12" / "correct"


def with_table_tolerance(course: config.Course, atol: float) -> config.Course:
    """The course with lesson 12's `rope_table` tolerance set to `atol` (rtol 0)."""
    lesson = course.lesson("12")
    tolerances = {**lesson.tolerances, "rope_table": Tolerance(atol=atol, rtol=0.0)}
    lessons = {**course.lessons, "12": lesson.model_copy(update={"tolerances": tolerances})}
    return course.model_copy(update={"lessons": lessons})


def table_row(advice, check: str = "cos table"):
    return next(r for r in advice.rows if r.test == "test_tables" and r.check == check)


@pytest.fixture(scope="module")
def too_tight(course):
    return advise(with_table_tolerance(course, 1e-7), "12", CORRECT,
                  "test_tables and d96-defaults")


def test_a_tiny_tolerance_is_too_tight_and_a_larger_one_is_suggested(too_tight):
    row = table_row(too_tight)
    assert row.too_tight, "correct float32 tables drift ~1e-3 at position 32767"
    assert {w.who for w in row.too_tight} >= {"float64_tables", "float64-inside"}
    atol, rtol, margin = row.suggest
    assert row.correct.value < atol < row.mistake.value
    assert atol > 100 * 1e-7 and margin > 2
    assert "TOO TIGHT" in render(too_tight)


def test_drift_along_the_position_axis_is_named(too_tight):
    row = table_row(too_tight)
    assert row.drift.startswith("drift ∝ position (axis 0")
    assert row.correct.value > 5e-4  # at 32k, not the ~1e-7 of a short table


def test_a_mistake_closer_than_the_tolerance_is_unsafe(course):
    """attention_factor 0.8 ignored changes the tables by 0.2: an atol of 0.5 lets it pass."""
    advice = advise(with_table_tolerance(course, 0.5), "12", CORRECT,
                    "test_tables and yarn-attn0.8")
    row = table_row(advice)
    assert "attn_factor_ignored" in {w.who for w in row.unsafe}
    assert not row.too_tight
    # the suggestion separates the closest mistake, which the 0.5 in use lets through
    atol, _, margin = row.suggest
    assert row.mistake.who == "attn_factor_ignored"
    assert row.correct.value < atol < row.mistake.value < 0.5 and margin > 2
    text = render(advice)
    assert "UNSAFE: mistake attn_factor_ignored" in text
    assert "attn_factor_ignored" in text.split("fail none of these tests")[1]


def test_the_command_exits_zero_when_the_tolerances_are_right():
    result = CliRunner().invoke(cli.main, ["tolerance", "--course", str(ROOT / "course.yml"),
                                           "--lesson", "12", "--tests", "test_rows and past5"])
    assert result.exit_code == 0, result.output
    assert "test_rows · cos rows" in result.output
    assert "smallest mistake" in result.output and "suggest" in result.output
