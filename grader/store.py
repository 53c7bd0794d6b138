"""The output folder: one result file per student, written atomically.

    OUT/results/<id>.json   what a student got, with the fingerprint it was graded at
    OUT/raw/<id>.json       pytest-json-report's raw report for that student
    OUT/feedback/<id>.html  the student's page
    OUT/scores.json         the class, rebuilt from results/ at the end of a run

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
from pathlib import Path

TIMING_KEYS = ("elapsed_s", "cpu_s")


def safe_name(student_id: str) -> str:
    """A file name for any student id; odd ids get a hash so two never collide."""
    clean = re.sub(r"[^A-Za-z0-9._@-]", "_", student_id)[:80]
    if clean != student_id or clean.startswith(".") or not clean:
        clean = f"{clean.lstrip('.') or 'id'}-{hashlib.sha256(student_id.encode()).hexdigest()[:8]}"
    return clean


def fingerprint(source: bytes | None, version: str) -> str:
    h = hashlib.sha256(version.encode())
    h.update(b"\0" + (source if source is not None else b"<missing>"))
    return h.hexdigest()[:24]


def write_atomic(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


class Store:
    def __init__(self, out: Path):
        self.out = out

    def result_path(self, student_id: str) -> Path:
        return self.out / "results" / f"{safe_name(student_id)}.json"

    def feedback_path(self, student_id: str) -> Path:
        return self.out / "feedback" / f"{safe_name(student_id)}.html"

    def load(self, student_id: str) -> dict | None:
        try:
            return json.loads(self.result_path(student_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent or torn: grade again

    def is_current(self, student_id: str, fp: str) -> bool:
        old = self.load(student_id)
        return bool(old) and old.get("fingerprint") == fp and \
            self.feedback_path(student_id).exists()

    def save(self, record: dict, feedback_html: str) -> None:
        """Raw report and feedback first, the result last: a result on disk means done."""
        sid = record["student_id"]
        record = dict(record)
        raw = record.pop("raw_report", None)
        record["timing"] = {k: record.pop(k) for k in TIMING_KEYS if k in record}
        write_atomic(self.out / "raw" / f"{safe_name(sid)}.json", dump(raw))
        write_atomic(self.feedback_path(sid), feedback_html)
        write_atomic(self.result_path(sid), dump(record))

    def scores(self, lesson: str, course: str, version: str, max_score: float,
               student_ids: list[str]) -> dict:
        """scores.json for these students, in id order, without timings."""
        students = []
        for sid in sorted(student_ids):
            rec = self.load(sid)
            if rec is None:
                continue
            rec.pop("timing", None)
            students.append(rec)
        doc = {"lesson": lesson, "course": course, "version": version,
               "max_score": max_score, "students": students}
        write_atomic(self.out / "scores.json", dump(doc))
        return doc
