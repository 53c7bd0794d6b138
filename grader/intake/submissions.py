"""Find each student's file in a folder of submissions, however the LMS laid it out.

Accepted: `DIR/<student_id>/<exercise>` (or `<stem>.ipynb`), a Canvas bulk download
(zip or unzipped, files named `<name>[_LATE]_<user id>_<file id>_<original>`), a Moodle
"Download all submissions" (zip or unzipped, `<full name>_<participant
number>_assignsubmission_file[_]/<original>`), and a Gradescope export
(`submission_metadata.yml` and `submission_<id>/` folders).
Notebooks are converted to a .py file in a cache folder (`load`, which `grader check`
uses too). Whatever was decided on the student's behalf (which of several files, a
converted notebook, lateness) becomes a note for their feedback, so they can see what
was graded.

Nothing a class hands in is trusted. Names are decoded with replacement and reach a
path only through `safe_name`; intake writes only under its cache folder. Links are
never followed (lstat, O_NOFOLLOW), not even one swapped in after the walk: each
student's chosen file is copied into the cache through folders opened one at a time
(`_taken_in`), and only the copy is graded; walks are breadth first with a depth and a
count cap; sizes are checked before anything is read; an archive entry that is too large or
escapes is skipped, never the whole archive. Everything left out is named in that
student's notes and in the run's summary (`Intake.skipped`), and so is every file given
to no student.
"""
from __future__ import annotations

import errno
import hashlib
import itertools
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import yaml

from grader.config import Student
from grader.intake.notebook import load
from grader.intake.capped import MAX_FILE, chunks, read_capped
from grader.text.shown import printable, raw_bytes, reason_of
from grader.store import safe_name
from grader.text.strings import STRINGS, Said, in_language, say

UTC = timezone.utc  # datetime.UTC is 3.11+
Found = tuple[str, Path | None, list[str]]  # a note is Said: its page's language shows

GRADABLE = (".py", ".ipynb")
METADATA = "submission_metadata.yml"
MAX_DEPTH = 16                      # folders below where a walk starts
MAX_ENTRIES = 10_000                # entries a walk of one student's folder looks at
MAX_CLASS = 100_000                 # entries of a class: its folder, a walk, an archive
MAX_UNZIPPED = 256 * 1024 * 1024    # all that one archive may unpack
MAX_ID = 120                        # characters of a student id before it is hashed
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# Why something was left out: one note per reason, naming what it left out. A reason
# a student may read is said in every language; the others reach the TA only.
LINK = say("why_link")
SPECIAL = say("why_special")
DEEP = say("why_deep", n=MAX_DEPTH)
TOO_LARGE = say("why_too_large", n=MAX_FILE)
ESCAPES = say("why_escapes")
OVER_TOTAL = say("why_over_total", n=MAX_UNZIPPED)
NOT_IN_EXPORT = say("why_not_in_export")
NOT_LMS = "not named as Canvas or Moodle names a submission's file"
NOT_GRADABLE = say("why_not_gradable")
NOT_A_FOLDER = "not a student's folder"
CANVAS_ENTRY = {"text.html": say("why_text_entry"), "link.html": say("why_url")}


@dataclass
class CanvasName:
    """What a Canvas bulk download's file name says. Canvas builds it (canvas-lms
    lib/content_zipper.rb, `get_filename` and `add_upload_submission`) as
    `<name>[_LATE]_<user id>_<file id>_<file's name>`, or `anon_<anonymous id>` in place
    of name and user id when grading is anonymous; the name is lower-cased with every
    `_<digits>_` and non-word character taken out, so, as Canvas's own reader of these
    names does (`infer_comment_context_from_filename`), the first two all-digit parts
    are the user and the file. A text entry or URL has no file id: `..._<user id>_text.html`."""
    name: str
    late: bool
    uid: str
    file_id: int            # 0 for a text entry or URL (`original` is then CANVAS_ENTRY's)
    original: str           # the file's name as the student uploaded it


def canvas_name(filename: str) -> CanvasName | None:
    """The parts of a Canvas bulk download's file name, or None if it is not one."""
    parts = filename.split("_")
    for i, part in enumerate(parts):
        if part == "anon" and i + 2 < len(parts) and parts[i + 1].isalnum() \
                and _digits(parts[i + 2]):
            uid, file_id, rest = f"anon_{parts[i + 1]}", parts[i + 2], parts[i + 3:]
        elif _digits(part) and i + 1 < len(parts) and _digits(parts[i + 1]):
            uid, file_id, rest = part, parts[i + 1], parts[i + 2:]
        elif _digits(part) and "_".join(parts[i + 1:]) in CANVAS_ENTRY:
            uid, file_id, rest = part, "0", parts[i + 1:]
        else:
            continue
        head = parts[:i]
        # Canvas writes LATE in capitals; `_late_` is an older download's (and ours).
        late = bool(head) and (head[-1] == "LATE" or (head[-1] == "late" and len(head) > 1))
        original = "_".join(rest)
        if not original:
            return None
        return CanvasName("_".join(head[:-1] if late else head), late, uid, int(file_id),
                          original)
    return None


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


# Moodle's "Download all submissions" (mod/assign/classes/downloader.php): a folder per
# participant and plugin, `<full name>_<participant number>_assignsubmission_<plugin>`
# (Moodle before 4.1 added a `_`), or, not as folders, that prefix, `_` and the file's
# name. The name's own underscores are spaces; a team's prefix is `<group>_<group id>`.
MOODLE_FOLDER = re.compile(r"^(?P<name>[^_]*)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$")
MOODLE_FILE = re.compile(
    r"^(?P<name>[^_]*)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<original>.+)$")
MOODLE_ENTRY = say("why_online_text")


@dataclass
class Placed:
    """Whose a file of an LMS download is, as its name says: the LMS's key for the
    student (Canvas user id, Moodle participant number), the file's name as the student
    knows it, and why it cannot be graded, if it is not a file they uploaded."""
    key: str
    original: str
    name: str = ""          # the student's name, where the LMS writes it (Moodle)
    late: bool = False
    order: int = 0          # Canvas file ids grow with each upload
    not_a_file: str = ""    # Said, when it is not
    by_number: bool = False  # the key is Moodle's participant number, not the student
    judged: bool = False    # the name says whether it is late (Canvas's does)


def canvas_placed(label: str) -> Placed | None:
    c = canvas_name(label.rsplit("/", 1)[-1])
    if c is None:
        return None
    return Placed(c.uid, c.original, late=c.late, order=c.file_id, judged=True,
                  not_a_file=CANVAS_ENTRY[c.original] if c.file_id == 0 else "")


def moodle_placed(label: str) -> Placed | None:
    """A Moodle download's path (`/`-separated); a participant's folder on its own
    has the original "" (for what is left out of it)."""
    top, _, rest = label.partition("/")
    m = MOODLE_FOLDER.match(top) if rest or label.endswith("/") or "." not in top else None
    m = m or MOODLE_FILE.match(top)
    if m is None:
        return None
    original = rest or (m.groupdict().get("original") or "")
    return Placed(m["pid"], original, name=m["name"], by_number=True,
                  not_a_file=MOODLE_ENTRY if m["plugin"] != "file" and original else "")


@dataclass
class Candidate:
    path: Path
    when: datetime          # submission time if the LMS says, else file time
    timed: bool = False     # `when` is the LMS's submission time, so it can be late
    late: bool = False
    judged: bool = False    # the LMS said whether it is late (a Canvas name), untimed
    label: str = ""         # how the student would recognise it
    order: int = 0          # breaks ties in time: Canvas submission ids grow


class Skips:
    """What was left out, grouped by reason, so one note per reason names it all."""

    def __init__(self) -> None:
        self.names: dict[str, list[str]] = {}

    def add(self, reason: str | Said, name: str) -> None:
        self.names.setdefault(reason, []).append(name)

    def extend(self, other: Skips) -> None:
        for reason, names in other.names.items():
            self.names.setdefault(reason, []).extend(names)

    def notes(self) -> list[str]:
        return [say("note_left_out", names=_listing(names), reason=reason)
                for reason, names in self.names.items()]


@dataclass
class Group:
    """One student's candidate files and what was left out of them."""
    cands: list[Candidate] = field(default_factory=list)
    skips: Skips = field(default_factory=Skips)
    name: str = ""          # the student's name, where the download says it
    mates: list[str] = field(default_factory=list)  # the others of a group submission
    by_number: bool = False  # keyed by Moodle's participant number


@dataclass
class Intake:
    found: list[Found]      # (student_id, file to grade or None, notes), sorted by id
    skipped: list[str]      # "who: what was left out and why", for the run's summary
    names: dict[str, str] = field(default_factory=dict)     # as the download names them
    together: list[list[str]] = field(default_factory=list)  # ids of one group submission
    absent: list[str] = field(default_factory=list)  # on the roster, nothing handed in
    by_number: list[str] = field(default_factory=list)  # Moodle participant numbers no
    #                                                     roster or worksheet maps
    numbers: dict[str, str] = field(default_factory=dict)  # student id -> the Moodle
    #                                    participant number the download filed them under
    handed: dict[str, datetime | None] = field(default_factory=dict)  # student id -> when
    #         the LMS says the graded file was handed in (None: the download gives no time)
    marked: dict[str, bool] = field(default_factory=dict)  # student id -> whether the LMS
    #         marked the graded file late, where it gives no time (Canvas's `LATE`)


@dataclass
class _File:
    path: Path
    label: str              # relative to where the walk started, as text
    when: datetime


def collect(directory: Path, exercise: str, *, cache: Path | None = None,
            roster: dict[str, Student] | None = None, aliases: dict[str, str] | None = None,
            due: datetime | None = None,
            submitted: dict[str, datetime] | None = None,
            extended: dict[str, datetime | None] | None = None) -> Intake:
    """Every student's file to grade and notes, and what was left out.

    `cache` receives unzipped and converted files (a temp folder if None); `roster` maps
    Canvas user ids (lms_id) to student ids, and `aliases` other keys a download names
    students by (Moodle's participant numbers, from its grading worksheet); with `due`,
    the newest on-time file wins over a newer late one. Lateness is the LMS's word
    (Canvas's `LATE`, Gradescope's created_at, `submitted`: the submission times of
    Moodle's grading worksheet by participant number), never a file's mtime, which
    copying changes, nor a Moodle zip's entry times, which are the download's (Moodle's
    zip writer leaves ZipStream's default, the time it adds the entry); `extended`: a
    student's own due date by student id (their extension; None: excused, no due date).
    The roster's students with nothing here are `absent`: named, never graded
    as missing (a run over one zip of late files must not zero everyone else).
    """
    cache = Path(tempfile.mkdtemp(prefix="grader-intake-")) if cache is None else cache
    run = Skips()
    groups = _groups(Path(directory), exercise, cache, run)
    by_key = {s.lms_id: sid for sid, s in (roster or {}).items() if s.lms_id}
    by_key.update(aliases or {})
    found: list[Found] = []
    skipped: list[str] = []
    names: dict[str, str] = {}
    taken: set[str] = set()
    ids: dict[str, str] = {}
    by_number: list[str] = []
    numbers: dict[str, str] = {}
    handed: dict[str, datetime | None] = {}
    marked: dict[str, bool] = {}
    for key, group in sorted(groups.items()):
        sid = ids[key] = _unique(_ident(by_key.get(key, key)), taken)
        if group.by_number and key not in by_key:
            by_number.append(sid)
        elif group.by_number:
            numbers[sid] = key
        if group.name:
            names[sid] = printable(group.name)
        if group.by_number and submitted is not None and key in submitted:
            for c in group.cands:  # Moodle keeps one submission: its files share its time
                c.when, c.timed = submitted[key], True
        best, notes = _choose(group.cands, exercise, (extended or {}).get(sid, due))
        handed[sid] = best.when if best is not None and best.timed else None
        if best is not None and best.judged and not best.timed:
            marked[sid] = best.late
        if best is not None and not best.path.is_relative_to(cache):
            taken_in = _taken_in(Path(directory), best, cache / "files" / safe_name(sid),
                                 group.skips)
            if taken_in is None:  # what was chosen is not graded: nothing said of it holds
                best, notes = None, []
            else:
                best.path = taken_in
        left_out = group.skips.notes()
        path = None
        if best is not None:
            path, more = load(best.path, Path(best.label).name,
                              cache / "notebooks" / safe_name(sid) / exercise)
            notes += more
            left_out += more if path is None else []
        notes += group.skips.notes()
        skipped += [f"{sid}: {note}" for note in left_out]
        found.append((sid, path, notes))
    together = _together(groups, ids, names, found)
    absent = sorted(set(roster or {}) - set(ids.values()))
    return Intake(sorted(found, key=lambda f: f[0]), skipped + run.notes(), names,
                  together, absent, by_number, numbers, handed, marked)


def _taken_in(root: Path, cand: Candidate, dest: Path, skips: Skips) -> Path | None:
    """The chosen file copied from the class's folder into intake's own `dest`, read
    through folders opened one at a time beneath `root`, never through a link: a file
    or folder replaced by a link after the walk saw it (someone else may write in a
    shared class folder) is left out, not followed. What is graded and fingerprinted
    after this is intake's copy, which nothing of the class can change. A file over
    MAX_FILE is left out, as an archive entry is: OUT never holds one, not even sparse
    (a copy of OUT would write it whole)."""
    parts = cand.path.relative_to(root).parts
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    try:
        for name in parts[:-1]:
            fds.append(os.open(name, _OPEN | os.O_DIRECTORY, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], _OPEN, dir_fd=fds[-1]))
        st = os.fstat(fds[-1])
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE:
            skips.add(SPECIAL if not stat.S_ISREG(st.st_mode) else TOO_LARGE, cand.label)
            return None
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / f"submission{cand.path.suffix}"
        with open(target, "wb") as out:  # at most one byte over, should it grow meanwhile
            out.writelines(chunks(fds[-1], MAX_FILE))
        return target
    except OSError as exc:
        # a link where the walk saw a file or folder: O_NOFOLLOW refuses it (ELOOP, or
        # ENOTDIR for a link to a file where a folder was)
        skips.add(LINK if exc.errno in (errno.ELOOP, errno.ENOTDIR)
                  else say("why_cannot_read", why=reason_of(exc)), cand.label)
        return None
    finally:
        for fd in fds:
            os.close(fd)


def _together(groups: dict[str, Group], ids: dict[str, str], names: dict[str, str],
              found: list[Found]) -> list[list[str]]:
    """The student ids of each group submission; each member's notes name the others."""
    together: list[list[str]] = []
    for key, group in groups.items():
        if group.mates and key < min(group.mates):
            together.append(sorted(ids[k] for k in [key, *group.mates]))
    notes = {sid: notes for sid, _, notes in found}
    for members in together:
        for sid in members:
            others = [f"{o} ({names[o]})" if names.get(o) else o for o in members if o != sid]
            notes[sid].append(say("note_group", names=_listing(others)))
    return together


def layout_hint(directory: Path, exercise: str) -> str:
    """Why a folder gave no student, in the TA's terms: the layouts intake reads, and what
    this folder looks like instead (one student's own folder, or a flat folder of files).
    Only the top level is looked at, and no link followed."""
    expected = (f"expected {directory}/<student_id>/{exercise} (one folder per student), "
                "a Canvas or Moodle download (zip or folder) or a Gradescope export")
    if not directory.is_dir():
        return expected
    try:
        entries, _ = _entries(directory, MAX_CLASS)
    except OSError as exc:
        return f"{expected}; it could not be read ({reason_of(exc)})"
    files = [printable(e.name) for e in entries if e.is_file(follow_symlinks=False)
             and Path(e.name).suffix in GRADABLE]
    if any(_wanted(name, exercise) for name in files):
        return (f"{expected}. It holds {exercise} itself, as one student's folder does: "
                f"give the folder that holds each student's folder")
    if files:
        name = Path(files[0]).stem
        return (f"{expected}. It holds {_listing(files)} directly: put each student's file "
                f"in a folder named after them, e.g. {directory}/{name}/{exercise}")
    return expected


def _groups(directory: Path, exercise: str, cache: Path, run: Skips) -> dict[str, Group]:
    """Candidates per student id, whichever layout `directory` has."""
    unzipped = cache / "unzipped"
    if not directory.is_dir() and zipfile.is_zipfile(directory):
        shutil.rmtree(unzipped, ignore_errors=True)
        return _lms_zip(directory, unzipped / "0", exercise, run)
    if not directory.is_dir():
        run.add("neither a folder nor a zip", printable(str(directory)))
        return {}
    try:
        entries, more = _entries(directory, MAX_CLASS)
    except OSError as exc:
        run.add(f"could not be read: {reason_of(exc)}", printable(str(directory)))
        return {}
    if more:
        run.add(f"only the first {MAX_CLASS} entries are looked at", printable(str(directory)))
    # The layout is told by regular files only: a link is never followed, not even to
    # tell what it is (links among the students' folders are noted as theirs).
    files = [e for e in entries if e.is_file(follow_symlinks=False)]
    if any(e.name == METADATA for e in files):
        return _gradescope(directory, exercise, run, entries)
    if zips := [e for e in files if e.name.endswith(".zip")]:
        shutil.rmtree(unzipped, ignore_errors=True)
        groups: dict[str, Group] = {}
        for e in entries:
            if not (e.is_file(follow_symlinks=False) and e.name.endswith(".zip")):
                run.add("beside a zip, only zips are read", printable(e.name))
        for i, z in enumerate(zips):
            for sid, g in _lms_zip(Path(z.path), unzipped / str(i), exercise, run,
                                   beside=True).items():
                mine = groups.setdefault(sid, Group())
                mine.cands += g.cands
                mine.skips.extend(g.skips)
                mine.name = mine.name or g.name
                mine.by_number = mine.by_number or g.by_number
        return groups
    names = [printable(e.name) + ("/" if e.is_dir(follow_symlinks=False) else "")
             for e in entries]
    if any(moodle_placed(name) for name in names):
        return _named(directory, exercise, run, moodle_placed)
    if any(canvas_name(printable(e.name)) for e in files):
        return _named(directory, exercise, run, canvas_placed)
    return _folders(entries, exercise, run)


def _ident(name: str) -> str:
    """A student id from a name a class supplied: text, at most MAX_ID characters; a
    name that had to change gets a hash of the original, so two never merge."""
    text = printable(name)
    if text == name and len(text) <= MAX_ID:
        return text
    digest = hashlib.sha256(raw_bytes(name)).hexdigest()[:8]
    return f"{text[:MAX_ID]}~{digest}"


def _unique(sid: str, taken: set[str]) -> str:
    """`sid`, or `sid~2`, `sid~3`... when a roster mapping made two students one id."""
    unique = next(c for n in itertools.count(1)
                  if (c := sid if n == 1 else f"{sid}~{n}") not in taken)
    taken.add(unique)
    return unique


def _listing(names: list[str], shown: int = 5) -> Said:
    """Names, the first `shown` of them, in every language (a name may be Said)."""
    listed = Said({lang: ", ".join(in_language(n, lang) for n in names[:shown])
                   for lang in STRINGS})
    return say("note_listing_more", names=listed, n=len(names) - shown) \
        if len(names) > shown else listed


def _entries(folder: Path, limit: int) -> tuple[list[os.DirEntry], bool]:
    """The first `limit` entries of a folder sorted by name (memory stays bounded
    whatever the folder holds), and whether there were more. Raises OSError."""
    with os.scandir(folder) as it:
        entries = list(itertools.islice(it, limit + 1))
    return sorted(entries[:limit], key=lambda e: e.name), len(entries) > limit


def _walk(root: Path, skips: Skips, limit: int) -> list[_File]:
    """Regular files under `root`, breadth first (shallow files first), never through a
    link, at most MAX_DEPTH folders deep and `limit` entries looked at."""
    files: list[_File] = []
    queue: deque[tuple[Path, str, int]] = deque([(root, "", 0)])
    left = limit
    while queue and left > 0:
        folder, rel, depth = queue.popleft()
        try:
            entries, more = _entries(folder, left)
        except OSError as exc:
            skips.add(say("why_cannot_read", why=reason_of(exc)), rel or ".")
            continue
        if more:
            skips.add(say("why_first_entries", n=limit), rel or ".")
        left -= len(entries)
        for e in entries:
            label = f"{rel}/{printable(e.name)}" if rel else printable(e.name)
            if e.is_symlink():
                skips.add(LINK, label)
            elif e.is_dir(follow_symlinks=False):
                if e.name == "__MACOSX":
                    continue
                if depth < MAX_DEPTH:
                    queue.append((Path(e.path), label, depth + 1))
                else:
                    skips.add(DEEP, label)
            elif e.is_file(follow_symlinks=False):
                files.append(_File(Path(e.path), label, _mtime(e)))
            else:
                skips.add(SPECIAL, label)
    for _, rel, _ in queue:
        skips.add(say("why_first_entries", n=limit), rel)
    return files


def _mtime(entry: os.DirEntry) -> datetime:
    """A file's own time; one a datetime cannot hold (year 10000 and on) is the epoch."""
    try:
        return datetime.fromtimestamp(entry.stat(follow_symlinks=False).st_mtime, UTC)
    except (OSError, ValueError, OverflowError):
        return datetime.fromtimestamp(0, UTC)


def _wanted(name: str, exercise: str) -> bool:
    """The exercise file, its notebook, or a re-upload (e.g. `13_moe-1.py`, `13_moe (2).py`)."""
    stem = re.escape(Path(exercise).stem)
    return re.fullmatch(rf"{stem}(?:-\d+| ?\(\d+\))?\.(?:py|ipynb)", name) is not None


def _files(folder: Path, exercise: str, skips: Skips) -> list[_File]:
    """The exercise's files in a student's folder, else any Python file or notebook."""
    files = [f for f in _walk(folder, skips, MAX_ENTRIES) if f.path.suffix in GRADABLE]
    return [f for f in files if _wanted(f.path.name, exercise)] or files


def _folders(entries: list[os.DirEntry], exercise: str, run: Skips) -> dict[str, Group]:
    """One student per folder; a student's folder that is a link is noted, not entered.
    Anything else at the top (a loose file, a hidden folder) is named in the run's
    summary, since it is no one's."""
    groups: dict[str, Group] = {}
    for e in entries:
        if e.name.startswith(".") or not (e.is_symlink() or e.is_dir(follow_symlinks=False)):
            run.add(NOT_A_FOLDER, printable(e.name))
            continue
        group = Group()
        if e.is_symlink():
            group.skips.add(LINK, say("note_the_folder", name=printable(e.name)))
        else:
            group.cands = [Candidate(f.path, f.when, label=f.label)
                           for f in _files(Path(e.path), exercise, group.skips)]
        groups[e.name] = group
    return groups


def _named(directory: Path, exercise: str, run: Skips, reader) -> dict[str, Group]:
    """Group an unzipped LMS download's files by the student key their names hold
    (`reader`: canvas_placed or moodle_placed). A file whose name is not the LMS's
    is named in the run's summary."""
    groups: dict[str, Group] = {}
    walked = Skips()
    for f in _walk(directory, walked, MAX_CLASS):
        placed = reader(f.label)
        if (group := _place(groups, placed, f.label, run)) is not None:
            group.cands.append(Candidate(f.path, f.when, late=placed.late,
                                         label=placed.original, order=placed.order,
                                         judged=placed.judged))
    for reason, names in walked.names.items():
        for name in names:
            placed = reader(name)
            (_group(groups, placed).skips if placed else run).add(reason, name)
    return _prefer_wanted(groups, exercise)


def _group(groups: dict[str, Group], placed: Placed) -> Group:
    group = groups.setdefault(placed.key, Group())
    group.name = group.name or placed.name
    group.by_number = group.by_number or placed.by_number
    return group


def _place(groups: dict[str, Group], placed: Placed | None, label: str,
           run: Skips) -> Group | None:
    """The student's group a downloaded file is a candidate of, or None when it is not
    one: then it is named in their notes (a PDF, a text entry), or, when its name is
    not as the LMS names a submission's file, in the run's summary."""
    if placed is None:
        run.add(NOT_LMS, label)
        return None
    group = _group(groups, placed)
    if not placed.original:
        return None
    if placed.not_a_file:
        group.skips.add(placed.not_a_file, placed.original)
    elif Path(placed.original).suffix not in GRADABLE:
        group.skips.add(NOT_GRADABLE, placed.original)
    else:
        return group
    return None


def _prefer_wanted(groups: dict[str, Group], exercise: str) -> dict[str, Group]:
    for group in groups.values():
        group.cands = [c for c in group.cands if _wanted(c.label, exercise)] or group.cands
    return groups


def _entry_refusal(info: zipfile.ZipInfo) -> str | None:
    """Why an archive entry is never unpacked, or None."""
    path = PurePosixPath(info.filename.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", info.filename):
        return ESCAPES
    if stat.S_ISLNK(info.external_attr >> 16):
        return LINK
    if info.file_size > MAX_FILE:
        return TOO_LARGE
    return None


def _lms_zip(archive: Path, dest: Path, exercise: str, run: Skips,
             beside: bool = False) -> dict[str, Group]:
    """Candidates from an LMS's download zip (Canvas's or Moodle's, told by its names). Only entries that could be graded are
    unpacked, each under a name of our own (`<index><suffix>` in `dest`); an entry that
    escapes, is a link or is too large is skipped and named, never the whole archive,
    and so is every entry not named as the LMS names a submission's file. A zip found
    in the class's folder (`beside`) is opened without following a link, should one
    have replaced it since the folder was listed; the one the TA names is theirs."""
    name = printable(archive.name)
    flags = _OPEN if beside else os.O_RDONLY | os.O_CLOEXEC
    try:
        f = open(archive, "rb", opener=lambda path, _: os.open(path, flags))
    except OSError as exc:
        run.add(LINK if exc.errno == errno.ELOOP else
                f"not a readable zip: {reason_of(exc)}", name)
        return {}
    with f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            run.add(SPECIAL, name)
            return {}
        try:
            z = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            run.add(f"not a readable zip: {reason_of(exc)}", name)
            return {}
        return _zip_groups(z, name, dest, exercise, run)


def _zip_groups(z: zipfile.ZipFile, name: str, dest: Path, exercise: str,
                run: Skips) -> dict[str, Group]:
    """The candidates of an open LMS zip (`_lms_zip`), unpacked into `dest`."""
    groups: dict[str, Group] = {}
    total = 0
    dest.mkdir(parents=True, exist_ok=True)

    with z:
        infos = z.infolist()
        reader = _reader([printable(i.filename).replace("\\", "/") for i in infos[:MAX_CLASS]])
        for i, info in enumerate(infos):
            label = printable(info.filename)
            c = reader(label.replace("\\", "/"))
            skips = _group(groups, c).skips if c else run
            if i >= MAX_CLASS:
                run.add(f"only the first {MAX_CLASS} entries are looked at",
                        f"{name}: {label} and later entries")
                break
            shown = label if c else f"{name}: {label}"
            if not info.filename:  # a name of a NUL byte, which zipfile cuts to nothing
                skips.add(say("why_no_name"), f"{name}: entry {i + 1}")
                continue
            if info.is_dir():
                continue
            if why := _entry_refusal(info):
                skips.add(why, shown)
                continue
            if (group := _place(groups, c, shown, run)) is None:
                continue
            if total + info.file_size > MAX_UNZIPPED:
                skips.add(OVER_TOTAL, shown)
                continue
            target = dest / f"{i}{Path(c.original).suffix}"
            try:
                total += _unpack(z, info, target)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError,
                    EOFError, ValueError, zlib.error) as exc:
                skips.add(say("why_cannot_unpack", why=reason_of(exc)), shown)
                continue
            group.cands.append(Candidate(target, _zip_time(info), late=c.late,
                                         label=c.original, order=c.order, judged=c.judged))
    return _prefer_wanted({uid: g for uid, g in groups.items() if g.cands or g.skips.names},
                          exercise)


def _reader(labels: list[str]):
    """Moodle's names if any path is one (a participant's folder or file), else Canvas's."""
    return moodle_placed if any(moodle_placed(label) for label in labels) else canvas_placed


def _unpack(z: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> int:
    """Copy one entry, at most its declared (already capped) size; returns bytes written."""
    written = 0
    with z.open(info) as src, target.open("wb") as out:
        while written <= info.file_size and (chunk := src.read(1 << 20)):
            out.write(chunk)
            written += len(chunk)
    stamp = _zip_time(info).timestamp()
    os.utime(target, (stamp, stamp))
    return written


def _zip_time(info: zipfile.ZipInfo) -> datetime:
    try:
        return datetime(*info.date_time, tzinfo=UTC)
    except ValueError:  # a DOS date of zeros
        return datetime.fromtimestamp(0, UTC)


class _LenientLoader(yaml.SafeLoader):
    """Gradescope's YAML is Ruby's: it may carry `!ruby/object:BigDecimal` tags."""


_LenientLoader.add_multi_constructor(
    "!", lambda loader, suffix, node: loader.construct_scalar(node)
    if isinstance(node, yaml.ScalarNode) else loader.construct_mapping(node))


def _metadata(path: Path, run: Skips) -> dict:
    """submission_metadata.yml as a mapping; anything else is noted and read as empty."""
    try:
        data, size = read_capped(path, MAX_FILE)
        if size > MAX_FILE:
            raise ValueError(TOO_LARGE)
        meta = yaml.load(data.decode("utf-8"), Loader=_LenientLoader)
    except Exception as exc:  # noqa: BLE001 - a parser of hostile text may raise anything
        run.add(f"not readable: {reason_of(exc)}", METADATA)
        return {}
    if not isinstance(meta, dict):
        run.add("not a mapping of submissions", METADATA)
        return {}
    return meta


def _keyed(value: object) -> dict[str, object]:
    """A metadata mapping with Ruby's leading colons dropped; anything else is empty."""
    return {str(k).lstrip(":"): v for k, v in value.items()} if isinstance(value, dict) else {}


def _scalar(value: object) -> str | None:
    return str(value) if isinstance(value, str | int) and str(value) else None


def _submission_folder(directory: Path, folder: str, skips: Skips) -> Path | None:
    """The export's own folder named by the metadata: one plain name, a real folder."""
    if "/" in folder or folder in ("", ".", "..") or "\0" in folder:
        skips.add(NOT_IN_EXPORT, printable(folder))
        return None
    path = directory / folder
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # not there: its submitters submitted nothing
        return None
    except ValueError:  # not a name this file system can hold
        skips.add(NOT_IN_EXPORT, printable(folder))
        return None
    if stat.S_ISLNK(mode):
        skips.add(LINK, printable(folder))
    return path if stat.S_ISDIR(mode) else None


def _gradescope(directory: Path, exercise: str, run: Skips,
                entries: list[os.DirEntry]) -> dict[str, Group]:
    """One group per submitter; whatever the metadata does not name is named in the
    run's summary."""
    groups: dict[str, Group] = {}
    meta = _metadata(directory / METADATA, run)
    for e in entries:
        if e.name != METADATA and e.name not in {str(k) for k in meta}:
            run.add(f"not named in {METADATA}", printable(e.name))
    for folder, info in meta.items():
        folder, info = str(folder), _keyed(info)
        when = info.get("created_at")
        when = (when if when.tzinfo else when.replace(tzinfo=UTC)) \
            if isinstance(when, datetime) else None
        skips = Skips()
        path = _submission_folder(directory, folder, skips)
        files = _files(path, exercise, skips) if path is not None else []
        submitters = info.get("submitters")
        members: list[tuple[str, str]] = []
        for who in submitters if isinstance(submitters, list) and submitters else [{}]:
            who = _keyed(who)
            sid = _scalar(who.get("sid")) or _scalar(who.get("email")) or folder
            members.append((sid, _scalar(who.get("name")) or ""))
        keys = list(dict.fromkeys(sid for sid, _ in members))
        for sid, name in members:
            group = groups.setdefault(sid, Group())
            group.name = group.name or name
            group.mates += [k for k in keys if k != sid and k not in group.mates]
            group.cands += [Candidate(f.path, when or f.when, timed=when is not None,
                                      label=f"{printable(folder)}/{f.label}") for f in files]
            group.skips.extend(skips)
    return groups


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
    notes: list[str] = []
    if len(cands) > 1:
        # "on time" only where the LMS gave a time; "newest" only where one file is
        others = _listing([c.label for c in cands if c is not best], 10)
        newest = all((c.when, c.order) < (best.when, best.order) for c in cands if c is not best)
        several = "note_several_on_time" if due is not None and (best.timed or best.judged) \
            and not best.late else "note_several" if newest else "note_several_chosen"
        notes.append(say(several, file=best.label, others=others))
    if best.late:
        notes.append(say("note_late_due", due=f"{due:%Y-%m-%d %H:%M %Z}") if due
                     else say("note_late"))
    if Path(best.label).name not in (exercise, Path(exercise).stem + ".ipynb") \
            and len(cands) == 1:
        notes.append(say("note_graded_as", file=best.label, exercise=exercise))
    return best, notes
