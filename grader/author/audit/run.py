"""An audit's steps: make the mutants, write each as a student's submission, have the
class grader grade them (the caller passes in `grader run`'s own grading step), and
read each mutant's verdict from the results it wrote."""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from grader.lesson import equivalents as listing
from grader.lesson.mutants import generate, sample
from grader.lesson.operators import OPERATORS
from grader.author.audit.report import Audit, verdict
from grader.config import Course
from grader.judge.plan import Submission, plan
from grader.record import GradeRecord
from grader.store import Store

# grade(todo, out): grade these submissions into the folder `out`, as `grader run` does.
Grade = Callable[[list[Submission], Path], None]
# The solution itself, graded beside its mutants: if the path fails it (a broken
# sandbox, say), every mutant would look killed, so there is no verdict at all.
CONTROL = "unmutated"


def operator_names(spec: str | None) -> list[str]:
    """"dim,topk" -> ["dim", "topk"]; None -> every operator."""
    if not spec:
        return list(OPERATORS)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in OPERATORS]
    if unknown:
        raise ValueError(f"unknown operator(s) {', '.join(unknown)}; "
                         f"known: {', '.join(OPERATORS)}")
    return names


def write_submissions(sources: dict[str, str], folder: Path, exercise: str
                      ) -> list[Submission]:
    """`folder/<id>/<exercise>`: the layout a class's submissions have."""
    subs = []
    for sid, source in sources.items():
        path = folder / sid / exercise
        path.parent.mkdir(parents=True)
        path.write_text(source, encoding="utf-8")
        subs.append(Submission(sid, path))
    return subs


def grading_seconds(store: Store, ids: list[str]) -> float:
    """From the first mutant's start to the last one's result, start-up left out:
    each result file is written when its grading ends, and records how long it took."""
    spans = []
    for mutant_id in ids:
        record = store.load(mutant_id)
        if record is None:  # no result to time (the run reports it as ungraded)
            continue
        end = store.result_path(mutant_id).stat().st_mtime
        spans.append((end - record.timing.elapsed_s, end))
    return max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0


def audit(course: Course, lesson_key: str, grade: Grade, operators: list[str],
          sample_size: int | None, started: float) -> Audit:
    """Grade the mutants of the lesson's solution as a class; `started` is when the
    command began (time.monotonic()), for the rate that includes start-up."""
    lesson = course.lesson(lesson_key)
    if lesson.solution is None:
        raise ValueError(f"lesson {lesson_key} has no solution to mutate")
    solution = course.path(lesson.solution).read_text(encoding="utf-8")
    made = generate(solution, operators)
    known = listing.load(course.path(lesson.tests))
    chosen = sample(made.mutants, sample_size)
    with tempfile.TemporaryDirectory(prefix="grader-audit-") as tmp:
        sources = {CONTROL: solution, **{m.id: m.source for m in chosen}}
        todo = write_submissions(sources, Path(tmp) / "mutants", lesson.exercise)
        graded = Path(tmp) / "graded"
        store = Store(graded)
        grade(plan(store, todo, course.version(lesson_key), force=True), graded)
        _check_control(_record(store, CONTROL))
        verdicts = [verdict(m, _record(store, m.id), known.get(m.id)) for m in chosen]
        seconds = grading_seconds(store, list(sources))
    every = {m.id for m in generate(solution).mutants} if set(operators) != set(OPERATORS) \
        else {m.id for m in made.mutants}
    return Audit(lesson_key, str(lesson.solution), solution, verdicts,
                 len(made.mutants), made.uncompilable, made.duplicates, operators,
                 sample_size, time.monotonic() - started, seconds,
                 sorted(set(known) - every))


def _check_control(record: GradeRecord) -> None:
    if record.score < record.max_score:
        failed = [t.message for t in record.tests if not t.passed]
        raise RuntimeError("the grading path fails the unmutated solution "
                           f"({record.score}/{record.max_score}: "
                           f"{(failed or [record.problem])[0]}); no mutant can be "
                           "judged")


def _record(store: Store, mutant_id: str) -> GradeRecord:
    record = store.load(mutant_id)
    if record is None:
        raise RuntimeError(f"mutant {mutant_id} was not graded")
    return record
