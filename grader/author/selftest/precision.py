"""Precision is not a mistake: the solution computed with more precision (the variants
`grader tolerance` generates: down-casts removed, everything in float64) must pass
every graded test. Run in-process, as trusted code: they are the solution's own."""
from __future__ import annotations

from grader.config import Course
from grader.judge.context import LessonContext
from grader.author.selftest.findings import Finding, failed, ok
from grader.author.tolerance import measured, variants


def inspect(course: Course, key: str) -> list[Finding]:
    """One finding per generated variant: full marks, or which tests it fails."""
    refs = LessonContext(course, key).refs
    if refs.source is None:
        return []
    items = measured.graded_tests(course, key)
    made, _ = variants.generated(refs.source, refs.reference, refs.probes, key)
    found = []
    for v in made:
        run = measured.run(items, v.caller, refs.reference, course.tolerances(key))
        if run.failed:
            found.append(failed("precision", v.name, f"{v.about}: fails "
                                f"{', '.join(sorted(run.failed)[:3])}; precision is not a "
                                f"mistake: `grader tolerance --lesson {key}` says which "
                                "tolerance would accept it"))
        else:
            found.append(ok("precision", v.name, f"{v.about}: passes all {len(items)} "
                            "graded tests"))
    return found
