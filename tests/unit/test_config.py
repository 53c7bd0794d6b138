"""course.yml validation: good files load, bad ones say what and where."""
from pathlib import Path

import pytest

from grader import config

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "x.py").write_text("")
    (tmp_path / "tests").mkdir()
    path = tmp_path / "course.yml"
    path.write_text(text)
    return path


GOOD = """course: c
lessons:
  13:
    title: MoE
    exercise: 13_moe.py
    solution: solutions/x.py
    stub: exercises/x.py
    tests: tests
    parts:
      ffn: {points: 2}
"""


def test_project_course_file_loads():
    course = config.load(ROOT / "course.yml")
    assert course.lesson("13").max_score == 10.0
    assert course.limits("13").test_wall_s > 0
    assert course.tolerances("13")["aux"].atol == 1e-9


def test_numeric_lesson_keys_become_strings(tmp_path):
    course = config.load(write(tmp_path, GOOD))
    assert list(course.lessons) == ["13"]


def test_unknown_key_is_reported_with_its_line(tmp_path):
    path = write(tmp_path, GOOD.replace("      ffn: {points: 2}", "      ffn: {points: 2, pts: 3}"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert "course.yml:10: lessons.13.parts.ffn.pts" in str(err.value)
    assert "Extra inputs are not permitted" in str(err.value)


def test_a_typo_in_a_key_says_what_was_meant(tmp_path):
    """Issue 25 item 8: a typo got "Extra inputs are not permitted" and nothing more."""
    path = write(tmp_path, GOOD.replace("    exercise: 13_moe.py", "    excercise: 13_moe.py\n"
                                        "    exercise: 13_moe.py\n    moodle_worksheat: w.csv"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert "excercise: Extra inputs are not permitted (did you mean 'exercise'?)" in str(err.value)
    assert "(did you mean 'moodle_worksheet'?)" in str(err.value)
    path.write_text(GOOD.replace("      ffn: {points: 2}", "      ffn: {points: 2, zzz: 3}"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert "did you mean" not in str(err.value)


def test_wrong_type_is_reported_with_its_line(tmp_path):
    path = write(tmp_path, GOOD.replace("{points: 2}", "{points: two}"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert "course.yml:10: lessons.13.parts.ffn.points" in str(err.value)


def test_missing_solution_file(tmp_path):
    path = write(tmp_path, GOOD.replace("solutions/x.py", "solutions/nope.py"))
    with pytest.raises(config.ConfigError, match="lessons.13.solution: solutions/nope.py"):
        config.load(path)


def test_not_yaml_and_not_a_mapping(tmp_path):
    path = tmp_path / "course.yml"
    path.write_text("course: [unclosed\n")
    with pytest.raises(config.ConfigError, match="not valid YAML"):
        config.load(path)
    path.write_text("- a list\n")
    with pytest.raises(config.ConfigError, match="top level must be a mapping"):
        config.load(path)


def test_missing_file_and_unknown_lesson(tmp_path):
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(tmp_path / "absent.yml")
    course = config.load(write(tmp_path, GOOD))
    with pytest.raises(config.ConfigError, match="no lesson '99'"):
        course.lesson("99")


def test_version_changes_with_the_tests(tmp_path):
    path = write(tmp_path, GOOD)
    before = config.load(path).version("13")
    (tmp_path / "tests" / "test_ffn.py").write_text("def test_x(): pass\n")
    assert config.load(path).version("13") != before


@pytest.mark.parametrize("name", ["mistakes.yml", "equivalent_mutants.yml", "cases.json"])
def test_version_changes_with_any_file_of_the_tests(tmp_path, name):
    """A new hint in mistakes.yml must regrade: the old text would stay on the pages."""
    path = write(tmp_path, GOOD)
    (tmp_path / "tests" / name).write_text("[]\n")
    before = config.load(path).version("13")
    (tmp_path / "tests" / name).write_text("- changed\n")
    assert config.load(path).version("13") != before


def test_version_ignores_bytecode(tmp_path):
    path = write(tmp_path, GOOD)
    before = config.load(path).version("13")
    (tmp_path / "tests" / "__pycache__").mkdir()
    (tmp_path / "tests" / "__pycache__" / "test_ffn.cpython-311.pyc").write_bytes(b"\0")
    assert config.load(path).version("13") == before


def test_malformed_mistakes_file_names_the_entry(tmp_path):
    from grader.judge.reference import load_mistakes

    path = tmp_path / "mistakes.yml"
    path.write_text("- id: a\n  part: ffn\n  title: t\n  edits: []\n")
    with pytest.raises(ValueError, match="entry 1 needs id, part, title, hint"):
        load_mistakes(path)


def test_points_that_cannot_be_split_exactly_are_refused_at_load(tmp_path):
    """0.3 used to pass validation (and `grader report`) and stop `grader run` mid-way."""
    path = write(tmp_path, GOOD.replace("{points: 2}", "{points: 0.3}"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert "course.yml:10: lessons.13.parts.ffn.points: 0.3 is not a multiple of 1/1024" \
        in str(err.value)
    assert "the nearest value that is: 0.2998046875" in str(err.value)
    assert "Value error" not in str(err.value)


def test_test_files_and_parts_must_agree_at_load(tmp_path):
    """A part without a graded test file, or tests of a part course.yml lacks, used to
    stop the run at its first student."""
    path = write(tmp_path, GOOD.replace("      ffn: {points: 2}",
                                        "      ffn: {points: 2}\n      router: {points: 1}"))
    (tmp_path / "tests" / "test_ffn.py").write_text("def test_x(): pass\n")
    (tmp_path / "tests" / "test_practice_gate.py").write_text("def test_x(): pass\n")
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert "course.yml:9: lessons.13.parts: tests has tests of a part 'gate'" in str(err.value)
    assert ("course.yml:11: lessons.13.parts.router: no graded test file tests/test_router.py"
            in str(err.value))


def test_practice_tests_alone_are_a_student_bundle(tmp_path):
    path = write(tmp_path, GOOD)
    (tmp_path / "tests" / "test_practice_ffn.py").write_text("def test_x(): pass\n")
    assert config.load(path).lesson("13").parts["ffn"].points == 2


def test_a_missing_roster_file_is_named_with_its_line(tmp_path):
    path = write(tmp_path, "roster: people.csv\n" + GOOD)
    with pytest.raises(config.ConfigError,
                       match=r"course.yml:1: roster: people.csv does not exist"):
        config.load(path)


def test_course_yml_sets_every_sandbox_limit_but_the_protocols_own():
    """The limits are declared once (sandbox/limits.py): a limit added there and not
    here (or the reverse) fails, and an unset course.yml gets the sandbox's defaults."""
    from dataclasses import fields

    from grader.sandbox.limits import Limits

    assert set(config.LimitsConfig.model_fields) == {f.name for f in fields(Limits)} - {
        "received_mb"}
    assert config.LimitsConfig().limits() == Limits()
    assert config.LimitsConfig(memory_mb=256).limits().memory_mb == 256


def test_the_similarity_budgets_file_cap_is_what_intake_reads_of_a_source():
    """config sits below intake and cannot import it: the two caps are held equal here."""
    from grader.config import MAX_FILE_KB
    from grader.intake.capped import MAX_SOURCE

    assert MAX_FILE_KB * 1024 == MAX_SOURCE
