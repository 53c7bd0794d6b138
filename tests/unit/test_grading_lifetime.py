"""grading.grade_lesson owns the sandbox's lifetime in one block: however the run ends
(no one to grade, a roster or intake error, Ctrl-C, or done), the sandbox is closed
once, and only after the grading (never while it grades)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import config
from grader.run import grading

ROOT = Path(__file__).resolve().parents[2]


class Box:
    """A booted sandbox, as far as grade_lesson sees it: it is entered, then exited."""

    def __init__(self):
        self.exits = 0

    def __enter__(self) -> Box:
        return self

    def __exit__(self, *exc: object) -> None:
        self.exits += 1


class Quiet:
    def note(self, text: str) -> None:
        pass


@pytest.fixture
def box(monkeypatch) -> Box:
    """The unsandboxed fork path: a sandbox booted before the class is read."""
    made = Box()
    monkeypatch.setattr(grading, "zygote_is_fork", lambda unsandboxed, support: True)
    monkeypatch.setattr(grading, "boot", lambda *args, **kwargs: made)
    return made


def run(tmp_path: Path, submissions: Path) -> grading.Graded:
    course = config.load(ROOT / "course.yml")
    return grading.grade_lesson(course, "13", submissions, tmp_path / "out", jobs=1,
                                events=Quiet(), unsandboxed=True)


def one_student(tmp_path: Path) -> Path:
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "13" / "alice" / "13_moe.py", subs / "ann" / "13_moe.py")
    return subs


def test_no_one_to_grade_closes_it(tmp_path, box):
    (tmp_path / "empty").mkdir()
    with pytest.raises(grading.NoSubmissions):
        run(tmp_path, tmp_path / "empty")
    assert box.exits == 1


@pytest.mark.parametrize("where", ["roster", "intake"])
def test_an_error_reading_the_class_closes_it(tmp_path, box, monkeypatch, where):
    """An intake error left the sandbox running before it had one owner."""
    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error")

    target = grading.rosters if where == "roster" else grading.intake
    monkeypatch.setattr(target, "load" if where == "roster" else "collect", broken)
    with pytest.raises(OSError):
        run(tmp_path, one_student(tmp_path))
    assert box.exits == 1


@pytest.mark.parametrize("stop", [False, True])
def test_grading_has_it_open_and_the_end_closes_it(tmp_path, box, monkeypatch, stop):
    seen = []

    def grade(ctx, todo, out, summary, *, sandbox, **kwargs):
        seen.append((sandbox, sandbox.exits))
        if stop:
            raise grading.Stopped(0, len(todo))

    monkeypatch.setattr(grading, "grade", grade)
    if stop:
        with pytest.raises(grading.Stopped):
            run(tmp_path, one_student(tmp_path))
    else:
        run(tmp_path, one_student(tmp_path))
    assert seen == [(box, 0)] and box.exits == 1
