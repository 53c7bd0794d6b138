"""A notebook's lines as its student knows them: the grader joins a notebook's code
cells into one .py (intake/notebook.py), so Python's messages name that file's lines;
a page and `grader check` say the code cell and the line in it instead, from the
record's `cells` (`notebook.cells_of`)."""
from __future__ import annotations

import re
from collections.abc import Sequence

# "(<file>.py, line 38)" of a syntax error, `File "<file>.py", line 38` of a traceback
_IN_PROBLEM = re.compile(r"\(([^()\n]*?\.py), line (\d+)\)")
_IN_TRACEBACK = re.compile(r'File "([^"\n]*?\.py)", line (\d+)')


def cell_line(line: int, cells: Sequence[Sequence[int]]) -> tuple[int, int] | None:
    """(code cell number, line in that cell) of the joined file's `line`; None for a
    line that is no cell's (the answers appended after the code) or no notebook."""
    for first, last, cell, cell_first in cells:
        if first <= line <= last:
            return cell, cell_first + line - first
    return None


def at(line: int, cells: Sequence[Sequence[int]], t: dict[str, str], start: bool = False) -> str:
    """"line 38", or "code cell 3, line 2" for a notebook, in the language of `t`;
    capitalized to `start` a sentence ("Line 38")."""
    found = cell_line(line, cells)
    said = (t["at_cell_line"].format(cell=found[0], line=found[1]) if found
            else t["at_line"].format(line=line))
    return said[:1].upper() + said[1:] if start else said


def in_cells(text: str, cells: Sequence[Sequence[int]], t: dict[str, str], file: str) -> str:
    """`text` (a problem, a message, a traceback) with each line of the joined file
    `file` said as the cell's line, in the language of `t`; as it is without cells."""
    if not cells or not text:
        return text

    def said(m: re.Match, shown: str) -> str:
        found = cell_line(int(m.group(2)), cells)
        if m.group(1).rsplit("/", 1)[-1] != file or found is None:
            return m.group(0)  # the grader's or a library's file, or no cell's line
        return shown.format(t["at_cell_line"].format(cell=found[0],
                                                                  line=found[1]))

    text = _IN_PROBLEM.sub(lambda m: said(m, "({})"), text)
    return _IN_TRACEBACK.sub(lambda m: said(m, "{}"), text)
