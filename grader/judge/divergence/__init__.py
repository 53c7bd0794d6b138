"""Where a failing part's values first leave the reference's: the line a TA would
point at after running a small input through both programs side by side.

For a failing part, the student's function runs once more in its sandbox on a
fresh small input (grader/judge/trace_inputs.py: no graded case), under the tracer
(grader/inside/tracer.py), which returns each value its lines produced. The
solution and the lesson's correct variants (its equivalent mutants) are traced the
same way here, on the trusted side, once per run. The first statement of the
student's that produces a value none of them computes (within the lesson's
tolerance, in the same shape or another view of the same values) is named, with
the values matched before it. A trace feeds the student's own page only, never a
verdict: everything in it came from the child and is checked and capped in
untrusted.py, its one parser, and escaped before it is shown. Where no line can be
named honestly, none is.

  untrusted.py   the child's trace parsed: each field checked and capped, the rest dropped
  matching.py    whether a value is one the reference computes (the lesson's tolerance)
  statements.py  each line's statement and digest; the statements a trace ran
  quoting.py     a value as the page quotes it
  finding.py     the first divergence on one traced request
  lesson.py      a lesson's references: traced once a run, recorded, bundled
  tracing.py     a failing part traced in the student's sandbox
"""
from grader.judge.divergence.finding import find
from grader.judge.divergence.lesson import (
    LessonTraces, Variant, correct_variants, for_students, fresh_for_recording,
    lesson_traces, run_traced)
from grader.judge.divergence.matching import (
    Reference, Tolerance, same_forward, same_gradients, same_values)
from grader.judge.divergence.quoting import shown
from grader.judge.divergence.statements import Statements, statements
from grader.judge.divergence.tracing import failing_parts, trace_failing, where
from grader.judge.divergence.untrusted import Event, Trace

__all__ = ["Event", "LessonTraces", "Reference", "Statements", "Tolerance", "Trace",
           "Variant", "correct_variants", "failing_parts", "find", "for_students",
           "fresh_for_recording", "lesson_traces", "run_traced", "same_forward",
           "same_gradients", "same_values", "shown", "statements", "trace_failing",
           "where"]
