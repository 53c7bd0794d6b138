"""What the sandbox's two sides share: a submission's limits and the two kinds of
failure (the student's, shown to them; the grader's, never blamed on them). Its own
module so that `session` and `slot` each depend on it, not on one another."""
from __future__ import annotations

from dataclasses import dataclass

from grader.text.strings import message_fields


@dataclass(frozen=True)
class Limits:
    test_wall_s: float = 10.0
    submission_wall_s: float = 120.0
    cpu_s: int = 60
    memory_mb: int = 1024
    processes: int = 16
    file_size_mb: int = 8
    scratch_mb: int = 32
    output_kb: int = 64
    received_mb: int = 64  # results a submission may send in all (a correct one: ~1 MiB)


# the kind of StudentError, and the record's status, of a submission whose slot ended
# while its code ran (record.status_of: 0 points)
WORKER_STOPPED = "worker_stopped"


class StudentError(Exception):
    """Something the submission did; shown to the student, costs the current test."""

    def __init__(self, kind: str, message: str, traceback: str = "", type_: str = ""):
        super().__init__(message)
        self.kind, self.message, self.traceback, self.type = kind, message, traceback, type_

    def as_dict(self) -> dict:
        """As a test's record keeps it: the message in English, and where the grader
        said it (a Said), in every language as `message_texts` (as a check's is)."""
        return {"kind": self.kind, **message_fields(self.message),
                "traceback": self.traceback, "type": self.type}


class SandboxError(Exception):
    """The grader's own machinery failed; never blamed on a student."""


class SlotLost(SandboxError):
    """The slot's server is gone (its socket closed). Once a submission's child has
    run there, the session charges it to that student (`Session._stop`): a slot ignores
    every signal it does not handle, so nothing else it knows of ends a slot, and a
    rerun that graded that student again would stop at them again."""
