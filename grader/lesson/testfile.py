"""What a hidden test file's name says, read in this one place: `test_<part>.py` holds a
part's graded tests, `test_practice_<part>.py` its practice tests (worth 0 points, run
by `grader check`, shipped to students with their reference results)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import PurePath, PurePosixPath

PRACTICE = "test_practice_"


# by the path: asked for every test of every student, of a few files
@lru_cache(maxsize=1024)
def is_practice(test_file: str | PurePath) -> bool:
    """A file (name or path, a pytest node id's file part) of practice tests."""
    return PurePosixPath(str(test_file)).name.startswith(PRACTICE)


@lru_cache(maxsize=1024)
def part_of(test_file: str | PurePath) -> str:
    """The part a test file tests: `test_<part>.py` or `test_practice_<part>.py`."""
    stem = PurePosixPath(str(test_file)).stem
    return stem.removeprefix(PRACTICE) if is_practice(test_file) else stem.removeprefix("test_")


def name_of(part: str, practice: bool = False) -> str:
    """The file that holds a part's graded (or practice) tests."""
    return f"{PRACTICE if practice else 'test_'}{part}.py"
