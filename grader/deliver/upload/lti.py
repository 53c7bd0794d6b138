"""`grader upload --to lti`: a lesson's scores into an LTI 1.3 platform's gradebook.

The scores are the LTI export's (grader/deliver/export/lti.py), so what is sent equals what
`grader export --to lti` writes. A score is sent only when it differs from the last one
the platform accepted for that student and line item, as recorded in
OUT/export/lti_sent.json after every accepted score: a resend, or a rerun after a
crash, sends only what is new. With a roster, a student it lacks (or whose lms_id is
empty) has no LTI user id and is named, not sent.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from grader.intake import roster
from grader.config import Course
from grader.deliver.export import one_line
from grader.deliver.export.lti import hand_in_time, now, score_object
from grader.record import ClassScores
from grader.store import Store, write_atomic
from grader.deliver.upload import UploadError
from grader.deliver.upload.ags import Platform, Refused, Retry
from grader.deliver.upload.keys import lti_config, read_key

SENT = "lti_sent.json"
TIMEOUT_S = 30.0


@dataclass
class Outcome:
    """What an upload did, for the TA: ids are the grader's student ids."""
    lineitem: str = ""
    sent: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)   # (student, why)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # no LTI user id
    planned: list[dict] = field(default_factory=list)              # --dry-run: the bodies


def resource_id(course: Course, lesson_key: str) -> str:
    """The line item's resourceId: ours, so the same line item is found every time."""
    return f"{course.course}:lesson-{lesson_key}"


def label(course: Course, lesson_key: str) -> str:
    return f"Lesson {lesson_key} {course.lesson(lesson_key).title}"


def fingerprint(score: dict) -> str:
    """What makes a score a change: everything but its timestamp."""
    body = {k: v for k, v in score.items() if k != "timestamp"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


def _record_key(course: Course, lesson_key: str) -> str:
    """Where a score went, known without asking the platform (so --dry-run can tell)."""
    return f"{lti_config(course).lineitems_url} {resource_id(course, lesson_key)}"


def _load_sent(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def scores_to_send(course: Course, lesson_key: str, scores: ClassScores,
                   outcome: Outcome, language: str = "en") -> list[tuple[str, dict]]:
    """(student id, score body) for every student with an LTI user id; each comment in
    `language`."""
    found = roster.match(roster.load(course), [s.student_id for s in scores.students])
    stamp, bodies = now(), []
    for s in scores.students:
        sid, who = s.student_id, found.entries[s.student_id]
        if not found.known(sid):
            outcome.skipped.append((sid, "not in the roster: no LTI user id"))
        elif found.rostered and not who.lms_id:
            outcome.skipped.append((sid, "no lms_id (the LTI user id) in the roster"))
        else:
            bodies.append((sid, score_object(s, who, stamp, course.missing,
                                             one_line.text(course, lesson_key, s,
                                                           language),
                                             hand_in_time(course, lesson_key, s))))
    return bodies


def upload(course: Course, lesson_key: str, scores: ClassScores, out: Path, *,
           dry_run: bool = False, force: bool = False,
           client: httpx.Client | None = None, retry: Retry | None = None) -> Outcome:
    """Send what changed; with dry_run, only say what would be sent (no request)."""
    cfg = lti_config(course)
    if scores.lesson != lesson_key:
        raise UploadError(f"these scores are for lesson {scores.lesson!r}, "
                          f"not {lesson_key!r}")
    outcome = Outcome()
    path = Store(out).export_path / SENT
    sent = _load_sent(path)
    mine = sent.setdefault(_record_key(course, lesson_key), {})
    todo = []
    from grader.pages.feedback import language_of

    for sid, body in scores_to_send(course, lesson_key, scores, outcome,
                                    language_of(course, None, out)):
        if not force and mine.get(body["userId"]) == fingerprint(body):
            outcome.unchanged.append(sid)
        else:
            todo.append((sid, body))
    if dry_run:
        outcome.planned = [body for _, body in todo]
        return outcome
    if not todo:
        return outcome  # nothing changed: no token, no request at all
    with client or httpx.Client(timeout=TIMEOUT_S) as http:
        platform = Platform(http, cfg, read_key(course), retry or Retry())
        outcome.lineitem = platform.lineitem(label(course, lesson_key),
                                             resource_id(course, lesson_key),
                                             scores.max_score)
        for sid, body in todo:
            try:
                platform.post_score(outcome.lineitem, body)
            except Refused as exc:
                outcome.refused.append((sid, str(exc)))
                continue
            outcome.sent.append(sid)
            mine[body["userId"]] = fingerprint(body)
            write_atomic(path, json.dumps(sent, indent=1, sort_keys=True))
    return outcome
