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
Under a late rule (course.yml's `late:`) the late credit is applied once. With
`applied_by: lms` a score carries the student's hand-in time, as `submission.submittedAt`
(1EdTech AGS, in Canvas's Score API) and as the `submitted_at` of Canvas's own
extension: Canvas's scores endpoint makes a new submission at that time and its late
policy applies to it (app/controllers/lti/ims/scores_controller.rb). Otherwise (the
grader applied the credit, `none`, or no time is known) the extension says
`new_submission: false`: a new submission without a time is dated when the score
arrives (Assignment#submit_homework), which Canvas would call late and penalise again.
Moodle's scores endpoint reads neither (ltiservice_gradebookservices, scores.php).
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from grader.config import Course, Student
from grader.deliver.export import one_line
from grader.deliver.export.exporter import Exported, Exporter, ExportOptions
from grader.record import MISSING, ClassScores, GradeRecord

ACTIVITY = {MISSING: "Initialized"}  # every other status handed something in
CANVAS_SUBMISSION = "https://canvas.instructure.com/lti/submission"


def hand_in_time(course: Course, lesson_key: str, student: GradeRecord) -> str | None:
    """What a score says of the hand-in: the AGS time when the LMS applies the late rule
    and the download gave one; "" under any other late rule (no submission for the LMS
    to date); None without a late rule (the score as before: the LMS's own business)."""
    late = course.lesson(lesson_key).late
    if late is None:
        return None
    if late.applied_by != "lms" or not student.handed_in:
        return ""
    return stamp(datetime.fromisoformat(student.handed_in))


def score_object(student: GradeRecord, who: Student, timestamp: str, missing: str,
                 comment: str, submitted_at: str | None = None) -> dict:
    """The AGS score body for one student; `comment` is `one_line.text` of the record,
    `submitted_at` its `hand_in_time`."""
    obj: dict = {
        "userId": who.lms_id or student.student_id,
        "scoreGiven": student.score, "scoreMaximum": student.max_score,
        "comment": comment, "timestamp": timestamp,
        "activityProgress": ACTIVITY.get(student.status, "Completed"),
        "gradingProgress": "PendingManual" if pending(student) else "FullyGraded",
    }
    if submitted_at:
        obj["submission"] = {"submittedAt": submitted_at}
        obj[CANVAS_SUBMISSION] = {"submitted_at": submitted_at}
    elif submitted_at is not None:
        obj[CANVAS_SUBMISSION] = {"new_submission": False}
    if student.status == MISSING and missing == "blank":
        del obj["scoreGiven"], obj["scoreMaximum"]
        obj["gradingProgress"] = "NotReady"
    return obj


def pending(student: GradeRecord) -> bool:
    """A check question still needs a TA (grader/written.py's awaiting or stale)."""
    return any(q.get("status") in ("awaiting", "stale") for q in student.written.values())


def stamp(when: datetime) -> str:
    """An AGS time: ISO 8601 in UTC with milliseconds."""
    return when.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def now() -> str:
    return stamp(datetime.now(timezone.utc))


class Lti(Exporter):
    to = "lti"

    def export(self, scores: ClassScores, options: ExportOptions) -> Exported:
        course, people, stamp = options.course, options.roster.entries, now()
        path = options.out_dir / "lti_scores.jsonl"
        lines = [json.dumps(score_object(s, people[s.student_id], stamp, course.missing,
                                         one_line.text(course, options.lesson_key, s,
                                                       options.language),
                                         hand_in_time(course, options.lesson_key, s)),
                            ensure_ascii=False)
                 for s in scores.students]
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return Exported([path])
