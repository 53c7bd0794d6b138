"""LTI 1.3 Assignment and Grade Services score objects, one JSON object a line.

Each line is the body of a `POST {lineitem}/scores` for one student
(application/vnd.ims.lis.v1.score+json). userId is the LTI user id, taken from the
roster's lms_id; an unrostered student keeps their student id and is reported.
A graded score is FullyGraded, or PendingManual while a check question awaits a TA
(or its mark went stale): the total then holds what is marked so far.
A missing submission is, as course.yml's `missing` says, a FullyGraded 0 or a score
with no scoreGiven and gradingProgress NotReady, which leaves the gradebook cell empty.
The comment is the student's result in one line (`one_line.text`): Canvas shows it as
a submission comment, Moodle as the grade's feedback.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from grader.config import Student
from grader.deliver.export import one_line
from grader.deliver.export.exporter import Exported, Exporter, ExportOptions
from grader.record import MISSING, ClassScores, GradeRecord

ACTIVITY = {MISSING: "Initialized"}  # every other status handed something in


def score_object(student: GradeRecord, who: Student, timestamp: str, missing: str,
                 comment: str) -> dict:
    """The AGS score body for one student; `comment` is `one_line.text` of the record."""
    obj = {
        "userId": who.lms_id or student.student_id,
        "scoreGiven": student.score, "scoreMaximum": student.max_score,
        "comment": comment, "timestamp": timestamp,
        "activityProgress": ACTIVITY.get(student.status, "Completed"),
        "gradingProgress": "PendingManual" if pending(student) else "FullyGraded",
    }
    if student.status == MISSING and missing == "blank":
        del obj["scoreGiven"], obj["scoreMaximum"]
        obj["gradingProgress"] = "NotReady"
    return obj


def pending(student: GradeRecord) -> bool:
    """A check question still needs a TA (grader/written.py's awaiting or stale)."""
    return any(q.get("status") in ("awaiting", "stale") for q in student.written.values())


def now() -> str:
    """An AGS timestamp: ISO 8601 in UTC with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


class Lti(Exporter):
    to = "lti"

    def export(self, scores: ClassScores, options: ExportOptions) -> Exported:
        course, people, stamp = options.course, options.roster.entries, now()
        path = options.out_dir / "lti_scores.jsonl"
        lines = [json.dumps(score_object(s, people[s.student_id], stamp, course.missing,
                                         one_line.text(course, options.lesson_key, s,
                                                       options.language)),
                            ensure_ascii=False)
                 for s in scores.students]
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return Exported([path])
