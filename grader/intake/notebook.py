"""One way to load a submission: the Python file to grade for a handed-in `.py` or
`.ipynb`, and the notes saying what was done to it (used by `grader run` through
intake, and by `grader check`)."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

from grader.intake.capped import MAX_FILE, read_capped
from grader.text.shown import printable, reason_of
from grader.store import write_atomic
from grader.text.strings import say

KEPT_CELL_MAGICS = {"time", "timeit", "capture"}  # their body is plain Python


class NotANotebook(ValueError):
    """The file is not a notebook nbformat accepts: the student's error, said plainly."""


def _code_cells(path: Path) -> list[str]:
    """The code cells' sources of a notebook validated by nbformat against its schema."""
    try:
        data, size = read_capped(path, MAX_FILE)
    except OSError as exc:
        raise NotANotebook(f"the file could not be read: {reason_of(exc)}") from None
    if size > MAX_FILE:
        raise NotANotebook(f"it is {size} bytes, over the {MAX_FILE}-byte limit")
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise NotANotebook(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        raise NotANotebook(f"not JSON ({reason_of(exc)})") from None
    if not isinstance(nb, dict) or nb.get("nbformat") not in (3, 4):
        raise NotANotebook("no notebook format version 3 or 4 (`nbformat`) in it")
    import nbformat  # ~2 s with its schema checker: only a class with notebooks pays it

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. cells without ids: valid before 4.5
            nbformat.validate(nb)
            cells = nbformat.convert(nbformat.from_dict(nb), 4).cells
    except Exception as exc:  # noqa: BLE001 - the schema's checker may raise anything
        raise NotANotebook(reason_of(exc)) from None
    sources = ["".join(c.source) if isinstance(c.source, list) else c.source
               for c in cells if c.cell_type == "code"]
    for i, src in enumerate(sources, 1):
        try:
            src.encode("utf-8")
        except UnicodeEncodeError:
            raise NotANotebook(f"code cell {i} holds a lone surrogate, which is not "
                               f"text") from None
    return sources


def load(path: Path, shown: str, dest: Path) -> tuple[Path | None, list[str]]:
    """The Python file to grade for one handed-in file, and the notes saying what was
    done to it: a notebook's code cells are joined into `dest`, any other file is
    graded as it is. The one way a submission is loaded: `grader run` (and so the
    Gradescope run) through `collect`, and `grader check`, so a student's check
    grades what the graded run grades and says so in the same words. `shown` is the
    file's name as the student knows it; the path is None when nothing can be graded
    (the notes say why)."""
    if path.suffix != ".ipynb":
        return path, []
    return _notebook(path, shown, dest)


def _notebook(path: Path, shown: str, dest: Path) -> tuple[Path | None, list[str]]:
    """Join the code cells in order; IPython-only lines become `pass` so blocks stay valid."""
    shown = printable(shown)
    try:
        cells = _code_cells(path)
    except NotANotebook as exc:
        return None, [say("note_bad_notebook", file=shown, why=str(exc))]
    chunks, dropped, segments, at = [], [], [], 1
    for number, src in enumerate(cells, 1):
        text, first = src.splitlines(), 1
        if text and text[0].lstrip().startswith("%%"):
            magic = text[0].lstrip()[2:].split()[0] if text[0].strip() != "%%" else ""
            dropped.append(text[0].strip())
            if magic not in KEPT_CELL_MAGICS:
                dropped[-1] += " (whole cell)"
                continue
            text, first = text[1:], 2
        out = []
        for line in text:
            body = line.lstrip()
            if body.startswith(("%", "!")) or re.match(r"^[\w.]+\s*=\s*[%!]", body):
                dropped.append(body)
                out.append(line[: len(line) - len(body)] + "pass  # IPython line left out")
            else:
                out.append(line)
        chunks.append("\n".join(out))
        segments.append([at, at + max(len(out), 1) - 1, number, first])
        at += max(len(out), 1) + 1  # the blank line between two cells
    from grader.intake.answers import markdown_answers

    if answers := markdown_answers(path):  # after the code: no line of it moves
        chunks.append("# the notebook's answers to the check questions (markdown cells)\n"
                      + "\n".join(f"ANSWER_{q.upper()} = {text!r}"
                                  for q, text in answers.items()))
    write_atomic(dest, "\n\n".join(chunks) + "\n")
    write_atomic(_cells_file(dest), json.dumps(segments))
    notes: list[str] = [say("note_cells", n=len(cells), file=shown)]
    if dropped:
        listed = "; ".join(f"`{printable(d[:80])}`" for d in dropped[:5])
        lines = say("note_magics_more", lines=listed, n=len(dropped) - 5) \
            if len(dropped) > 5 else listed
        notes.append(say("note_magics", n=len(dropped), lines=lines))
    return dest, notes


def _cells_file(dest: Path) -> Path:
    return dest.with_name(dest.name + ".cells.json")


def cells_of(path: Path | None) -> list[list[int]]:
    """Where each code cell of the notebook joined into `path` lies in it: rows of
    (first line, last line, code cell number, the cell's line of the first line), so
    that errors name the cell and its line (text/cells.py); [] for a file that is no
    joined notebook."""
    if path is None or not _cells_file(path).is_file():
        return []
    return json.loads(_cells_file(path).read_text(encoding="utf-8"))
