"""`grader mark --export/--import`: a lesson's text answers and their marks as a CSV, for
TAs who mark in a spreadsheet.

One row per answer a TA marks (text questions, answered), grouped by question. `points`
is the mark (its total, not a change); `rubric` the applied items' ids, `;` between; with
`points` blank and `rubric` filled, the mark is the items' sum. On import a blank cell
leaves that part of the mark as it is and `-` clears it; a row whose answer changed
since the export (its `answer_hash` is not the answer's now) is refused, naming the row.
Cells are written through export/cells.py's `cell`, so nothing runs as a formula.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader import points as exact
from grader.config import Lesson
from grader.deliver.export.cells import cell, starts_formula
from grader.judge.written import (STALE, Mark, append_jsonl, grades_folder, marks,
                            recorded_answers)

COLUMNS = ["student_id", "question", "answer", "points", "rubric", "comment",
           "answer_hash", "status"]
NEEDED = ("student_id", "question", "points", "rubric", "comment", "answer_hash")
CELL_LIMIT = 32_767  # a spreadsheet cell's characters (Excel's limit)
CLEAR = "-"


class CsvError(ValueError):
    """The file cannot be applied as a whole; the message says why."""


def export_rows(course_root: Path, lesson_key: str, lesson: Lesson) -> list[list[object]]:
    """The header and one row per answered text question, prefilled with its mark (a
    stale mark is left out of the cells: the TA marks the new answer again)."""
    folder = grades_folder(course_root, lesson_key)
    answers, current = recorded_answers(folder), marks(folder)
    rows: list[list[object]] = [[*COLUMNS]]
    for qid, q in lesson.written.items():
        if q.kind != "text":
            continue
        for (sid, aq), a in sorted(answers.items()):
            if aq != qid or not a.given:
                continue
            m = current.get((sid, qid))
            stale = m is not None and m.hash != a.digest
            shown = None if stale else m
            rows.append([sid, qid, a.text[:CELL_LIMIT - 1],
                         "" if shown is None or shown.points is None else shown.points,
                         ";".join(shown.rubric) if shown else "",
                         shown.comment if shown else "", a.digest,
                         STALE if stale else "marked" if m else "awaiting"])
    return rows


def write_export(path: Path, rows: list[list[object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8-sig") as f:  # BOM: Excel reads UTF-8
        out = csv.writer(f)
        for row in rows:
            out.writerow([cell(v) for v in row])


@dataclass
class Applied:
    """What an import did: marks written, rows that changed nothing, rows refused (why)."""

    applied: int = 0
    unchanged: int = 0
    refused: list[str] = field(default_factory=list)


def _text(value: str) -> str:
    """A cell as the TA meant it: the `'` that made a formula inert taken off again."""
    return value[1:] if value.startswith("'") and starts_formula(value[1:]) else value


def import_file(course_root: Path, lesson_key: str, lesson: Lesson, path: Path) -> Applied:
    """Apply the CSV's rows as marks (appended to grades/<lesson>/written.jsonl)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CsvError(f"cannot read {path}: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in NEEDED if c not in (reader.fieldnames or [])]
    if missing:
        raise CsvError(f"{path} lacks the column(s) {', '.join(missing)}: export it with "
                       f"`grader mark --lesson {lesson_key} --export FILE.csv` and fill that")
    folder = grades_folder(course_root, lesson_key)
    answers, current = recorded_answers(folder), marks(folder)
    done, new = Applied(), []
    for number, row in enumerate(reader, start=2):  # line 1 is the header
        sid, qid = _text(row["student_id"] or ""), (row["question"] or "").strip()
        where = f"row {number} ({sid}, {qid})"
        q = lesson.written.get(qid)
        if q is None or q.kind != "text":
            done.refused.append(f"{where}: {qid!r} is not a text question of lesson "
                                f"{lesson_key}")
            continue
        a = answers.get((sid, qid))
        if a is None or not a.given:
            done.refused.append(f"{where}: no answer of this student is recorded (run "
                                "`grader run` first)")
            continue
        if (row["answer_hash"] or "").strip() != a.digest:
            done.refused.append(f"{where}: the answer changed since the export; export "
                                "again and mark the new answer")
            continue
        old = current.get((sid, qid))
        base = old if old is not None and old.hash == a.digest else \
            Mark(sid, qid, a.digest, cleared=True)  # none yet, or stale: marked afresh
        try:
            mark = _changed(base, row, q)
        except ValueError as exc:
            done.refused.append(f"{where}: {exc}")
            continue
        if mark is None or mark == base or (mark.cleared and base.cleared):
            done.unchanged += 1
            continue
        new.append(mark.to_json())
        current[(sid, qid)] = mark
        done.applied += 1
    if not done.applied:
        raise CsvError(f"nothing to update in {path}: {done.unchanged} row(s) unchanged, "
                       f"{len(done.refused)} refused" +
                       "".join(f"\n  {r}" for r in done.refused))
    append_jsonl(folder / "written.jsonl", new)
    return done


def _changed(base: Mark, row: dict, q) -> Mark | None:
    """The mark after this row's cells (None: every cell blank)."""
    pts, rub, com = ((row.get(k) or "").strip() for k in ("points", "rubric", "comment"))
    if not (pts or rub or com):
        return None
    mark = base
    if pts == CLEAR:
        mark = replace(mark, points=None)
    elif pts:
        try:
            value = float(pts)
        except ValueError:
            raise ValueError(f"points {pts!r} is not a number") from None
        if exact.problem(value) is not None or not 0 <= value <= q.points:
            raise ValueError(f"points {pts} is not a multiple of 1/1024 from 0 to "
                             f"{q.points:g}")
        mark = replace(mark, points=value)
    if rub == CLEAR:
        mark = replace(mark, rubric=())
    elif rub:
        ids = tuple(i.strip() for i in rub.split(";") if i.strip())
        unknown = [i for i in ids if i not in {r.id for r in q.rubric}]
        if unknown:
            raise ValueError(f"rubric item(s) {', '.join(unknown)} are not in the question's "
                             f"rubric ({', '.join(r.id for r in q.rubric)})")
        mark = replace(mark, rubric=ids)
    if com == CLEAR:
        mark = replace(mark, comment="")
    elif com:
        mark = replace(mark, comment=_text((row.get("comment") or "").strip()))
    cleared = mark.points is None and not mark.rubric and not mark.comment
    return replace(mark, cleared=cleared, adjust=0.0 if cleared else mark.adjust)
