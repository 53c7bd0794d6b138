"""`grader new-lesson KEY --name NAME --parts a,b,c`: a lesson's working skeleton.

It writes the course.yml entry (appended to the `lessons:` block as text, so the
file's comments and layout stay as they are), a solution with SOLUTION markers and
its stub, probes importing their helpers from grader.inside.probekit, per part a graded
test and a practice test (comparing with `explained` too for a composite part),
the headers of mistakes.yml and equivalent_mutants.yml, the folder of correct variants
course.yml names (`correct:`, with a README saying what goes there), and an example
class (examples/<key>/: its README and the stub as one student's hand-in). The
project's contract test (tests/e2e/test_contract.py)
runs `grader selftest` on every lesson of course.yml, so the new one is covered by
its entry. Nothing existing is ever overwritten; a skeleton that would not load is
rolled back.
"""
from __future__ import annotations

import keyword
import re
from pathlib import Path

from grader import config
from grader.author.newlesson import templates as t
from grader.lesson import seeds as bands
from grader.lesson.release import make_stub
from grader.lesson.testfile import name_of

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
LESSONS = re.compile(r"^lessons:\s*(#.*)?$")
TOP_LEVEL = re.compile(r"^[^\s#]")


class LessonError(ValueError):
    """The skeleton can't be written; the message says why."""


def _problems(course: config.Course, key: str, name: str, parts: list[str],
              composite: str | None = None) -> list[str]:
    """Why these names can't make a lesson here (empty: they can)."""
    taken = {p: k for k, lesson in course.lessons.items() for p in lesson.parts}
    problems = [] if KEY.match(key) else [f"lesson key {key!r}: letters, digits, _ and -"]
    if key in course.lessons:
        problems.append(f"course.yml already has a lesson {key!r}")
    if not NAME.match(name):
        problems.append(f"name {name!r}: lower-case letters, digits and _")
    if not parts:
        problems.append("give at least one part (--parts a,b,c)")
    if len(set(parts)) != len(parts):
        problems.append("part names repeat")
    for part in parts:
        if not NAME.match(part) or keyword.iskeyword(part) or part.startswith("practice"):
            problems.append(f"part {part!r}: a lower-case Python name, not a keyword, not "
                            "starting with 'practice' (test_practice_<part>.py is its practice file)")
        elif part in taken:
            problems.append(f"part {part!r} is lesson {taken[part]}'s: part names are "
                            "unique in the course")
    if composite is not None and composite not in parts[1:]:
        problems.append(f"composite part {composite!r}: one of --parts, after the parts it "
                        "is made of")
    return problems


def course_entry(text: str, key: str, module: str, parts: list[str]) -> str:
    """course.yml's text with the lesson's entry at the end of the `lessons:` block."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if LESSONS.match(line.rstrip("\n"))), None)
    if start is None:
        raise LessonError("course.yml has no block `lessons:` on a line of its own")
    end = next((i for i in range(start + 1, len(lines)) if TOP_LEVEL.match(lines[i])),
               len(lines))
    last = end - 1
    while last > start and (not lines[last].strip() or lines[last].startswith("#")):
        last -= 1
    keys = [line for line in lines[start + 1:end]
            if line.strip() and not line.lstrip().startswith("#")]
    indent = keys[0][:len(keys[0]) - len(keys[0].lstrip())] if keys else "  "
    body = "".join(t.PART_ENTRY.substitute(i=indent, part=p) for p in parts)
    entry = t.ENTRY.substitute(i=indent, key=key, module=module, parts=body)
    head = "".join(lines[:last + 1])
    return (head if head.endswith("\n") else head + "\n") + entry + "".join(lines[last + 1:])


def _tests(part: str, i: int, composite: bool) -> tuple[str, str]:
    """The graded and the practice test of the i-th part (their seeds: 100·(i+1) and
    bands.PRACTICE + i: lesson/seeds.py's bands)."""
    seeds = dict(part=part, seed=100 * (i + 1), seed_b=100 * (i + 1) + 1)
    practice = dict(part=part, seed=bands.PRACTICE + i)
    if not composite:
        return t.GRADED_TEST.substitute(seeds), t.PRACTICE_TEST.substitute(practice)
    checks = t.EXPLAINED_CHECKS.substitute(part=part)
    return (t.GRADED_COMPOSITE.substitute(seeds, checks=checks),
            t.PRACTICE_COMPOSITE.substitute(practice, checks=checks))


def skeleton(key: str, name: str, parts: list[str],
             composite: str | None = None) -> dict[str, str]:
    """The lesson's files, by path relative to course.yml."""
    module = f"{key}_{name}"
    solution = t.SOLUTION.substitute(
        key=key, name=name, module=module,
        part_lines="\n".join(f"  {p:10} {p}(x): TODO(new-lesson)" for p in parts),
        functions="".join(t.FUNCTION.substitute(part=p) for p in parts))
    tests = f"hidden_tests/{module}"
    files = {f"solutions/{module}.py": solution, f"exercises/{module}.py": make_stub(solution),
             f"{tests}/probes.py": t.PROBES.substitute(
                 key=key, functions="".join(t.PROBE.substitute(part=p) for p in parts)),
             f"{tests}/mistakes.yml": t.MISTAKES.substitute(key=key, module=module,
                                                            first_part=parts[0]),
             f"{tests}/equivalent_mutants.yml": t.EQUIVALENTS.substitute(key=key,
                                                                         module=module),
             f"{tests}/correct/README.md": t.CORRECT.substitute(key=key, module=module,
                                                                mark=t.MARK)}
    for i, part in enumerate(parts):
        graded, practice = _tests(part, i, part == composite)
        files[f"{tests}/{name_of(part)}"] = graded
        files[f"{tests}/{name_of(part, practice=True)}"] = practice
    files[f"examples/{key}/README.md"] = t.EXAMPLES.substitute(key=key, module=module)
    files[f"examples/{key}/unchanged_stub/{module}.py"] = files[f"exercises/{module}.py"]
    return files


def create(course_path: Path, key: str, name: str, parts: list[str],
           composite: str | None = None) -> list[Path]:
    """Write the skeleton and the course.yml entry; the paths written, course.yml first.
    `composite`: the part built from the others, whose tests compare with `explained`."""
    course_path = course_path.resolve()
    course = config.load(course_path)
    problems = _problems(course, key, name, parts, composite)
    files = {course.root / path: text
             for path, text in skeleton(key, name, parts, composite).items()}
    problems += [f"{p.relative_to(course.root)} exists" for p in files if p.exists()]
    if problems:
        raise LessonError("; ".join(problems))
    before = course_path.read_text(encoding="utf-8")
    after = course_entry(before, key, f"{key}_{name}", parts)
    written: list[Path] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
        course_path.write_text(after, encoding="utf-8")
        config.load(course_path).lesson(key)
    except (OSError, config.ConfigError) as exc:
        course_path.write_text(before, encoding="utf-8")
        for path in written:
            path.unlink()
        raise LessonError(f"the skeleton did not load, nothing was kept: {exc}") from None
    return [course_path, *written]
