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

ANSWER = re.compile(r"^ANSWER_Q[0-9]+\s*[:=]", re.M)
MARKER = re.compile(r"^(\s*)### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")
PLACEHOLDER = "YOUR ANSWER HERE"   # a text answer in the stub, as nbgrader writes it
# a shapes question's fields without its own `shapes` (lesson 13's), in the stub's order
SHAPE_FIELDS = ("x_flat", "scores", "topk_idx", "topk_weight", "y")


class MarkerError(ValueError):
    """Unbalanced or nested markers; the message gives the line."""


def make_stub(solution: str, filename: str = "solution",
              written: Mapping | None = None) -> str:
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
    return "".join(out) + stub_section(dict(written or {}))


def stub_section(written: dict) -> str:
    """The questions as `grader release` appends them to the stub, after the code."""
    if not written:
        return ""
    said = ["# Check questions. Answer each in its string, in English or Chinese; leave the",
            "# code above as it is. A TA marks the written answers; the shapes question is",
            "# marked by the grader (`grader check` shows it)."]
    if not any(q.kind == "shapes" for q in written.values()):
        said[1:] = ["# code above as it is. A TA marks the answers."]
    out = ["\n\n# " + "-" * 76, *said,
           "# 本节检查：在下面的字符串里作答（中英文均可）。",
           "# " + "-" * 76]
    for qid, q in written.items():
        out.append("")
        out.append(f"# {qid} ({q.points:g} points): {q.text}")
        if q.text_zh:
            out.append(f"# {qid}（{q.points:g} 分）：{q.text_zh}")
        name = f"ANSWER_{qid.upper()}"
        if q.kind == "shapes":
            out.append(f"{name} = {{")
            out += [f'    "{f}": "",' for f in q.fields()]
            out.append("}")
        else:
            out.append(f'{name} = """{PLACEHOLDER}"""')
    return "\n".join(out) + "\n"
