"""The lesson graded as one class through the real path (`pool.grade_class`: the
solution's self-check, one sandbox, warm forked workers, results and pages on disk):
the solution, the stub, every known mistake applied to the solution, and each
correct variant. Then each record is held to the contract."""
from __future__ import annotations

from pathlib import Path

from grader.judge import runner
from grader.config import Course
from grader.pages.feedback import points
from grader.judge.plan import Submission, Summary, plan
from grader.judge.context import LessonContext
from grader.record import GRADED, GradeRecord
from grader.judge.reference import Mistake
from grader.author.selftest.findings import INDISTINGUISHABLE, RAISES, Finding, failed, ok
from grader.store import Store, safe_name

SOLUTION, STUB = "solution", "stub"


def mistake_id(m: Mistake) -> str:
    return f"mistake-{m.id}"


def variant_id(path: Path) -> str:
    return f"correct-{path.stem}"


def write_class(course: Course, key: str, mistakes: list[Mistake], correct: list[Path],
                work: Path) -> dict[str, Path]:
    """Submission id -> file: each mistake is the solution with its edits applied."""
    lesson = course.lesson(key)
    solution = course.solution(lesson)
    source = solution.read_text(encoding="utf-8")
    files = {SOLUTION: solution, STUB: course.path(lesson.stub)}
    work.mkdir(parents=True, exist_ok=True)
    for m in mistakes:
        path = work / f"{safe_name(m.id)}.py"
        path.write_text(m.apply(source), encoding="utf-8")
        files[mistake_id(m)] = path
    for path in correct:
        files[variant_id(path)] = path
    return files


def grade(course: Course, key: str, files: dict[str, Path], out: Path,
          jobs: int) -> dict[str, GradeRecord]:
    """Every file graded as a class into `out`; records by submission id."""
    from grader.run import pool
    from grader.sandbox import bwrap
    from grader.sandbox import slot as slots

    store = Store(out)
    todo = plan(store, [Submission(sid, path) for sid, path in files.items()],
                course.version(key), force=True)
    summary = Summary()
    ctx = LessonContext(course, key)
    support = bwrap.probe()
    sandboxed = slots.available(True, support)
    with slots.Sandbox.for_lesson(ctx.course, ctx.lesson, sandboxed,
                                  support=support) as sandbox:
        pool.grade_class(ctx, todo, out, jobs, sandboxed, course.language, summary,
                         sandbox=sandbox)
    if summary.worker_failures:
        raise RuntimeError("grading failed: " + "\n".join(summary.worker_failures))
    records = {sid: store.load(sid) for sid in files}
    missing = [sid for sid, record in records.items() if record is None]
    if missing:  # graded without a failure, so each has its result: none may be lost
        raise RuntimeError("no result for " + ", ".join(missing))
    return {sid: record for sid, record in records.items() if record is not None}


def practice(course: Course, key: str) -> Finding:
    """The practice tests (what `grader check` runs) pass on the solution too."""
    ctx = LessonContext(course, key)
    reports: list[dict] = []
    as_student = ctx.refs.reference.twin()
    runner.run_tests(ctx, [(as_student, reports.append)], select=runner.PRACTICE_TESTS)
    tests = runner.score(ctx, reports[0]).tests
    failing = [f"{t.name}: {t.message}" for t in tests if not t.passed]
    if failing:
        return failed("solution", "practice tests", "fail on the solution: "
                      + "; ".join(failing[:3]))
    return ok("solution", "practice tests", f"{len(tests)} pass on the solution")


def lost(record: GradeRecord) -> set[str]:
    return {p for p, v in record.parts.items() if v.score < v.max_score}


def _named(record: GradeRecord) -> list[str]:
    """Every diagnosis in a record: its parts' and its tests'."""
    found = [p.diagnosis for p in record.parts.values()] + [t.diagnosis for t in record.tests]
    return sorted({d.id for d in found if d and d.id})


def _failures(record: GradeRecord, limit: int = 3) -> str:
    failing = [t for t in record.tests if not t.passed]
    return "; ".join(f"{t.name}: {t.message[:200]}" for t in failing[:limit])


def _score(record: GradeRecord) -> str:
    return f"{points(record.score)}/{points(record.max_score)}"


def solution(record: GradeRecord) -> Finding:
    if record.status != GRADED or lost(record):
        return failed("solution", SOLUTION, f"{record.status}, {_score(record)}: "
                      f"{record.problem or _failures(record)}")
    if _named(record):
        return failed("solution", SOLUTION, f"full marks, but diagnosed as {_named(record)}")
    return ok("solution", SOLUTION, f"full marks ({_score(record)}), no diagnosis")


def stub(record: GradeRecord) -> Finding:
    passed = [t.name for t in record.tests if t.passed]
    if record.score != 0 or passed:
        return failed("stub", STUB, f"scores {_score(record)}; passes {passed[:5]}: a test "
                      "that an empty layer passes gives points for nothing")
    return ok("stub", STUB, f"scores 0 ({len(record.tests)} tests fail; "
              f"{record.status})")


def mistake(m: Mistake, record: GradeRecord) -> Finding:
    """Loses points in its own part only, and is named there; or raises there and is
    not named (a raise alone names nothing), or is named there while the composite
    part built on it raises (its shape or dtype breaks the layer: a raising test is
    never excused), or is named as another mistake with the same signature (the tests
    can't tell them apart): those three listed, not failures."""
    subject = m.id
    if record.status != GRADED:
        return failed("mistakes", subject, f"{record.status}: {record.problem}")
    where = lost(record)
    if not where:
        return failed("mistakes", subject, f"scores full marks in part {m.part!r}: no "
                      "graded test catches it")
    if m.part not in where:
        return failed("mistakes", subject, f"loses points in {sorted(where)}, not in its "
                      f"part {m.part!r}: {_failures(record)}")
    beyond = [t for t in record.tests if t.part in where - {m.part} and not t.passed]
    if beyond and not all(t.error for t in beyond):
        return failed("mistakes", subject, f"loses points in {sorted(where - {m.part})}, "
                      f"not only its part {m.part!r}: {_failures(record)}")
    part = record.parts[m.part]
    named = part.diagnosis.id if part.diagnosis else None
    lost_here = f"{points(part.score)}/{points(part.max_score)} in {m.part}"
    if named == m.id and beyond:
        return Finding("mistakes", subject, RAISES, f"named; {lost_here}; the layer built "
                       f"on it raises in {len(beyond)} test(s) of "
                       f"{sorted(where - {m.part})} ({beyond[0].message[:120]}): a "
                       "shape or dtype the other parts can't use, never excused there")
    if named == m.id:
        return ok("mistakes", subject, f"named; {lost_here}")
    failing = [t for t in record.tests if t.part == m.part and not t.passed]
    raised = [t for t in failing if t.error]
    if raised:
        return Finding("mistakes", subject, RAISES, f"{lost_here}; raises in {len(raised)} of "
                       f"{len(failing)} failing tests ({raised[0].message[:120]}) and is "
                       "not named: a raise alone names nothing")
    if named:
        return Finding("mistakes", subject, INDISTINGUISHABLE, f"{lost_here}; named as "
                       f"{named!r}: the same results on the same failing tests")
    return failed("mistakes", subject, f"{lost_here}, but not named: no known mistake fails "
                  f"exactly its failing tests ({[t.name for t in failing][:5]}) with "
                  "matching results; is it deterministic?")


def correct(name: str, record: GradeRecord) -> Finding:
    if record.status != GRADED or lost(record):
        return failed("correct", name, f"{record.status}, {_score(record)}: "
                      f"{record.problem or _failures(record)}")
    if _named(record):
        return failed("correct", name, f"full marks, but diagnosed as {_named(record)}")
    return ok("correct", name, f"full marks ({_score(record)}), no diagnosis")
