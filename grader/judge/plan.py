"""What a run has to grade, and what it did: no torch here, so a run with nothing
new to grade (the usual rerun) finishes without paying for `import torch`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.intake.capped import MAX_SOURCE, read_source
from grader.judge.earlier import Earlier
from grader.record import ERROR_STATUSES, GradeRecord
from grader.store import Store, fingerprint


@dataclass
class Submission:
    student_id: str
    path: Path | None          # None: nothing was submitted
    source: str | None = None  # read and checked by `runner.read`
    problem: str = ""          # why it cannot be graded, shown to the student (set by
                               # `runner.read`, or by a Dask client that read the file)
    notes: list[str] = field(default_factory=list)  # what intake chose, shown too
    fingerprint: str = ""      # content + lesson version: unchanged means skip
    name: str = ""             # the student's name (roster, LMS download), for the page
    language: str = ""         # the page's language ("": the course's, unrecorded)
    # an assembly lesson's practice run on the student's own earlier files (`grader check`
    # where nothing stands in: earlier.beside); None: the runner finds them (earlier.find)
    earlier: Earlier | None = None


@dataclass
class Summary:
    graded: int = 0
    skipped: int = 0
    errors: int = 0          # import errors, unreadable or missing files
    timeouts: int = 0
    worker_failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> None:
        self.graded += 1
        self.errors += status in ERROR_STATUSES
        self.timeouts += status == "timeout"


def fingerprint_of(sub: Submission, version: str) -> str:
    """Content (capped: an oversized file is only its size), the notes, which hold
    why nothing could be graded when there is no file, and the name and language the
    page shows (a run in another language writes every page again)."""
    data = None
    if sub.path is not None:
        got = read_source(sub.path)
        data = got.data if got.size <= MAX_SOURCE else f"<{got.size} bytes>".encode()
    named = [f"name: {sub.name}"] if sub.name else []  # a page shows it: a new name, a new page
    spoken = [f"language: {sub.language}"] if sub.language else []  # a class in one language
    return fingerprint(data, "\0".join([version, *sub.notes, *named, *spoken]))


def plan(store: Store, subs: list[Submission], version: str, force: bool,
         kept: Callable[[GradeRecord], None] = lambda record: None) -> list[Submission]:
    """Fingerprint every submission; those graded before at the same fingerprint are
    skipped (unless `force`), their records handed to `kept` as they are read (the
    one read of them in a run). Returns the ones to grade."""
    todo = []
    for sub in subs:
        sub.fingerprint = fingerprint_of(sub, version)
        old = None if force else store.load(sub.student_id)
        if old is not None and store.is_current(sub.student_id, sub.fingerprint, old):
            kept(old)
        else:
            todo.append(sub)
    return todo
