"""Find each student's file in a folder of submissions, however the LMS laid it out.

Accepted: `DIR/<student_id>/<exercise>` (or `<stem>.ipynb`), a Canvas bulk download
(zip or unzipped, files named `<name>[_late]_<userid>_<submissionid>_<original>`), and
a Gradescope export (`submission_metadata.yml` and `submission_<id>/` folders).
Notebooks are converted to a .py file in a cache folder. Whatever was decided on the
student's behalf (which of several files, a converted notebook, lateness) becomes a
note for their feedback, so they can see what was graded.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from grader.config import Student

Found = tuple[str, Path | None, list[str]]

CANVAS_NAME = re.compile(
    r"^(?P<name>[^_/]+?)(?P<late>_late)?_(?P<uid>\d+)_(?P<subid>\d+)_(?P<original>.+)$")
MAX_UNZIPPED = 256 * 1024 * 1024
KEPT_CELL_MAGICS = {"time", "timeit", "capture"}  # their body is plain Python


@dataclass
class Candidate:
    path: Path
    when: datetime          # submission time if the LMS says, else file time
    timed: bool = False     # `when` is the LMS's submission time, so it can be late
    late: bool = False
    label: str = ""         # how the student would recognise it
    order: int = 0          # breaks ties in time: Canvas submission ids grow


def collect(directory: Path, exercise: str, *, cache: Path | None = None,
            roster: dict[str, Student] | None = None,
            due: datetime | None = None) -> list[Found]:
    """(student_id, file to grade or None, notes) for each student, sorted by id.

    `cache` receives unzipped and converted files (a temp folder if None); `roster` maps
    Canvas user ids (lms_id) to student ids; with `due`, the newest on-time file wins
    over a newer late one. Lateness is the LMS's word (Canvas's `_late_`, Gradescope's
    created_at), never a file's mtime, which copying changes.
    """
    cache = Path(tempfile.mkdtemp(prefix="grader-intake-")) if cache is None else cache
    directory = Path(directory)
    if directory.is_file() and zipfile.is_zipfile(directory):
        groups = _canvas(_unzip(directory, cache / "unzipped"), exercise)
    elif (directory / "submission_metadata.yml").is_file():
        groups = _gradescope(directory, exercise)
    elif zips := sorted(directory.glob("*.zip")):
        groups = {}
        for z in zips:
            for sid, cands in _canvas(_unzip(z, cache / "unzipped" / z.stem), exercise).items():
                groups.setdefault(sid, []).extend(cands)
    elif any(CANVAS_NAME.match(p.name) for p in directory.iterdir() if p.is_file()):
        groups = _canvas(directory, exercise)
    else:
        groups = _folders(directory, exercise)
    by_lms = {s.lms_id: sid for sid, s in (roster or {}).items() if s.lms_id}
    found = []
    for sid, cands in sorted(groups.items()):
        best, notes = _choose(cands, exercise, due)
        path = best.path if best else None
        if best is not None and best.path.suffix == ".ipynb":
            path, more = _notebook(best.path, Path(best.label).name,
                                   cache / "notebooks" / sid / exercise)
            notes += more
        found.append((by_lms.get(sid, sid), path, notes))
    return found


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _wanted(name: str, exercise: str) -> bool:
    """The exercise file, its notebook, or a re-upload (e.g. `13_moe-1.py`, `13_moe (2).py`)."""
    stem = re.escape(Path(exercise).stem)
    return re.fullmatch(rf"{stem}(?:-\d+| ?\(\d+\))?\.(?:py|ipynb)", name) is not None


def _files(folder: Path, exercise: str) -> list[Path]:
    """The exercise's files in a student's folder, else any Python file or notebook."""
    files = [f for f in sorted(folder.rglob("*")) if f.is_file() and "__MACOSX" not in f.parts
             and f.suffix in (".py", ".ipynb")]
    return [f for f in files if _wanted(f.name, exercise)] or files


def _folders(directory: Path, exercise: str) -> dict[str, list[Candidate]]:
    groups = {}
    for d in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = _files(d, exercise)
        groups[d.name] = [Candidate(f, _mtime(f), label=str(f.relative_to(d))) for f in files]
    return groups


def _canvas(directory: Path, exercise: str) -> dict[str, list[Candidate]]:
    """Group Canvas files by user id; the original name is what the student uploaded."""
    groups: dict[str, list[Candidate]] = {}
    for f in sorted(directory.rglob("*")):
        m = CANVAS_NAME.match(f.name)
        if f.is_file() and m and Path(m["original"]).suffix in (".py", ".ipynb"):
            groups.setdefault(m["uid"], []).append(
                Candidate(f, _mtime(f), late=bool(m["late"]), label=m["original"],
                          order=int(m["subid"])))
    return {uid: [c for c in cands if _wanted(c.label, exercise)] or cands
            for uid, cands in groups.items()}


class _LenientLoader(yaml.SafeLoader):
    """Gradescope's YAML is Ruby's: it may carry `!ruby/object:BigDecimal` tags."""


_LenientLoader.add_multi_constructor(
    "!", lambda loader, suffix, node: loader.construct_scalar(node)
    if isinstance(node, yaml.ScalarNode) else loader.construct_mapping(node))


def _gradescope(directory: Path, exercise: str) -> dict[str, list[Candidate]]:
    meta = yaml.load((directory / "submission_metadata.yml").read_text(encoding="utf-8"),
                     Loader=_LenientLoader) or {}
    groups: dict[str, list[Candidate]] = {}
    for folder, info in meta.items():
        info = {str(k).lstrip(":"): v for k, v in (info or {}).items()}
        when = info.get("created_at")
        when = (when if when.tzinfo else when.replace(tzinfo=UTC)) \
            if isinstance(when, datetime) else None
        files = _files(directory / folder, exercise) if (directory / folder).is_dir() else []
        for who in info.get("submitters") or [{}]:
            who = {str(k).lstrip(":"): v for k, v in who.items()}
            sid = str(who.get("sid") or who.get("email") or folder)
            groups.setdefault(sid, []).extend(
                Candidate(f, when or _mtime(f), timed=when is not None,
                          label=f"{folder}/{f.name}") for f in files)
    return groups


def _unzip(archive: Path, dest: Path) -> Path:
    """Extract a bulk download, refusing paths that escape and archives that explode."""
    with zipfile.ZipFile(archive) as z:
        if sum(i.file_size for i in z.infolist()) > MAX_UNZIPPED:
            raise ValueError(f"{archive} unpacks to more than {MAX_UNZIPPED} bytes")
        for info in z.infolist():
            target = (dest / info.filename).resolve()
            if info.is_dir() or not target.is_relative_to(dest.resolve()):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            stamp = datetime(*info.date_time).timestamp()
            os.utime(target, (stamp, stamp))
    return dest


def _choose(cands: list[Candidate], exercise: str,
            due: datetime | None) -> tuple[Candidate | None, list[str]]:
    if not cands:
        return None, []
    pool = cands
    if due is not None:
        due = due if due.tzinfo else due.replace(tzinfo=UTC)
        for c in cands:
            c.late = c.late or (c.timed and c.when > due)
        pool = [c for c in cands if not c.late] or cands
    best = max(pool, key=lambda c: (c.when, c.order, c.label))
    notes = []
    if len(cands) > 1:
        others = ", ".join(c.label for c in cands if c is not best)
        why = "the newest on-time one" if due is not None and not best.late else "the newest"
        notes.append(f"Several files were submitted; graded {best.label}, {why} "
                     f"(also found: {others}).")
    if best.late:
        notes.append("This submission was late" +
                     (f" (due {due:%Y-%m-%d %H:%M %Z})." if due else "."))
    if Path(best.label).name not in (exercise, Path(exercise).stem + ".ipynb") \
            and len(cands) == 1:
        notes.append(f"Graded {best.label} as {exercise}.")
    return best, notes


def _notebook(path: Path, shown: str, dest: Path) -> tuple[Path | None, list[str]]:
    """Join the code cells in order; IPython-only lines become `pass` so blocks stay valid."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8-sig"))
        cells = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, [f"{shown} is not a readable Jupyter notebook ({exc}); "
                      f"submit it saved from Jupyter, or as a .py file."]
    chunks, dropped = [], []
    for cell in cells:
        src = cell.get("source", "")
        lines = (src if isinstance(src, list) else src.splitlines(keepends=True))
        text = "".join(lines).splitlines()
        if text and text[0].lstrip().startswith("%%"):
            magic = text[0].lstrip()[2:].split()[0] if text[0].strip() != "%%" else ""
            dropped.append(text[0].strip())
            if magic not in KEPT_CELL_MAGICS:
                dropped[-1] += " (whole cell)"
                continue
            text = text[1:]
        out = []
        for line in text:
            body = line.lstrip()
            if body.startswith(("%", "!")) or re.match(r"^[\w.]+\s*=\s*[%!]", body):
                dropped.append(body)
                out.append(line[: len(line) - len(body)] + "pass  # IPython line left out")
            else:
                out.append(line)
        chunks.append("\n".join(out))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n\n".join(chunks) + "\n", encoding="utf-8")
    notes = [f"Graded the {len(cells)} code cells of {shown}, joined in order."]
    if dropped:
        shown = "; ".join(f"`{d[:80]}`" for d in dropped[:5])
        more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
        notes.append(f"Left out {len(dropped)} IPython magic or shell line(s), "
                     f"which plain Python cannot run: {shown}{more}.")
    return dest, notes
