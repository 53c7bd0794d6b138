"""No solution line in what students receive: the stub, the files of the tests folder
the student bundle ships (`bundle.shipped`), and the mistakes' titles and hints (the
bundle's recording and every feedback page carry them)."""
from __future__ import annotations

from pathlib import Path

from grader.deliver.bundle import shipped
from grader.config import Course
from grader.judge.reference import Mistake
from grader.lesson.release import MARKER
from grader.author.selftest.findings import Finding, failed, ok

# Shorter lines (`else:`, `return y`) say nothing about the answer and occur anywhere.
MIN_CHARS = 12


def _squeeze(line: str) -> str:
    return " ".join(line.split())


def secret_lines(solution: str) -> set[str]:
    """Lines inside SOLUTION (or HIDDEN TESTS) markers that the solution does not also
    give outside them (what the stub keeps is no secret)."""
    inside, secret, given = False, set[str](), set[str]()
    for line in solution.splitlines():
        marker = MARKER.match(line)
        if marker:
            inside = marker.group(2) == "BEGIN"
            continue
        (secret if inside else given).add(_squeeze(line))
    return {s for s in secret - given if len(s) >= MIN_CHARS}


def _leaked(secret: set[str], text: str) -> list[str]:
    lines = [_squeeze(line) for line in text.splitlines()]
    return sorted(s for s in secret if any(s in line for line in lines))


def received(course: Course, key: str, mistakes: list[Mistake]) -> dict[str, str]:
    """What students receive, by a name to report: file contents and hint texts."""
    lesson = course.lesson(key)
    texts = {str(lesson.stub): course.path(lesson.stub).read_text(encoding="utf-8")}
    tests = course.path(lesson.tests)
    for f in shipped(tests):
        texts[str(lesson.tests / f.name)] = f.read_text(encoding="utf-8")
    for m in mistakes:
        texts[f"mistakes.yml {m.id} (title, hint)"] = "\n".join(
            [*m.title.values(), *m.hint.values()])
    return texts


def inspect(course: Course, key: str, mistakes: list[Mistake]) -> list[Finding]:
    lesson = course.lesson(key)
    secret = secret_lines(course.solution(lesson).read_text(encoding="utf-8"))
    found = []
    for name, text in received(course, key, mistakes).items():
        leaked = _leaked(secret, text)
        if leaked:
            found.append(failed("leaks", name, f"quotes {len(leaked)} solution line(s): "
                                + "; ".join(repr(s) for s in leaked[:3])))
        else:
            found.append(ok("leaks", name, "no solution line"))
    return found


def stub_current(course: Course, key: str) -> Finding:
    """The committed stub is what `grader release` makes of the solution today."""
    from grader.lesson.release import MarkerError, make_stub

    lesson = course.lesson(key)
    stub: Path = course.path(lesson.stub)
    try:
        expected = make_stub(course.solution(lesson).read_text(encoding="utf-8"),
                             str(lesson.solution), lesson.written)
    except MarkerError as exc:
        return failed("stub", str(lesson.stub), str(exc))
    if not stub.exists() or stub.read_text(encoding="utf-8") != expected:
        return failed("stub", str(lesson.stub),
                      f"out of date: run `grader release --lesson {key}`")
    return ok("stub", str(lesson.stub), "generated from the solution's markers")
