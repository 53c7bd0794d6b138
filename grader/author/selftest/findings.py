"""What `grader selftest` found: one line per fact it checked, and its verdict."""
from __future__ import annotations

from dataclasses import dataclass

# The contract, in the order it is checked and printed.
CHECKS = ("todos", "names", "leaks", "hints", "solution", "stub", "mistakes", "correct",
          "precision")
OK, FAILED = "ok", "failed"
# Listed, not failures: a mistake whose variant raises where the student's code cannot
# be matched to it (in every failing test, or with another error), and two mistakes with
# the same results on every failing test are one mistake as far as the tests can tell.
RAISES, INDISTINGUISHABLE = "raises", "indistinguishable"
SKIPPED = "skipped"


@dataclass(frozen=True)
class Finding:
    check: str    # one of CHECKS
    subject: str  # what was checked: a mistake id, a file, a name
    status: str   # OK, FAILED, RAISES, INDISTINGUISHABLE or SKIPPED
    message: str

    @property
    def failed(self) -> bool:
        return self.status == FAILED


def ok(check: str, subject: str, message: str) -> Finding:
    return Finding(check, subject, OK, message)


def failed(check: str, subject: str, message: str) -> Finding:
    return Finding(check, subject, FAILED, message)
