"""LTI 1.3 Assignment and Grade Services score objects, one JSON object a line.

Each line is the body of a `POST {lineitem}/scores` for one student
(application/vnd.ims.lis.v1.score+json). userId is the LTI user id, taken from the
roster's lms_id; an unrostered student keeps their student id and is reported.
Every score, a missing submission's 0 included, is FullyGraded: Canvas ignores the
others, and scores.json is final.
"""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from grader.config import Student

ACTIVITY = {"missing": "Initialized"}  # every other status handed something in


def comment(student: dict) -> str:
    """A one-line summary for an LMS comment: status, then points per part."""
    parts = "; ".join(f"{name} {p['score']:g}/{p['max_score']:g}"
                      for name, p in student["parts"].items())
    lead = (student.get("problem") or student["status"].replace("_", " ")).rstrip(".")
    lead = lead[:1].upper() + lead[1:]
    return f"{lead}. {parts}" if parts else f"{lead}."


def score_object(student: dict, who: Student, timestamp: str) -> dict:
    return {
        "userId": who.lms_id or student["student_id"],
        "scoreGiven": student["score"], "scoreMaximum": student["max_score"],
        "comment": comment(student), "timestamp": timestamp,
        "activityProgress": ACTIVITY.get(student["status"], "Completed"),
        "gradingProgress": "FullyGraded",
    }


def write(scores: dict, people: dict[str, Student], out_dir: Path) -> list[Path]:
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    path = out_dir / "lti_scores.jsonl"
    lines = [json.dumps(score_object(s, people[s["student_id"]], stamp), ensure_ascii=False)
             for s in scores["students"]]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return [path]
