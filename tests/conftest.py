"""Shared fixtures: the course, and a warm worker slot (sandboxed where possible)."""
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
