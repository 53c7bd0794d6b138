"""Names that must point to one lesson only: part names, test and helper module names,
and exercise file names. Reports, exports and the student's `grader check` find a
lesson's things by these names, and pytest run by hand (its default import mode)
imports test modules by their bare names: two lessons sharing one would mix up."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from grader.judge import questions, smallest, standin, trace_inputs
from grader.config import Course
from grader.author.selftest.findings import Finding, failed, ok

# Files the grader loads by path under a per-lesson name, which every lesson may have:
# probes.py, the trace's fresh inputs, the smallest example's cases, the questions and
# the stand-ins.
PER_LESSON = {"probes", Path(trace_inputs.FILE).stem, Path(smallest.FILE).stem,
              Path(questions.FILE).stem, Path(standin.FILE).stem}


def _owners(course: Course) -> dict[str, dict[str, set[str]]]:
    """kind -> name -> the lessons that use it."""
    owners: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for key, lesson in course.lessons.items():
        for part in lesson.parts:
            owners["part"][part].add(key)
        for f in course.path(lesson.tests).glob("*.py"):
            if f.stem not in PER_LESSON:
                owners["module"][f.stem].add(key)
        owners["exercise"][Path(lesson.exercise).stem].add(key)
    return owners


def inspect(course: Course, key: str) -> list[Finding]:
    """One finding per kind of name: unique, or which other lessons share which name."""
    found = []
    for kind, names in sorted(_owners(course).items()):
        mine = sorted(n for n, keys in names.items() if key in keys)
        shared = [f"{n!r} (also lesson {', '.join(sorted(names[n] - {key}))})"
                  for n in mine if len(names[n]) > 1]
        if shared:
            found.append(failed("names", kind, f"{kind} names shared with another lesson: "
                                f"{'; '.join(shared)}; rename them in this lesson"))
        else:
            found.append(ok("names", kind, f"{len(mine)} {kind} name(s) unique in the course"))
    return found
