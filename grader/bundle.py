"""The student bundle: everything `grader check` needs, and no solution.

Students must be able to check their work at home without being handed the answer.
The bundle holds the grader, the stub, the lesson's probes, its practice tests
(`test_public_<part>.py`) and the helper modules they import (`_*.py`), a
course.yml for that lesson alone, and a recording of the reference's (and each
known mistake's) results for the practice tests, made here by running them once
against the solution. It never holds a graded test file (their cases, seeds and
checks), mistakes.yml (whose edits quote the solution) or a result of a graded
case: practice cases draw their inputs from seeds no graded case uses.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from grader import runner
from grader.config import Course
from grader.context import LessonContext
from grader.reference import Caller, record_combined, save_recording

ROOT = Path(__file__).resolve().parent.parent
RECORDING = "public-reference.bin"
README = """# Lesson {key}: check your work

    python -m venv .venv && .venv/bin/pip install -e .
    .venv/bin/grader check {exercise}

Fill in `{exercise}`; `grader check` runs the public tests on it and prints each
part's result, the numbers where yours differ, and the likely mistake. The graded
run has more tests, which are hidden.
"""


def shipped(tests: Path) -> list[Path]:
    """The files of a lesson's tests folder that students receive."""
    return sorted(f for f in tests.glob("*.py")
                  if f.name == "probes.py" or f.name.startswith(("_", "test_public_")))


def build(course: Course, lesson_key: str, dest: Path) -> Path:
    lesson = course.lesson(lesson_key)
    tests = course.path(lesson.tests)
    dest.mkdir(parents=True, exist_ok=True)
    ctx = LessonContext(course, lesson_key)
    refs = ctx.refs  # fresh: what it records is the practice tests' requests alone
    refs.signatures = None  # computed over the practice tests only
    # The solution, then each known mistake, checked as a student's file would be: a
    # composite part then asks for what it compares with (the solution carrying the
    # mistakes found in the other parts), and those practice results are recorded,
    # for every combination of mistakes too, so the bundle's check is the project's.
    students = [refs.reference.twin(), *(Caller(v.caller.module, refs.probes)
                                         for v in refs.variants)]
    runner.run_tests(ctx, [(s, lambda raw: None) for s in students], select=runner.PRACTICE,
                     precompute=True)
    record_combined(refs)

    shutil.copytree(ROOT / "grader", dest / "grader", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", dest / "templates", dirs_exist_ok=True)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    test_dir = dest / "tests" / tests.name
    test_dir.mkdir(parents=True, exist_ok=True)
    for f in shipped(tests):
        shutil.copy(f, test_dir / f.name)
    (dest / lesson.exercise).write_text(course.path(lesson.stub).read_text(encoding="utf-8"),
                                        encoding="utf-8")
    save_recording(refs, test_dir / RECORDING)
    entry = lesson.model_dump(mode="json", exclude_none=True,
                              exclude={"solution", "submissions", "out", "due"})
    entry.update(stub=lesson.exercise, tests=f"tests/{tests.name}",
                 recorded=f"tests/{tests.name}/{RECORDING}")
    doc = {"course": course.course, "title": course.title, "language": course.language,
           "defaults": course.defaults.model_dump(mode="json"),
           "lessons": {lesson_key: entry}}
    (dest / "course.yml").write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False),
                                     encoding="utf-8")
    (dest / "README.md").write_text(README.format(key=lesson_key, exercise=lesson.exercise),
                                    encoding="utf-8")
    return dest

