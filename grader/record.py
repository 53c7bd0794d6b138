"""A submission's result as typed records, and their one JSON form.

`runner` builds a `GradeRecord` once per submission; the store writes it as
results/<id>.json and reads it back with `GradeRecord.from_json`, so the pages, the
report, the exports' source (scores.json) and selftest all read the same fields. A
field added here is added everywhere; a misspelt one fails where it is read.

`status` is decided by `status_of` alone: every place that used to set it now asks.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from grader.sandbox.limits import WORKER_STOPPED
from grader.text.strings import Said, restored, stored

Json = dict[str, Any]

GRADED, MISSING, UNREADABLE, IMPORT_ERROR, TIMEOUT = (
    "graded", "missing", "unreadable", "import_error", "timeout")
# the summary's "errors"
ERROR_STATUSES = (IMPORT_ERROR, MISSING, UNREADABLE, WORKER_STOPPED)
# scores.json keeps each test's verdict; the numbers behind it stay in results/<id>.json
SCORE_TEST_KEYS = ("name", "part", "practice", "outcome", "score", "max_score",
                   "max_abs_diff", "message", "diagnosis")


def status_of(missing: bool | None, fatal_kind: str | None, tests: list[TestRecord]) -> str:
    """The one rule for a record's status. `missing`: None when a file was read, else
    whether it is absent (True) or unreadable (False); `fatal_kind`: why the session
    ended early, if it did. A graded run in which a test timed out is a timeout."""
    if missing is not None:
        return MISSING if missing else UNREADABLE
    if fatal_kind == WORKER_STOPPED:  # the slot ended while its code ran: 0 points
        return WORKER_STOPPED
    if fatal_kind is not None:
        return TIMEOUT if fatal_kind == "timeout" else IMPORT_ERROR
    if any(t.error and t.error.get("kind") == "timeout" for t in tests):
        return TIMEOUT
    return GRADED


@dataclass
class Diagnosis:
    """A known mistake named for a part or a test; `id=None`: diagnosable, none fits."""

    id: str | None
    title: Any = None   # {language: text}
    hint: Any = None

    def to_json(self) -> Json:
        return {"id": None} if self.id is None else {"id": self.id, "title": self.title,
                                                      "hint": self.hint}

    @classmethod
    def from_json(cls, data: object) -> Diagnosis | None:
        if not isinstance(data, dict):
            return None
        return cls(data.get("id"), data.get("title"), data.get("hint"))


@dataclass
class TestRecord:
    """One hidden or practice test's verdict; `score`/`max_score` set by points.award."""

    __test__ = False  # a record, not a test class, wherever pytest meets the name

    name: str
    part: str
    practice: bool
    outcome: str                        # "passed" or "failed"
    message: str = ""
    max_abs_diff: float | None = None
    checks: list[Json] = field(default_factory=list)   # compare's per-tensor findings
    error: Json | None = None           # {"kind", "message", "traceback"}
    pictures: list[Json] = field(default_factory=list)
    diagnosis: Diagnosis | None = None  # None: this test cannot tell mistakes apart
    score: float = 0.0
    max_score: float = 0.0
    # the case's fields as [name, value] pairs in the lesson's order (never a seed):
    # what the page's contrast rule reads (grader/judge/cases.py, grader/pages/explain.py)
    case: list[list[Any]] = field(default_factory=list)
    composite: bool = False             # its test compares with `explained`

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def to_json(self) -> Json:
        return {"name": self.name, "part": self.part, "practice": self.practice,
                "outcome": self.outcome, "message": self.message,
                "max_abs_diff": self.max_abs_diff, "checks": self.checks,
                "error": self.error, "pictures": self.pictures,
                "diagnosis": self.diagnosis.to_json() if self.diagnosis else None,
                "score": self.score, "max_score": self.max_score, "case": self.case,
                "composite": self.composite}

    @classmethod
    def from_json(cls, d: Json) -> TestRecord:
        return cls(name=str(d.get("name", "")), part=str(d.get("part", "")),
                   practice=bool(d.get("practice", False)),
                   outcome=str(d.get("outcome", "failed")), message=d.get("message") or "",
                   max_abs_diff=d.get("max_abs_diff"), checks=list(d.get("checks") or []),
                   error=d.get("error"), pictures=list(d.get("pictures") or []),
                   diagnosis=Diagnosis.from_json(d.get("diagnosis")),
                   score=float(d.get("score") or 0.0),
                   max_score=float(d.get("max_score") or 0.0),
                   case=[list(p) for p in d.get("case") or [] if isinstance(p, (list, tuple))],
                   composite=bool(d.get("composite", False)))


# What the page says about a failing part's first divergence (judge/divergence/ finds
# it, pages/where.py says it), kept in `PartRecord.where` in its JSON form.
MAX_CODE = 160         # characters of a quoted statement
MAX_MATCHED = 6        # names listed as matching before the line
MAX_ERROR = 200        # characters of the error a line raised
KINDS = ("line", "path", "skip", "extra", "gradient", "cut", "added", "upstream", "raised",
         "default")
_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}")


def _ints(value: object) -> list[int]:
    """A shape or an index as a record holds it; [] for anything else."""
    if not isinstance(value, list) or len(value) > 8:
        return []
    return [int(v) for v in value if isinstance(v, int) and not isinstance(v, bool)]


@dataclass(frozen=True)
class Where:
    """What the page says about a failing part's first divergence. `kind`: "line"
    (a statement's value is new), "path" (a branch goes another way), "skip" (a
    statement computes nothing where the reference's computes `name`), "extra" (a
    layer built with a parameter the reference lacks, `name`), "gradient" (every
    forward value matches, a gradient does not), "cut" / "added" (every forward value
    matches; from this statement `name`'s gradient flows back to fewer / more leaves
    (inputs, parameters) than the reference's same value: those it misses named in
    `ref`, those it adds in `got`, where the reference's trace names them), "upstream"
    (a composite part's values first differ in the code of an earlier part, `part`, in
    its function or class `name`: the line is that part's), "default" (a
    parameter `name` the grader's call leaves at the student's default, written on
    this line: its value `got`, the reference's `ref`), "raised" (the line raised
    `raise_error`, and nothing differed before it). `raise_*`: the line that raised,
    where one did (its own box, after this one's when the values differed before it)."""
    kind: str
    line: int = 0
    end: int = 0
    code: str = ""
    name: str = ""
    matched: list[str] = field(default_factory=list)
    got: str = ""
    ref: str = ""
    got_shape: list[int] = field(default_factory=list)  # [] where the sentence names none
    ref_shape: list[int] = field(default_factory=list)
    got_at: list[int] = field(default_factory=list)     # where the quoted values start,
    ref_at: list[int] = field(default_factory=list)     # [] at the first element
    part: str = ""
    raise_line: int = 0
    raise_end: int = 0
    raise_code: str = ""
    raise_error: str = ""  # "RuntimeError: its message", capped

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: object) -> Where | None:
        if not isinstance(d, dict) or d.get("kind") not in KINDS:
            return None
        part = str(d.get("part") or "")
        return cls(str(d["kind"]), int(d.get("line") or 0), int(d.get("end") or 0),
                   str(d.get("code") or "")[:MAX_CODE], str(d.get("name") or "")[:60],
                   [str(n)[:60] for n in (d.get("matched") or [])][:MAX_MATCHED],
                   str(d.get("got") or "")[:200], str(d.get("ref") or "")[:200],
                   _ints(d.get("got_shape")), _ints(d.get("ref_shape")),
                   _ints(d.get("got_at")), _ints(d.get("ref_at")),
                   part if _PART.fullmatch(part) else "",
                   int(d.get("raise_line") or 0), int(d.get("raise_end") or 0),
                   str(d.get("raise_code") or "")[:MAX_CODE],
                   str(d.get("raise_error") or "")[:MAX_ERROR])


@dataclass
class PartRecord:
    """A part's points and counters (graded tests only) and the mistake explaining it."""

    score: float
    max_score: float
    passed: int
    tests: int
    diagnosis: Diagnosis | None = None
    where: Json | None = None  # the first line its values leave the reference's (divergence)
    answers: list[Json] = field(default_factory=list)  # grader/judge/questions.py's findings
    # a composite part's stand-in round (grader/judge/standin.py): {"parts": the earlier
    # parts stood in for, "passed": whether the wiring matched, its failures then excused}
    stand_in: Json | None = None
    # an assembly lesson's own-code part (grader/judge/earlier.py): {"pieces": [each
    # piece's verdict: run as the student's own, or stood in for and why]}
    earlier: Json | None = None
    # a known mistake the finding comes near but the results do not match (a layer
    # with a parameter named as the mistake's: Qwen2-MoE's `shared_expert_gate`)
    near: Diagnosis | None = None

    def to_json(self) -> Json:
        return {"score": self.score, "max_score": self.max_score, "passed": self.passed,
                "tests": self.tests,
                "diagnosis": self.diagnosis.to_json() if self.diagnosis else None,
                **({"where": self.where} if self.where else {}),
                **({"answers": self.answers} if self.answers else {}),
                **({"stand_in": self.stand_in} if self.stand_in else {}),
                **({"earlier": self.earlier} if self.earlier else {}),
                **({"near": self.near.to_json()} if self.near else {})}

    @classmethod
    def from_json(cls, d: Json) -> PartRecord:
        return cls(float(d.get("score") or 0.0), float(d.get("max_score") or 0.0),
                   int(d.get("passed") or 0), int(d.get("tests") or 0),
                   Diagnosis.from_json(d.get("diagnosis")),
                   d.get("where") if isinstance(d.get("where"), dict) else None,
                   [a for a in d.get("answers") or [] if isinstance(a, dict)],
                   d.get("stand_in") if isinstance(d.get("stand_in"), dict) else None,
                   d.get("earlier") if isinstance(d.get("earlier"), dict) else None,
                   Diagnosis.from_json(d.get("near")))


@dataclass
class Timing:
    """Kept apart from scores and pages, which are byte-for-byte reproducible."""

    elapsed_s: float = 0.0
    cpu_s: float = 0.0

    def to_json(self) -> Json:
        return {"elapsed_s": self.elapsed_s, "cpu_s": self.cpu_s}


@dataclass
class GradeRecord:
    """What one submission got, with the facts the trusted side established about it."""

    student_id: str
    lesson: str
    status: str
    score: float
    max_score: float
    parts: dict[str, PartRecord]
    tests: list[TestRecord]
    problem: str = ""
    import_traceback: str = ""
    output: str = ""                    # what the submission printed (capped)
    sandboxed: bool = True
    sandbox: str = "none"
    notes: list[str] = field(default_factory=list)   # intake's notes on the file (Said)
    fingerprint: str = ""
    name: str = ""                      # the student's name, where the roster or LMS says
    timing: Timing = field(default_factory=Timing)
    raw_log: Json | None = None         # pytest-json-report's; stored in raw/, not here
    examples: dict[str, str] = field(default_factory=dict)  # part -> smallest.snippet
    # the check questions, as scores.json keeps them (grader/written.py): question id
    # -> score, max_score, status; set after grading, never in results/<id>.json
    written: dict[str, Json] = field(default_factory=dict)
    # a notebook's code cells in the .py graded (intake's `notebook.cells_of`), so that
    # errors name the cell and its line (text/cells.py); [] for a .py handed in
    cells: list[list[int]] = field(default_factory=list)
    # when the LMS says the graded file was handed in (ISO, as scores.json keeps it from
    # the grade of record, grader/judge/final.py); "" when no time is known
    handed_in: str = ""
    # store.source_hash of the text graded ("" with none): an assembly lesson takes this
    # result for the student's earlier file only while the file is that text
    # (grader/judge/earlier.py); kept in results/<id>.json, not in scores.json
    source_hash: str = ""

    def to_json(self) -> Json:
        """results/<id>.json: everything but the raw log."""
        return {"student_id": self.student_id, "lesson": self.lesson, "status": self.status,
                "score": self.score, "max_score": self.max_score,
                "parts": {name: p.to_json() for name, p in self.parts.items()},
                "tests": [t.to_json() for t in self.tests], "problem": str(self.problem),
                **({"problem_texts": stored(self.problem)} if isinstance(self.problem, Said)
                   else {}),
                "import_traceback": self.import_traceback, "output": self.output,
                "sandboxed": self.sandboxed, "sandbox": self.sandbox,
                "notes": [stored(n) for n in self.notes],
                "fingerprint": self.fingerprint, "timing": self.timing.to_json(),
                "examples": {k: stored(v) for k, v in self.examples.items()},
                **({"name": self.name} if self.name else {}),
                **({"written": self.written} if self.written else {}),
                **({"cells": self.cells} if self.cells else {}),
                **({"handed_in": self.handed_in} if self.handed_in else {}),
                **({"source_hash": self.source_hash} if self.source_hash else {})}

    def score_json(self) -> Json:
        """The record as scores.json holds it: no timing, each test's verdict only."""
        doc = self.to_json()
        del doc["timing"], doc["examples"]
        doc.pop("source_hash", None)
        doc["notes"] = [str(n) for n in self.notes]  # the exports read English text
        doc["tests"] = [{k: t[k] for k in SCORE_TEST_KEYS} for t in doc["tests"]]
        return doc

    @classmethod
    def from_json(cls, d: Json) -> GradeRecord:
        """A stored result (or a scores.json entry) as a record; a missing field takes
        its default, so a page can be rendered from any version's file."""
        timing = d.get("timing") or {}
        return cls(student_id=str(d.get("student_id", "")), lesson=str(d.get("lesson", "")),
                   status=str(d.get("status", GRADED)), score=float(d.get("score") or 0.0),
                   max_score=float(d.get("max_score") or 0.0),
                   parts={str(k): PartRecord.from_json(v)
                          for k, v in (d.get("parts") or {}).items() if isinstance(v, dict)},
                   tests=[TestRecord.from_json(t) for t in d.get("tests") or []
                          if isinstance(t, dict)],
                   problem=restored(d["problem_texts"]) if isinstance(d.get("problem_texts"), dict)
                   else str(d.get("problem") or ""),
                   import_traceback=d.get("import_traceback") or "",
                   output=d.get("output") or "", sandboxed=bool(d.get("sandboxed", True)),
                   sandbox=str(d.get("sandbox", "none")), notes=[restored(n) for n in d.get("notes") or []],
                   fingerprint=str(d.get("fingerprint", "")), name=str(d.get("name") or ""),
                   timing=Timing(float(timing.get("elapsed_s") or 0.0),
                                 float(timing.get("cpu_s") or 0.0)),
                   examples={str(k): restored(v) for k, v in (d.get("examples") or {}).items()},
                   written={str(k): v for k, v in (d.get("written") or {}).items()
                            if isinstance(v, dict)},
                   cells=[[int(x) for x in row] for row in d.get("cells") or []
                          if isinstance(row, list) and len(row) == 4],
                   handed_in=str(d.get("handed_in") or ""),
                   source_hash=str(d.get("source_hash") or ""))


@dataclass
class ClassScores:
    """scores.json as records: what every export and upload reads, built once from the
    file, so each reads the same fields as the pages do (a student's `page` is
    `Store.page_of` their id, and not kept here)."""

    lesson: str
    course: str
    version: str
    max_score: float
    students: list[GradeRecord]
    participant_numbers: list[str] = field(default_factory=list)  # Moodle's, unmapped

    @classmethod
    def from_json(cls, d: Json) -> ClassScores:
        return cls(lesson=str(d.get("lesson", "")), course=str(d.get("course", "")),
                   version=str(d.get("version", "")),
                   max_score=float(d.get("max_score") or 0.0),
                   students=[GradeRecord.from_json(s) for s in d.get("students") or []
                             if isinstance(s, dict)],
                   participant_numbers=[str(x) for x in d.get("participant_numbers") or []])
