"""Lessons run side by side in one process: same-named test and helper modules don't
clash, and a lesson whose tests can't be collected says why, in full."""
import shutil
from pathlib import Path

import pytest

from grader import config
from grader.judge import runner
from grader.judge.context import LessonContext

ROOT = Path(__file__).resolve().parents[2]
OWN_HELPER = '''
from _inputs import LESSON


def test_own_helper_{key}(check):
    check.equal("own helper", LESSON, {key!r})
'''


def lesson_copy(root: Path, key: str, extra: str) -> str:
    """Lesson 10's files as lesson `key`, with `extra` appended to its graded tests and
    a helper `_inputs.py` that says which lesson it belongs to; its course.yml entry."""
    tests = root / f"tests_{key}"
    shutil.copytree(ROOT / "hidden_tests" / "10_rmsnorm", tests)
    (tests / "_inputs.py").write_text(f"LESSON = {key!r}\n")
    graded = tests / "test_norm.py"
    graded.write_text(graded.read_text() + extra.format(key=key))
    return (f"  {key!r}:\n    title: copy {key}\n    exercise: {key}.py\n"
            f"    solution: {ROOT / 'solutions' / '10_rmsnorm.py'}\n"
            f"    stub: {ROOT / 'exercises' / '10_rmsnorm.py'}\n    tests: {tests.name}\n"
            "    parts:\n      norm: {points: 2}\n")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> config.Course:
    root = tmp_path_factory.mktemp("course")
    entries = [lesson_copy(root, "a", OWN_HELPER), lesson_copy(root, "b", OWN_HELPER),
               lesson_copy(root, "broken", "\nimport not_a_module_anywhere\n")]
    (root / "course.yml").write_text("course: c\nlessons:\n" + "".join(entries))
    return config.load(root / "course.yml")


def graded_as_solution(course: config.Course, key: str) -> dict:
    ctx = LessonContext(course, key)
    refs = ctx.refs
    reports: list[dict] = []
    runner.run_tests(ctx, [(refs.reference.twin(), reports.append)])
    return runner.score(ctx, reports[0])


def test_same_named_modules_of_two_lessons_both_run(course):
    for key in ("a", "b", "a"):  # and back: each keeps its own modules
        result = graded_as_solution(course, key)
        failing = [t.message for t in result.tests if not t.passed]
        assert not failing and result.score == 2.0, (key, failing)
        assert f"test_own_helper_{key}" in {t.name for t in result.tests}


def test_lesson_folders_do_not_stay_on_sys_path(course):
    import sys

    graded_as_solution(course, "a")
    assert not [p for p in sys.path if p.endswith(("tests_a", "tests_b"))]
    assert "_inputs" not in sys.modules


def test_a_collection_error_is_shown_in_full(course):
    with pytest.raises(RuntimeError) as info:
        graded_as_solution(course, "broken")
    message = str(info.value)
    assert "did not run (pytest exit" in message
    assert "test_norm.py" in message and "not_a_module_anywhere" in message
