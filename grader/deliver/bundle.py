"""The student bundle: everything `grader check` needs, and no solution.

Students must be able to check their work at home without being handed the answer.
The bundle holds the grader, the stub, the lesson's probes, its practice tests
(`test_practice_<part>.py`) and the helper modules they import (`_*.py`), a
course.yml for that lesson alone, and a recording of the practice tests' results
made here by checking the solution, then each known mistake, as a student's file:
the reference's, each mistake's, and, for a composite part, the solution carrying
every combination of mistakes in the other parts (what it compares with), so that
the bundle's check is the project's. It never holds a graded test file (their
cases, seeds and checks), mistakes.yml (whose edits quote the solution) or a result
of a graded case: practice cases draw their inputs from seeds no graded case uses.
The recording also holds the reference's side of the lesson's fresh inputs (none a
graded case's): its results on the candidates of the smallest failing examples and
on the questions' inputs, with the lesson's examples.py and questions.py that make
them, so the check shows a failing part's smallest example and what the questions
found, as the page does; and its traces of the trace inputs and those candidates,
values only: no line number, path or statement of the solution
(`divergence.for_students`), so the check names the line where a student's values
first leave the reference's.
Its pyproject.toml takes any torch 2.x the student has and names the student's
commands only (`grader check`); its install.py puts torch's CPU build where there
is none.
An assembly lesson's bundle (course.yml's `builds_on`: lesson 13b) holds the same of
each lesson it builds on, under that lesson's key in its course.yml (its stub in its
tests folder): its check runs the student's own earlier files, each first checked
with its own lesson's practice tests, since no solution is here to stand in for a
piece.
"""
from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path

import yaml

from grader.judge import divergence, questions, runner, smallest
from grader.config import NOT_SCORED_KEYS, Course
from grader.judge.context import LessonContext
from grader.judge.reference import Caller, combined_for_recording, save_recording
from grader.deliver.torch_pin import CPU_INDEX, torch_pin
from grader.text.strings import TEMPLATES
from grader.lesson.testfile import is_practice

ROOT = Path(__file__).resolve().parents[2]
RECORDING = "practice-reference.bin"
README = """# Lesson {key}: check your work

    python install.py
    .venv/bin/grader check {exercise}

(Windows: `python install.py`, then `.venv\\Scripts\\grader check {exercise}`.)
`install.py` makes `.venv` here (or installs into the virtual environment it runs
in), keeps a torch already there, else installs torch's CPU build, never CUDA.

Fill in `{exercise}` (or hand in a notebook, `{stem}.ipynb`); `grader check` runs
the practice tests on it and prints each part's result, the numbers where yours
differ, and the likely mistake. The graded run has more tests, which are hidden.
Exit status: 0 all practice tests pass, 1 some fail, 2 the file or the command is
wrong. `grader check --json` prints the same as JSON, `--language zh` in Chinese;
`grader check --watch {exercise}` checks again each time you save the file (Ctrl-C
ends it). The installed `grader` works from any folder.
"""
README_ZH = """# 第 {key} 课：检查你的作业

    python install.py
    .venv/bin/grader check {exercise}

（Windows：先运行 `python install.py`，再运行 `.venv\\Scripts\\grader check {exercise}`。）
`install.py` 会在这里创建 `.venv`（或安装到运行它的虚拟环境中）；已有的 torch 会保留，
否则安装 torch 的 CPU 版本，绝不安装 CUDA 版本。

完成 `{exercise}`（也可以提交 notebook：`{stem}.ipynb`）；`grader check` 会在你的文件上
运行练习测试，打印每个部分的结果、你的数值与参考结果不同的地方，以及最可能的错误。
正式评分还有更多隐藏的测试。退出状态：0 表示练习测试全部通过，1 表示有测试未通过，
2 表示文件或命令有误。`grader check --json` 以 JSON 输出同样的内容，`--language en`
用英文输出；`grader check --watch {exercise}` 在你每次保存文件时重新检查（按 Ctrl-C
结束）。安装好的 `grader` 在任何文件夹中都能使用。
"""
READMES = {"en": README, "zh": README_ZH}  # in the course's language
# an assembly lesson's README goes on: where the student's earlier files go
EARLIER = """
`{exercise}` runs on your own files of lessons {lessons}: put {files} beside it
(where the course has you keep them). `grader check {exercise}` first checks each
of them with its own lesson's practice tests and names any that fails or is missing,
so that its mistake is not taken for one in your wiring.
"""
EARLIER_ZH = """
`{exercise}` 运行在你自己第 {lessons} 课的文件上：请把 {files} 放在它旁边（课程要求你
存放它们的地方）。`grader check {exercise}` 会先用各课自己的练习测试检查这些文件，
并指出没有通过或缺少的文件，免得把那里的错误当成你组装上的错误。
"""
EARLIERS = {"en": EARLIER, "zh": EARLIER_ZH}
# What a bundle's pyproject.toml keeps of the project's dependencies: the check's own.
# torch is any 2.x the student has (install.py installs the CPU build where none is),
# so that installing the bundle never replaces it nor pulls CUDA.
STAFF_ONLY = ("PyJWT", "httpx")
STUDENT_TORCH = "torch>=2.1"
PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "minimind-check-{key}"
version = "0.1.0"
description = "Check lesson {key} of the MiniMind course at home"
requires-python = ">=3.10"
dependencies = [
{dependencies}
]

[project.scripts]
grader = "grader.cli.student:student"

[tool.setuptools.packages.find]
include = ["grader*"]
"""


def _dependencies(pyproject: str) -> list[str]:
    """The project's dependencies (the `dependencies = [...]` lines of its
    pyproject.toml) without the staff's own, torch unpinned."""
    block = pyproject.split("\ndependencies = [\n", 1)[1].split("\n]", 1)[0]
    found = [line.strip().split('"')[1] for line in block.splitlines() if '"' in line]
    kept = [STUDENT_TORCH if re.match(r"torch\b", d) else d for d in found
            if not d.startswith(STAFF_ONLY)]
    return kept


def shipped(tests: Path) -> list[Path]:
    """The files of a lesson's tests folder that students receive."""
    return sorted(f for f in tests.glob("*.py")
                  if f.name in ("probes.py", smallest.FILE, questions.FILE)
                  or f.name.startswith("_") or is_practice(f))


def build(course: Course, lesson_key: str, dest: Path) -> Path:
    """The bundle of `lesson_key` in `dest`, with the lessons it builds on."""
    lesson = course.lesson(lesson_key)
    dest.mkdir(parents=True, exist_ok=True)
    entries = {key: _lesson(course, key, dest, key == lesson_key)
               for key in [*lesson.builds_on, lesson_key]}

    shutil.copytree(ROOT / "grader", dest / "grader", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(TEMPLATES, dest / "templates", dirs_exist_ok=True)  # beside its grader/
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (dest / "pyproject.toml").write_text(PYPROJECT.format(
        key=lesson_key, dependencies="\n".join(f'  "{d}",' for d in _dependencies(project))),
        encoding="utf-8")
    installer = (ROOT / "grader" / "deliver" / "bundle_install.py").read_text(encoding="utf-8")
    for name, value in (("TORCH", torch_pin(project)), ("CPU_INDEX", CPU_INDEX)):
        installer, n = re.subn(rf'^{name} = "[^"]*"', f'{name} = "{value}"', installer,
                               count=1, flags=re.M)
        assert n == 1, name  # bundle_install.py's own line, which this fills in
    (dest / "install.py").write_text(installer, encoding="utf-8")
    doc = {"course": course.course, "title": course.title, "title_zh": course.title_zh,
           "language": course.language,
           "defaults": course.defaults.model_dump(mode="json"),
           "lessons": entries}
    (dest / "course.yml").write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False),
                                     encoding="utf-8")
    (dest / "README.md").write_text(readme(course, lesson_key), encoding="utf-8")
    return dest


def _lesson(course: Course, lesson_key: str, dest: Path, main: bool) -> dict:
    """One lesson's shipped tests, recording and stub in `dest` (the stub of a lesson
    the `main` one builds on in its tests folder, so that no stub lies where the
    student's own earlier files go); its course.yml entry."""
    lesson = course.lesson(lesson_key)
    tests = course.path(lesson.tests)
    ctx = LessonContext(course, lesson_key)
    refs = ctx.refs  # fresh: what it records is the practice tests' requests alone
    refs.signatures = None  # computed over the practice tests only
    # The solution, then each known mistake, checked as a student's file would be: a
    # composite part then asks for what it compares with (the solution carrying the
    # mistakes found in the other parts), and those practice results are recorded,
    # for every combination of mistakes too, so the bundle's check is the project's.
    students = [refs.reference.twin(), *(Caller(v.caller.module, refs.probes)
                                         for v in refs.variants)]
    runner.run_tests(ctx, [(s, lambda raw: None) for s in students], select=runner.PRACTICE_TESTS,
                     precompute=True)
    combined_for_recording(refs)
    # the reference's side of every fresh input a failing part's feedback asks about,
    # its traces kept as values only, so the check shows the smallest example and the
    # questions' findings, and names the line where a student's values first leave
    # the reference's
    divergence.fresh_for_recording(ctx)
    refs.fresh = divergence.for_students(ctx)

    test_dir = dest / "tests" / tests.name
    test_dir.mkdir(parents=True, exist_ok=True)
    for f in shipped(tests):
        shutil.copy(f, test_dir / f.name)
    save_recording(refs, test_dir / RECORDING)
    stub = dest / lesson.exercise if main else test_dir / lesson.exercise
    stub.write_text(course.path(lesson.stub).read_text(encoding="utf-8"), encoding="utf-8")
    entry = lesson.model_dump(mode="json", exclude_none=True,
                              exclude={"solution", "submissions", "out", "due",
                                       *NOT_SCORED_KEYS})  # staff's keys stay home
    shapes = {qid: q.model_dump(mode="json") for qid, q in lesson.written.items()
              if q.kind == "shapes"}  # `grader check` marks these; text rubrics stay home
    if shapes:
        entry["written"] = shapes
    entry.update(stub=stub.relative_to(dest).as_posix(), tests=f"tests/{tests.name}",
                 recorded=f"tests/{tests.name}/{RECORDING}")
    return entry


def readme(course: Course, lesson_key: str) -> str:
    """The bundle's README, in the course's language."""
    lesson = course.lesson(lesson_key)
    exercise = lesson.exercise
    text = READMES.get(course.language, README).format(key=lesson_key, exercise=exercise,
                                                       stem=Path(exercise).stem)
    if lesson.builds_on:
        text += EARLIERS.get(course.language, EARLIER).format(
            exercise=exercise, lessons=", ".join(lesson.builds_on),
            files=", ".join(f"`{course.lesson(k).exercise}`" for k in lesson.builds_on))
    return text


def zipped(dest: Path) -> Path:
    """The bundle as one zip beside its folder (`<folder>.zip`, the folder inside), ready
    to upload to an LMS as a file students download."""
    archive = dest.with_name(dest.name + ".zip")
    with zipfile.ZipFile(archive.with_suffix(".part"), "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(dest.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, path.relative_to(dest.parent).as_posix())
    archive.with_suffix(".part").replace(archive)
    return archive

