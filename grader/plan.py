"""What a run has to grade, and what it did: no torch here, so a run with nothing
new to grade (the usual rerun) finishes without paying for `import torch`."""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.record import ERROR_STATUSES, GradeRecord
from grader.store import Store, fingerprint
from grader.strings import say

MAX_SOURCE = 1024 * 1024
MAX_FILE = 32 * 1024 * 1024  # any other file of a class intake reads: a notebook, an archive entry


class NotAFile(OSError):
    """The path names a link, a folder, a FIFO or a device: never read as a submission."""


def read_capped(path: Path, cap: int) -> tuple[bytes, int]:
    """(the first cap+1 bytes, the size) of a regular file, read through a descriptor
    opened without following a link and without blocking (a FIFO would hang the run),
    so a link to a secret or a 2 GiB file costs nothing. Raises OSError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAFile(errno.ELOOP, "it is a link, and links are never followed") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(errno.EINVAL, "it is not a regular file")
        chunks, left = [], cap + 1
        while left and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), st.st_size
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Source:
    """A submission's file as every path reads it (a local run, its plan, a Dask
    client): at most MAX_SOURCE+1 bytes, never through a link, and why it cannot be
    graded, if it cannot."""
    data: bytes | None  # None: nothing could be read
    size: int           # the file's size, which may be more than len(data)
    problem: str = ""   # shown to the student; "": the bytes may be graded


def read_source(path: Path) -> Source:
    """Read `path` (read_capped) and give the verdict on what was read."""
    try:
        data, size = read_capped(path, MAX_SOURCE)
    except FileNotFoundError:
        return Source(None, 0, say("file_none"))
    except OSError as exc:
        return Source(None, 0, say("file_unreadable", why=exc.strerror))
    if size > MAX_SOURCE:
        return Source(None, size, say("file_too_big", size=size, cap=MAX_SOURCE))
    return Source(data, size)


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
    why nothing could be graded when there is no file, and the name the page shows."""
    data = None
    if sub.path is not None:
        got = read_source(sub.path)
        data = got.data if got.size <= MAX_SOURCE else f"<{got.size} bytes>".encode()
    named = [f"name: {sub.name}"] if sub.name else []  # a page shows it: a new name, a new page
    return fingerprint(data, "\0".join([version, *sub.notes, *named]))


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
