"""The class as the parent knows it while a run goes on: one small `Line` per student
and running counts for the class report, folded one `Entry` at a time. A worker makes
each student's `Entry` from the record in its hands and sends it with its "done", so
the parent never holds a student's parsed result: its memory does not grow with how
much each result says (a mistaken student's is 300 KiB parsed), only by a line each.

Students are folded in the order they finish; every list the report shows is ordered
as if they had been folded in the class's order (`Tally(order)`), so the report does
not depend on which worker was faster.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from grader.record import GRADED, GradeRecord
from grader.store import Spool, scores_entry

SLOWEST = 10  # submissions listed as slowest in the class report


@dataclass
class Line:
    """A student's row in the report's table of every student; what the run's summary
    counts (status) and names."""

    student_id: str
    name: str
    status: str
    score: float
    parts: dict[str, float]  # part -> points


@dataclass
class Entry:
    """What the class report and scores.json need of one graded student."""

    line: Line
    scores: bytes                 # the student's scores.json entry (`store.scores_entry`)
    problem: str
    elapsed_s: float
    cpu_s: float
    tests: list[tuple[str, str, bool]]          # (part, test, passed)
    error_kinds: list[str | None]               # each kind once, in test order
    mistakes: list[tuple[str, str, Any]]        # (id, part, title), each id once
    unmatched: list[str]                        # parts with a failure no mistake explains

    @classmethod
    def of(cls, record: GradeRecord) -> Entry:
        mistakes: dict[str, tuple[str, str, Any]] = {}
        unmatched: dict[str, None] = {}
        for test in record.tests:
            d = test.diagnosis
            if d is None:
                continue
            if d.id is None:
                unmatched[test.part] = None
            else:
                mistakes.setdefault(d.id, (d.id, test.part, d.title))
        return cls(line=Line(record.student_id, record.name, record.status, record.score,
                             {k: p.score for k, p in record.parts.items()}),
                   scores=scores_entry(record), problem=record.problem,
                   elapsed_s=record.timing.elapsed_s, cpu_s=record.timing.cpu_s,
                   tests=[(t.part, t.name, t.passed) for t in record.tests],
                   error_kinds=list(dict.fromkeys(t.error.get("kind")
                                                  for t in record.tests if t.error)),
                   mistakes=list(mistakes.values()), unmatched=list(unmatched))


@dataclass
class Slow:
    """One of the slowest submissions, as the report lists it."""

    student_id: str
    elapsed_s: float
    cpu_s: float
    status: str


@dataclass
class Problem:
    """A student who could not be graded normally, and why."""

    student_id: str
    status: str
    problem: str


@dataclass
class Mistake:
    """A known mistake and the students it was diagnosed in."""

    id: str
    part: str
    title: Any                    # {language: text}, localised by the report
    first: int                    # the class position its part and title come from
    students: list[tuple[int, str]] = field(default_factory=list)


class _Counts:
    """Counts of keys ranked as `Counter.most_common` ranks them over the class in order:
    by count, ties by where the key first appears."""

    def __init__(self) -> None:
        self._seen: dict[Any, list] = {}  # key -> [count, (position, index in student)]

    def add(self, key: Any, at: tuple[int, int]) -> None:
        seen = self._seen.setdefault(key, [0, at])
        seen[0] += 1
        seen[1] = min(seen[1], at)

    def ranked(self) -> list[tuple[Any, int]]:
        order = sorted(self._seen.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
        return [(key, count) for key, (count, _) in order]


class Tally:
    """Running counts over the class. `order`: the class's student ids in the order the
    report lists them in (the run's class order); a student not in it comes after,
    in the order added. `spool`: where each student's scores.json entry goes."""

    def __init__(self, order: list[str] | tuple[str, ...] = (), spool: Spool | None = None):
        self._position = {sid: i for i, sid in enumerate(order)}
        self._spool = spool
        self._added = 0
        self.lines: list[tuple[int, Line]] = []
        self._ids: set[str] = set()
        self.rates: dict[tuple[str, str], list[int]] = {}   # (part, test) -> [passed, total]
        self.mistakes: dict[str, Mistake] = {}
        self.unmatched, self.error_kinds, self.statuses = _Counts(), _Counts(), _Counts()
        self.problems: list[tuple[int, Problem]] = []
        self._slowest: list[tuple[float, int, Slow]] = []   # a heap: (elapsed, -position, …)
        self.absent: list[str] = []  # on the roster, nothing in the download: no entry

    @classmethod
    def of(cls, records: list[GradeRecord]) -> Tally:
        """The counts over these records, in this order."""
        tally = cls()
        for record in records:
            tally.add(Entry.of(record))
        return tally

    def __contains__(self, student_id: str) -> bool:
        return student_id in self._ids

    def add(self, entry: Entry) -> None:
        line = entry.line
        sid = line.student_id
        at = (self._position[sid] if sid in self._position and sid not in self._ids
              else len(self._position) + self._added)
        self._added += 1
        self._ids.add(sid)
        self.lines.append((at, line))
        if self._spool is not None:
            self._spool.add(sid, entry.scores)
        for part, test, passed in entry.tests:
            rate = self.rates.setdefault((part, test), [0, 0])
            rate[0] += passed
            rate[1] += 1
        for mid, part, title in entry.mistakes:
            mistake = self.mistakes.setdefault(mid, Mistake(mid, part, title, at))
            if at < mistake.first:
                mistake.part, mistake.title, mistake.first = part, title, at
            mistake.students.append((at, sid))
        for i, part in enumerate(entry.unmatched):
            self.unmatched.add(part, (at, i))
        for i, kind in enumerate(entry.error_kinds):
            self.error_kinds.add(kind, (at, i))
        self.statuses.add(line.status, (at, 0))
        if line.status != GRADED:
            self.problems.append((at, Problem(sid, line.status, entry.problem)))
        slow = (entry.elapsed_s, -at, Slow(sid, entry.elapsed_s, entry.cpu_s, line.status))
        if len(self._slowest) < SLOWEST:
            heapq.heappush(self._slowest, slow)
        elif slow[:2] > self._slowest[0][:2]:
            heapq.heapreplace(self._slowest, slow)

    def slowest(self) -> list[Slow]:
        """The SLOWEST slowest, slowest first (ties in class order)."""
        return [s for _, _, s in sorted(self._slowest, key=lambda x: (-x[0], -x[1]))]

    def in_order(self) -> list[Line]:
        """Every student's line, in class order."""
        return [line for _, line in sorted(self.lines, key=lambda x: x[0])]
