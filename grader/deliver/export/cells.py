"""Spreadsheet cells that stay data: names from a class never run as formulas.

A text cell whose first character is `=`, `+`, `-`, `@` or `|`, or a tab or carriage
return, is read by Excel, LibreOffice or Google Sheets as a formula or a DDE command
(CSV injection). Spreadsheets that trim a cell on import, or fold fullwidth forms, reach
the same sign behind leading spaces (a non-breaking space, an ideographic space, a
zero-width one) or written fullwidth (`＝`, `＠`), so the sign is looked for after
those. OWASP's rule is to prefix such a cell with `'`, which shows the text as written.
Numbers stay numbers, so score columns still import as scores.
"""
from __future__ import annotations

import csv
import unicodedata
from collections.abc import Iterable
from typing import IO

from grader.record import MISSING, GradeRecord

FORMULA_SIGNS = frozenset("=+-@|")


def _first_visible(text: str) -> str:
    """The first character a spreadsheet that trims and folds the cell would read:
    spaces of every kind and invisible format characters (BOM, zero-width) skipped,
    fullwidth and compatibility forms folded (NFKC)."""
    for ch in text:
        if ch.isspace() or unicodedata.category(ch) == "Cf":
            continue
        return unicodedata.normalize("NFKC", ch)[:1]
    return ""


def starts_formula(text: str) -> bool:
    """Whether a spreadsheet could run this text as a formula."""
    return text[:1] in ("\t", "\r") or _first_visible(text) in FORMULA_SIGNS


def cell(value: object) -> object:
    """A CSV cell safe to open in a spreadsheet; numbers are left as they are."""
    if isinstance(value, str) and starts_formula(value):
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
