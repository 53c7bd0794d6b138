"""The judge: a submission's tests run and scored. One pytest session (runner.py) with
the hidden tests' fixtures (plugin.py), the checks (compare.py) and the one closeness
rule (closeness.py), the reference and its known mistakes (reference.py, kept.py),
points per test (points.py, at the top), the diagnosis, divergence, smallest example and
questions for a failing part, what a student may see of a check (disclosed.py, drawn.py),
what to grade (plan.py) and the class's counts (tally.py).

In: submissions (intake), a sandbox slot, a lesson's context. Out: records. May import
intake, config, points, store, record, lesson, sandbox, text, inside; pages and every
stage above import it.
"""
