"""What a run has to grade, and what it did: no torch here, so a run with nothing
new to grade (the usual rerun) finishes without paying for `import torch`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.store import Store, fingerprint

ERROR_STATUSES = ("import_error", "missing", "unreadable")


@dataclass
class Submission:
    student_id: str
    path: Path | None          # None: nothing was submitted
    source: str | None = None  # read and checked by `runner.read`
    problem: str = ""          # why it cannot be graded, shown to the student
    notes: list[str] = field(default_factory=list)  # what intake chose, shown too
    fingerprint: str = ""      # content + lesson version: unchanged means skip


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
    data = sub.path.read_bytes() if sub.path is not None and sub.path.is_file() else None
    return fingerprint(data, version)


def plan(store: Store, subs: list[Submission], version: str, force: bool) -> list[Submission]:
    """Fingerprint every submission; those graded before at the same fingerprint are
    skipped (unless `force`). Returns the ones to grade."""
    todo = []
    for sub in subs:
        sub.fingerprint = fingerprint_of(sub, version)
        if force or not store.is_current(sub.student_id, sub.fingerprint):
            todo.append(sub)
    return todo
