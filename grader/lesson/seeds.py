"""The seed bands: which seeds each kind of input is drawn from. A practice case, a
smallest example or a traced input that drew a graded case's seed would show a
student that case's numbers, so the bands never overlap:

- graded cases: below PRACTICE (the lessons' tests use 100, 200, ...);
- practice cases: PRACTICE and up (`grader new-lesson` writes PRACTICE + i);
- smallest examples (judge/smallest.py): EXAMPLES plus under 2**20;
- traced inputs (judge/trace_inputs.py): TRACES plus a crc32 and a count;
- the stand-in round draws from os.urandom (judge/standin.py): no band, no seed kept.
"""
from __future__ import annotations

PRACTICE = 10_000
EXAMPLES = 7_000_000
TRACES = 7_000_000_000_000
