"""Student stubs from instructor solutions, with nbgrader's markers.

`### BEGIN SOLUTION` … `### END SOLUTION` becomes `# YOUR CODE HERE` and
`raise NotImplementedError()` at the marker's indentation;
`### BEGIN HIDDEN TESTS` … `### END HIDDEN TESTS` is removed. The lesson's check
questions (course.yml's `written`) follow the code, each with its `ANSWER_Qn`
placeholder (grader/written.py); the solution answers none of them.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.config import Question

ANSWER = re.compile(r"^ANSWER_Q[0-9]+\s*[:=]", re.M)
MARKER = re.compile(r"^(\s*)### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")


class MarkerError(ValueError):
    """Unbalanced or nested markers; the message gives the line."""


def make_stub(solution: str, filename: str = "solution",
              written: Mapping[str, Question] | None = None) -> str:
    if m := ANSWER.search(solution):
        number = solution.count("\n", 0, m.start()) + 1
        raise MarkerError(f"{filename}:{number}: the solution answers a check question; "
                          "model answers belong in course.yml's rubric notes")
    out: list[str] = []
    inside: tuple[str, int] | None = None
    for number, line in enumerate(solution.splitlines(keepends=True), start=1):
        m = MARKER.match(line.rstrip("\n"))
        if m is None:
            if inside is None:
                out.append(line)
            continue
        indent, edge, kind = m.groups()
        if edge == "BEGIN":
            if inside is not None:
                raise MarkerError(f"{filename}:{number}: BEGIN {kind} inside an open "
                                  f"{inside[0]} region (opened on line {inside[1]})")
            inside = (kind, number)
            if kind == "SOLUTION":
                out.append(f"{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError()\n")
        else:
            if inside is None or inside[0] != kind:
                raise MarkerError(f"{filename}:{number}: END {kind} without a matching BEGIN")
            inside = None
    if inside is not None:
        raise MarkerError(f"{filename}:{inside[1]}: {inside[0]} region is never closed")
    from grader.written import stub_section

    return "".join(out) + stub_section(dict(written or {}))
