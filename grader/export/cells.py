"""Spreadsheet cells that stay data: names from a class never run as formulas.

A text cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (CSV injection); OWASP's rule is to
prefix it with `'`, which shows the text as written. Numbers stay numbers, so score
columns still import as scores.
"""
from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import IO

from grader.record import MISSING, GradeRecord

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value: object) -> object:
    """A CSV cell safe to open in a spreadsheet; numbers are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def write_rows(f: IO[str], rows: Iterable[list[object]]) -> None:
    """Write rows as CSV with every text cell neutralised."""
    out = csv.writer(f)
    for row in rows:
        out.writerow([cell(v) for v in row])


def score_cell(student: GradeRecord, missing: str) -> object:
    """A student's score for a gradebook cell: a missing submission is blank (the LMS
    keeps "no grade", so a late hand-in is not hidden behind a 0) or 0, as course.yml's
    `missing` says."""
    if student.status == MISSING:
        return "" if missing == "blank" else 0.0
    return student.score
