"""The output folder (OUT): one result file per student, written atomically. Its
layout is known here only; every other module asks a `Store` for a path.

    OUT/results/<id>.json   what a student got, with the fingerprint it was graded at
    OUT/raw/<id>.json       pytest-json-report's raw report for that student
    OUT/feedback/<id>.html  the student's page (scores.json's `page` names it)
    OUT/scores.json         the class, rebuilt from results/ at the end of a run
    OUT/report.html         the class report (TAs'), linking similarity.html if there
    OUT/similarity.html     `grader similarity`'s pairs
    OUT/intake/             what intake unpacked of an LMS download (its cache)
    OUT/export/             `grader export`'s files (and what `grader upload` sent)

<id> is `safe_name` of the student id: the id itself when it is a plain file name,
else a readable one with a short hash.

A result is written the moment it is known (temp file + rename), so a run killed
at any point loses nothing finished and a rerun skips what it already has. Timing
is kept apart from scores and feedback, which are byte-for-byte reproducible.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import unicodedata
from pathlib import Path

from grader.record import GradeRecord


# what a file name may hold: letters and digits of any script (\w), `.`, `@`, `-`
_NAME_UNSAFE = re.compile(r"[^\w.@-]")


def safe_name(student_id: str) -> str:
    """A file name for any student id, readable by the TA who hands it out (`José
    Núñez` becomes `José_Núñez-<hash>`, not `Jos__N__ez-…`); an id that is not already
    a plain name gets a hash of itself, so two never collide."""
    readable = unicodedata.normalize("NFC", student_id)
    clean = _NAME_UNSAFE.sub("_", readable)[:80]
    if clean != student_id or clean.startswith(".") or not clean:
        clean = f"{clean.lstrip('.') or 'id'}-{hashlib.sha256(student_id.encode()).hexdigest()[:8]}"
    return clean


def fingerprint(source: bytes | None, version: str) -> str:
    h = hashlib.sha256(version.encode())
    h.update(b"\0" + (source if source is not None else b"<missing>"))
    return h.hexdigest()[:24]


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write to a temp file, then rename: readers see the old file or the new one.
    No fsync: a killed process loses nothing written, and after a power cut a torn
    or missing result is simply graded again (`Store.load` and `is_current`).
    A lone surrogate (student text that escaped sanitising) is written as "?", never
    an error: one student's string must not stop the worker."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the pages from a web server
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def dump(obj: object) -> str:
    """Stable, compact JSON (indenting would run json's slow pure-Python encoder:
    scores.json of a class is megabytes; `python -m json.tool` shows it indented)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


PAGES = "feedback"  # the students' pages, relative to OUT


class Store:
    def __init__(self, out: Path):
        self.out = out
        self.scores_path = out / "scores.json"
        self.report_path = out / "report.html"
        self.similarity_path = out / "similarity.html"
        self.intake_path = out / "intake"
        self.export_path = out / "export"
        self.pages_path = out / PAGES
        # Parsed results by file identity: a run reads each one up to three times
        # (planning, scores.json, the report), and a no-change rerun is all reading.
        self._parsed: dict[str, tuple[tuple[int, int, int], dict]] = {}

    def result_path(self, student_id: str) -> Path:
        return self.out / "results" / f"{safe_name(student_id)}.json"

    def feedback_path(self, student_id: str) -> Path:
        return self.out / self.page_of(student_id)

    @staticmethod
    def page_of(student_id: str) -> str:
        """The student's page relative to OUT, as scores.json names it and report.html
        (in OUT) links it."""
        return f"{PAGES}/{safe_name(student_id)}.html"

    def result_files(self) -> list[Path]:
        """Every stored result, in file-name order."""
        return sorted((self.out / "results").glob("*.json"))

    def load(self, student_id: str) -> GradeRecord | None:
        """The student's result, or None to grade again."""
        path = self.result_path(student_id)
        try:
            st = path.stat()
            identity = (st.st_ino, st.st_mtime_ns, st.st_size)  # a rename changes it
            cached = self._parsed.get(student_id)
            if cached is None or cached[0] != identity:
                data = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(data, dict):
                    return None
                cached = (identity, data)
                self._parsed[student_id] = cached
            return GradeRecord.from_json(cached[1])
        except (OSError, ValueError, TypeError, AttributeError):
            return None  # absent or torn: grade again

    def is_current(self, student_id: str, fp: str) -> bool:
        old = self.load(student_id)
        return old is not None and old.fingerprint == fp and \
            self.feedback_path(student_id).exists()

    def save(self, record: GradeRecord, feedback_html: str) -> None:
        """Raw report and feedback first, the result last: a result on disk means done."""
        sid = record.student_id
        write_atomic(self.out / "raw" / f"{safe_name(sid)}.json", dump(record.raw_report))
        write_atomic(self.feedback_path(sid), feedback_html)
        write_atomic(self.result_path(sid), dump(record.to_json()))

    def scores(self, lesson: str, course: str, version: str, max_score: float,
               student_ids: list[str]) -> dict:
        """scores.json for these students, in id order, without timings or the
        per-check numbers (those are in results/<id>.json and on the pages), each
        naming their page (`page`, relative to OUT) for whoever hands pages out."""
        students = [{**rec.score_json(), "page": self.page_of(sid)}
                    for sid in sorted(student_ids) if (rec := self.load(sid)) is not None]
        doc = {"lesson": lesson, "course": course, "version": version,
               "max_score": max_score, "students": students}
        write_atomic(self.scores_path, dump(doc))
        return doc
