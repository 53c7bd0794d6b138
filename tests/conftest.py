"""Shared fixtures: the course, a warm worker slot (sandboxed where possible), and
the student bundles and autograder zip, each built once for the whole suite."""
import subprocess
import sys
from pathlib import Path

import pytest

from grader import config
from grader.context import LessonContext
from grader.sandbox import bwrap
from grader.sandbox import slot as slots
from grader.sandbox.slot import Slot

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def course() -> config.Course:
    return config.load(ROOT / "course.yml")


@pytest.fixture(scope="session")
def ctx13(course) -> LessonContext:
    """Lesson 13's context for the whole suite: its references computed once."""
    return LessonContext(course, "13")


def open_slot(course: config.Course, lesson_key: str) -> Slot:
    lesson = course.lesson(lesson_key)
    return slots.open_slot(course.path(lesson.probes), bwrap.probe().reason is None,
                           tuple(lesson.preload))


@pytest.fixture(scope="session")
def slot13(course):
    slot = open_slot(course, "13")
    yield slot
    slot.close()


@pytest.fixture(scope="session")
def student_bundle(tmp_path_factory):
    """`grader student-bundle --lesson KEY`, built once per lesson for the whole suite:
    a build grades the solution and records the practice results (half a minute and
    more each), and three files tested the same bundles. A test that changes a bundle
    works on its own copy."""
    built: dict[str, Path] = {}

    def get(key: str) -> Path:
        if key not in built:
            dest = tmp_path_factory.mktemp(f"bundle{key}") / f"lesson{key}"
            done = subprocess.run([sys.executable, "-m", "grader.cli", "student-bundle",
                                   "--lesson", key, "--dest", str(dest)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stderr
            built[key] = dest
        return built[key]

    return get


@pytest.fixture(scope="session")
def autograder_zip13(tmp_path_factory) -> Path:
    """Lesson 13's Gradescope autograder zip, built once for the suite: a build grades
    the solution and every known mistake, and three files read the same zip (none
    changes it)."""
    from grader import autograder_zip

    return autograder_zip.build(ROOT, "13", tmp_path_factory.mktemp("autograder"))
