"""The output folder (OUT): one result file per student, written atomically. Its
layout is known here only; every other module asks a `Store` for a path.

    OUT/results/<id>.json   what a student got, with the fingerprint it was graded at
    OUT/raw/<id>.json       pytest-json-report's raw log for that student (each
                            test's call phase, runner.GradingLoop), less what
                            results/<id>.json holds (`raw_without_results`)
    OUT/feedback/<id>.html  the student's page (scores.json's `page` names it)
    OUT/scores.json         the class, written at the end of a run from each
                            student's entry, spooled as it was graded
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
from collections.abc import Iterable, Iterator
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


def source_hash(source: str) -> str:
    """A graded file's text, hashed: kept with its result, so that an assembly lesson
    takes the result for the student's earlier file only while the file is that text."""
    return hashlib.sha256(encode(source)).hexdigest()


def write_atomic(path: Path, data: bytes | str | Iterable[bytes]) -> None:
    """Write to a temp file, then rename: readers see the old file or the new one.
    `data` may come in chunks (scores.json is streamed: no class-sized string).
    No fsync: a killed process loses nothing written, and after a power cut a torn
    or missing result is simply graded again (`Store.load` and `is_current`).
    A lone surrogate (student text that escaped sanitising) is written as "?", never
    an error: one student's string must not stop the worker."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chunks = [encode(data)] if isinstance(data, str) else [data] if isinstance(data, bytes) \
        else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the pages from a web server
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def encode(text: str) -> bytes:
    """UTF-8, a lone surrogate as "?" (see `write_atomic`)."""
    return text.encode("utf-8", "replace")


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
        self.results_path = out / "results"

    def result_path(self, student_id: str) -> Path:
        return self.results_path / f"{safe_name(student_id)}.json"

    def raw_log_path(self, student_id: str) -> Path:
        return self.out / "raw" / f"{safe_name(student_id)}.json"

    def feedback_path(self, student_id: str) -> Path:
        return self.out / self.page_of(student_id)

    @staticmethod
    def page_of(student_id: str) -> str:
        """The student's page relative to OUT, as scores.json names it and report.html
        (in OUT) links it."""
        return f"{PAGES}/{safe_name(student_id)}.html"

    def result_files(self) -> list[Path]:
        """Every stored result, in file-name order."""
        return sorted(self.results_path.glob("*.json"))

    def load(self, student_id: str) -> GradeRecord | None:
        """The student's result, or None to grade again. Nothing is kept: a run reads
        each result once (planning) and keeps only its `tally.Entry`."""
        try:
            data = json.loads(self.result_path(student_id).read_text(encoding="utf-8"))
            return GradeRecord.from_json(data) if isinstance(data, dict) else None
        except (OSError, ValueError, TypeError, AttributeError):
            return None  # absent or torn: grade again

    def is_current(self, student_id: str, fp: str, old: GradeRecord | None = None) -> bool:
        """Graded at `fp`, page and all; `old`: its record, when the caller read it."""
        old = old or self.load(student_id)
        return old is not None and old.fingerprint == fp and \
            self.feedback_path(student_id).exists()

    def save(self, record: GradeRecord, feedback_html: str) -> None:
        """Raw log and feedback first, the result last: a result on disk means done."""
        sid = record.student_id
        write_atomic(self.raw_log_path(sid), dump(raw_without_results(record.raw_log)))
        write_atomic(self.feedback_path(sid), feedback_html)
        write_atomic(self.result_path(sid), dump(record.to_json()))

    def write_scores(self, lesson: str, course: str, version: str, max_score: float,
                     entries: Iterable[bytes], participant_numbers: Iterable[str] = (),
                     absent: Iterable[str] = (), language: str = "") -> None:
        """scores.json, streamed: the class's `scores_entry` texts (UTF-8), in id order,
        inside the document `dump` would write of them, byte for byte;
        `participant_numbers`: the ids that are a Moodle download's participant numbers
        only, which no Moodle import can match; `absent`: the roster's students the
        download held nothing of (listed, never exported: a run over one zip of late
        files must not zero everyone else); `language`: the pages' language, which a
        later `grader report`, `grader export` or run takes unless told otherwise."""
        numbers, away = sorted(participant_numbers), sorted(absent)
        head, tail = dump({"lesson": lesson, "course": course, "version": version,
                           "max_score": max_score,
                           **({"language": language} if language else {}), "students": [],
                           **({"participant_numbers": numbers} if numbers else {}),
                           **({"absent": away} if away else {})}
                          ).split(_STUDENTS, 1)

        def chunks() -> Iterator[bytes]:
            yield encode(head + '"students": [')
            for i, entry in enumerate(entries):
                yield b", " + entry if i else entry
            yield encode("]" + tail)

        write_atomic(self.scores_path, chunks())

    def language(self) -> str:
        """The language the last run wrote the pages in, as scores.json records it ("":
        none recorded)."""
        try:
            found = json.loads(self.scores_path.read_text(encoding="utf-8")).get("language")
        except (OSError, ValueError, AttributeError):
            return ""
        return found if isinstance(found, str) else ""

    def absent(self) -> list[str]:
        """The roster's students the last run found nothing of, as scores.json lists
        them ([] without one)."""
        try:
            found = json.loads(self.scores_path.read_text(encoding="utf-8")).get("absent")
        except (OSError, ValueError, AttributeError):
            return []
        return [s for s in found if isinstance(s, str)] if isinstance(found, list) else []


# what each test's metadata in the raw log holds that results/<id>.json holds too
IN_RESULTS = ("name", "part", "case", "checks", "pictures", "error", "composite")


def raw_without_results(raw: dict | None) -> dict | None:
    """The raw log as raw/<id>.json keeps it: pytest-json-report's, each test's
    metadata less what results/<id>.json holds (its checks, pictures and case), which
    was most of it (the test's outcome, phases and diagnosis matches stay)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("tests"), list):
        return raw
    return {**raw, "tests": [
        {**t, "metadata": {k: v for k, v in t["metadata"].items() if k not in IN_RESULTS}}
        if isinstance(t, dict) and isinstance(t.get("metadata"), dict) else t
        for t in raw["tests"]]}


_STUDENTS = '"students": []'  # the one place it can appear unescaped in `dump`'s text


def scores_entry(record: GradeRecord) -> bytes:
    """A student's entry in scores.json, as `dump` writes it inside the class's list
    (UTF-8): no timings or per-check numbers (those are in results/<id>.json and on
    the pages), naming their page (`page`, relative to OUT) for whoever hands pages
    out. Made by whoever holds the record, once."""
    return encode(dump({**record.score_json(), "page": Store.page_of(record.student_id)})[:-1])


class Spool:
    """Each student's scores.json entry from the moment it is known until the end of
    the run, in an unnamed file in OUT (it vanishes however the run ends) instead of
    the parent's memory: what stays in memory is an offset and a length per student."""

    def __init__(self, out: Path):
        out.mkdir(parents=True, exist_ok=True)
        self._file = tempfile.TemporaryFile(dir=out)
        self._at: dict[str, tuple[int, int]] = {}

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def add(self, student_id: str, entry: bytes) -> None:
        self._file.seek(0, os.SEEK_END)
        self._at[student_id] = (self._file.tell(), len(entry))
        self._file.write(entry)

    def __contains__(self, student_id: str) -> bool:
        return student_id in self._at

    def entries(self, student_ids: Iterable[str]) -> Iterator[bytes]:
        """The entries of these students (those it has), in the order given."""
        for sid in student_ids:
            if sid in self._at:
                offset, size = self._at[sid]
                self._file.seek(offset)
                yield self._file.read(size)
