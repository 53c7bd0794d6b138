"""The files `grader new-lesson` writes, as string.Template texts ($key, $name, $part...).

Every place the instructor must write something carries the marker TODO(new-lesson);
`grader selftest` fails while one is left. The skeleton grades a tensor-in,
tensor-out function per part: the common case, and a working start for others. A
composite part (one built from the others) gets tests that compare with `explained`
too, its practice test included: without it a mistake in another part would cost
points in the composite part as well.
"""
from string import Template

MARK = "TODO(new-lesson)"

ENTRY = Template('''
$i"$key":
$i$i# Written by `grader new-lesson`: fill the TODO(new-lesson) markers, then run
$i$i# `grader release --lesson $key` and `grader selftest --lesson $key`.
$i${i}title: "TODO(new-lesson): the lesson's title"
$i${i}exercise: $module.py
$i${i}solution: solutions/$module.py
$i${i}stub: exercises/$module.py
$i${i}tests: hidden_tests/$module
$i${i}provides: [torch, numpy]
$i${i}preload: [torch]
$i${i}submissions: examples/$key
$i${i}out: out/$key
$i${i}correct: hidden_tests/$module/correct  # selftest's correct variants (staff only)
$i${i}parts:
$parts''')

PART_ENTRY = Template('$i$i$i$part: {points: 1, title: "TODO(new-lesson): what $part grades"}\n')

SOLUTION = Template('''"""Lesson $key: $name.

TODO(new-lesson): what the student builds, one line per part:
$part_lines
Check your work with `grader check $module.py`.
"""
import torch
$functions''')

FUNCTION = Template('''

def $part(x: torch.Tensor) -> torch.Tensor:
    """Part "$part": TODO(new-lesson): what it computes; shapes in and out."""
    ### BEGIN SOLUTION
    return x.clone()  # TODO(new-lesson): the reference computation
    ### END SOLUTION
''')

PROBES = Template('''"""Lesson $key probes: build what a part grades from the inputs a test sends, call
the submission, return plain values (tensors, numbers, strings, lists, dicts).

This file runs inside the sandbox on a student's module and on the trusted side on
the solution: it holds no answer (students receive it). Errors raised here are
shown to the student, so they say what to fix: raise probekit.ContractError, which the
page shows as the interface's message, not as the student's exception.
"""
import torch

from grader.inside.probekit import plain
$functions''')

PROBE = Template('''

def $part(m, x: torch.Tensor) -> dict:
    """Part "$part": the submission's `$part` on a copy of x."""
    y = m.$part(x.clone())  # TODO(new-lesson): build and call what part $part grades
    return {"y": plain(y, "$part's result")}
''')

GRADED_TEST = Template('''"""Part "$part": TODO(new-lesson): what the graded cases cover (sizes, dtypes, edge
cases). Graded cases draw their inputs from seeds no practice case uses."""
import pytest
import torch

# (dtype, shape, seed)  TODO(new-lesson): the graded cases
CASES = [("float32", (2, 8), $seed), ("float64", (3, 5), ${seed_b})]


@pytest.mark.parametrize("dtype,shape,seed", CASES)
def test_$part(student, reference, check, dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64).to(getattr(torch, dtype))
    got, ref = student.call("$part", x=x), reference.call("$part", x=x)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"])
''')

# A composite part: the reference, or else the solution with the mistakes established
# in the student's other parts (`explained`), so those mistakes cost points there only.
EXPLAINED_CHECKS = Template('''    got, ref = student.call("$part", x=x), reference.call("$part", x=x)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"],
                alt=lambda: [r["y"] for r in explained.call("$part", x=x)],
                alt_note="matches the reference with the mistakes found in your other parts")
''')

GRADED_COMPOSITE = Template('''"""Part "$part", built from the other parts: TODO(new-lesson): what the graded cases
cover. It comes after its parts in course.yml and compares with the reference or,
else, with the solution carrying the mistakes found in the student's other parts
(`explained`). Graded cases draw their inputs from seeds no practice case uses."""
import pytest
import torch

# (dtype, shape, seed)  TODO(new-lesson): the graded cases
CASES = [("float32", (2, 8), $seed), ("float64", (3, 5), ${seed_b})]


@pytest.mark.parametrize("dtype,shape,seed", CASES)
def test_$part(student, reference, explained, check, dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64).to(getattr(torch, dtype))
$checks''')

PRACTICE_COMPOSITE = Template('''"""Practice case for part "$part" (0 points), built from the other parts: like its
graded tests it compares with `explained` too, so a student whose other parts hold
a known mistake sees it named there, not here. Shipped to students with its
recorded results, so its inputs come from a seed no graded case uses; its parameters
are the graded tests', so its id names its case as theirs do."""
import pytest
import torch


@pytest.mark.parametrize("dtype,shape,seed", [("float32", (2, 8), $seed)])
def test_practice_$part(student, reference, explained, check, dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64).to(getattr(torch, dtype))
$checks''')

EXAMPLES = Template('''# A sample class for lesson $key

`grader run --lesson $key` grades it into `out/$key`: one folder per student holding
`$module.py`. Add realistic submissions (a correct one in another style, each common
mistake, one that raises, one that times out) and say what each should score.

| student | what they handed in | expected |
|---|---|---|
| unchanged_stub | the stub, unchanged | 0, "not implemented" |
| TODO(new-lesson) | a correct submission, written differently from the solution | full marks |
''')

PRACTICE_TEST = Template('''"""Practice case for part "$part" (0 points): shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses; its parameters
are the graded tests', so its id names its case as theirs do."""
import pytest
import torch


@pytest.mark.parametrize("dtype,shape,seed", [("float32", (2, 8), $seed)])
def test_practice_$part(student, reference, check, dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64).to(getattr(torch, dtype))
    got, ref = student.call("$part", x=x), reference.call("$part", x=x)
    check.shape("output shape", got["y"], tuple(ref["y"].shape))
    check.close("output", got["y"], ref["y"])
''')

MISTAKES = Template('''# Known mistakes of lesson $key, each a text edit of solutions/$module.py. The
# grader names a mistake when a student's results match its variant's on every
# failing test of its part; `grader selftest --lesson $key` grades each variant.
# Hints point to the lesson's text, never to solution code (students see them).
#
# - id: short_name
#   part: $first_part
#   title: "what is wrong, in a few words"
#   title_zh: "……"
#   hint: "what the lesson says to do instead (section, formula)"
#   hint_zh: "……"
#   edits:
#     - old: "a line of the solution (it must occur exactly once)"
#       new: "the line with the mistake"
[]
''')

CORRECT = Template('''# Correct variants of lesson $key (`correct:` in course.yml)

$mark: add at least one correct `$module.py` written differently from
solutions/$module.py, as a student might (another decomposition, another library call),
each as its own `*.py` here. `grader selftest --lesson $key` grades each one and fails
unless it scores full marks with no mistake named: the check that the hidden tests judge
behaviour, not the solution's form. They stay with the hidden tests: they are answers.
''')

EQUIVALENTS = Template('''# Mutants of solutions/$module.py that no test can kill (`grader audit --lesson $key`
# leaves them out of the kill rate). Each entry: id (as the audit prints it) and reason.
[]
''')
