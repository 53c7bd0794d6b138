"""The lesson context owns the caches of a run: kept warm between pytest sessions,
and forgotten whole by `reset()` (a long-lived Dask worker after a lesson's files
changed must not grade with an old helper module or an old reference)."""
from __future__ import annotations

from pathlib import Path

from grader.judge import runner
from grader.config import Course
from grader.judge.context import LessonContext


def _lesson_at(course: Course, tests: Path) -> Course:
    lesson = course.lesson("13").model_copy(update={"tests": tests})
    return course.model_copy(update={"lessons": {**course.lessons, "13": lesson}})


def test_reset_forgets_a_changed_helper_module(course, tmp_path):
    tests = tmp_path / "13_moe"
    tests.mkdir()
    helper = tests / "_ctx_helper.py"
    helper.write_text("VALUE = 1\n")
    ctx = LessonContext(_lesson_at(course, tests), "13")

    def value():
        with runner.lesson_imports(tests, ctx.modules):
            import _ctx_helper
            return _ctx_helper.VALUE

    assert value() == 1
    helper.write_text("VALUE = 'two'\n")
    assert value() == 1  # kept between sessions of one run: warm
    ctx.reset()
    assert value() == "two"


def test_reset_forgets_the_references_and_request_caches(course):
    ctx = LessonContext(course, "13")
    refs = ctx.refs
    assert ctx.refs is refs  # built once
    ctx.frames["k"], ctx.expected["k"] = b"frame", None
    version = ctx.version
    from grader.judge.reference import lesson_file

    assert lesson_file(ctx.tests, "examples.py") is not None
    ctx.reset()
    assert ctx.refs is not refs and not ctx.frames and not ctx.expected
    assert ctx.version == version
    assert lesson_file.cache_info().currsize == 0  # a changed examples.py is read again


def test_two_contexts_share_nothing(course):
    """Two runs in one process (a test suite, a worker) hold their own caches."""
    a, b = LessonContext(course, "13"), LessonContext(course, "13")
    assert a.refs is not b.refs
    a.frames["k"] = b"x"
    assert not b.frames
