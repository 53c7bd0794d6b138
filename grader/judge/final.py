"""The grade of record: late credit, extensions and overrides, applied at every run after
the code and the written marks are in, from files beside course.yml in grades/<lesson>/
(never under OUT, so a new OUT or `--force` loses nothing a TA set):

- extensions.csv: one row per student (student_id, due, reason, granted_by, granted_at),
  the current extensions, which a TA may edit; `grader extend` also appends each grant
  to extensions.jsonl, the history;
- overrides.jsonl: append-only, each `grader override` a line (set, adjust or revoke),
  and the automatic score a run first saw under each override (`basis`), against which
  a later run finds it `stale`.

Lateness is the LMS's time of hand-in, as intake read it; never a file's time on disk.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path

from grader import points as exact
from grader.config import LatePolicy, Lesson
from grader.judge.written import _read_jsonl, append_jsonl, grades_folder, with_section
EXTENSIONS, EXTENSION_LOG, OVERRIDES = "extensions.csv", "extensions.jsonl", "overrides.jsonl"
REGRADES = "regrades.jsonl"  # append-only: each request opened, each resolved
COLUMNS = ("student_id", "due", "reason", "granted_by", "granted_at")
EXCUSED = "excused"  # an extension's `due` that removes the late credit altogether
ON_TIME, LATE, UNKNOWN = "on_time", "late", "unknown"
STALE = "stale"  # the check questions' word: made on a score that has since changed


class RecordError(Exception):
    """A file a TA edits by hand, or a command's input, is wrong: the message names the
    file and line; nothing was applied."""


def read_time(text: str, zone: tzinfo) -> datetime:
    """An ISO date and time (`2026-10-04 23:59`, `2026-10-04T23:59+08:00`); one without
    an offset is in `zone` (course.yml's `timezone`, else `due`'s offset)."""
    when = datetime.fromisoformat(text.strip())
    return when if when.tzinfo else when.replace(tzinfo=zone)


@dataclass(frozen=True)
class Extension:
    """One student's due date in effect (`due`), or `excused` (no late credit at all)."""

    student_id: str
    due: datetime | None
    reason: str
    granted_by: str
    granted_at: str

    @property
    def excused(self) -> bool:
        return self.due is None

    def row(self) -> list[str]:
        return [self.student_id, self.due.isoformat() if self.due else EXCUSED,
                self.reason, self.granted_by, self.granted_at]

    def to_json(self) -> dict:
        return dict(zip(COLUMNS, self.row()))


def read_extensions(folder: Path, zone: tzinfo,
                    known: set[str] | None = None) -> dict[str, Extension]:
    """extensions.csv's rows by student; every bad row (a bad date, a student not in
    `known`, two rows for one student) is named by its line, all at once."""
    path = folder / EXTENSIONS
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [c.strip() for c in rows[0]] != list(COLUMNS):
        raise RecordError(f"{path}:1: the header must be {','.join(COLUMNS)}")
    out: dict[str, Extension] = {}
    lines: dict[str, int] = {}
    problems = []
    for n, cells in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(COLUMNS):
            problems.append(f"{path}:{n}: {len(cells)} cells, not {len(COLUMNS)}")
            continue
        sid, due, reason, by, at = (c.strip() for c in cells)
        if not sid:
            problems.append(f"{path}:{n}: no student_id")
            continue
        if known is not None and sid not in known:
            problems.append(f"{path}:{n}: {sid!r} is not a student of this lesson")
            continue
        if sid in lines:
            problems.append(f"{path}:{lines[sid]} and {n}: two rows for {sid!r}; an "
                            "extension replaces the due date, so keep one")
            continue
        try:
            when = None if due.lower() == EXCUSED else read_time(due, zone)
        except ValueError:
            problems.append(f"{path}:{n}: due {due!r} is neither a date and time "
                            f"(2026-10-04 23:59) nor {EXCUSED!r}")
            continue
        lines[sid] = n
        out[sid] = Extension(sid, when, reason, by, at)
    if problems:
        raise RecordError("\n".join(problems))
    return out


def write_extension(folder: Path, ext: Extension, zone: tzinfo,
                    known: set[str] | None = None) -> Extension | None:
    """Write (or replace) `ext`'s row and log the grant in the history; returns the row
    it replaced. The file is read and checked first: nothing is written over a bad one."""
    from grader.store import write_atomic

    current = read_extensions(folder, zone, known)
    old = current.get(ext.student_id)
    current[ext.student_id] = ext
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(current[s].row() for s in sorted(current))
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / EXTENSIONS, buf.getvalue())
    append_jsonl(folder / EXTENSION_LOG,
                 [{**ext.to_json(), **({"replaced": old.to_json()} if old else {})}])
    return old


# ---- lateness and credit -------------------------------------------------------------

@dataclass(frozen=True)
class Lateness:
    """How late a student's file was against the due date in effect, and its credit (%)."""

    status: str                # on_time, late or unknown (the download gave no time)
    minutes: int | None = None  # after the due date in effect, when late
    credit: float = 100.0
    due: datetime | None = None  # the due date in effect
    handed_in: datetime | None = None
    marked: bool = False       # known from the LMS's late mark alone (Canvas's `LATE`):
    #                            late or not, but not when, so how late is unknown


def lateness(policy: LatePolicy, handed_in: datetime | None, due: datetime | None,
             ext: Extension | None, marked: bool | None = None) -> Lateness:
    """Grace and windows count from the due date in effect (the extension's, else the
    lesson's); an excused student keeps all credit. Without a time, the LMS's late mark
    (`marked`, Canvas's `LATE`, made against the due date the LMS holds) says late or on
    time, unless the grader extended the student (their due date is not the LMS's);
    how late is unknown, so no credit window applies. Else nothing is claimed."""
    if ext is not None and not ext.excused:
        due = ext.due
    if handed_in is None and marked is not None and ext is None:
        return Lateness(LATE if marked else ON_TIME, due=due, credit=100.0, marked=True)
    if handed_in is None or due is None:
        return Lateness(UNKNOWN, due=due)
    after = handed_in - due
    if after <= timedelta(minutes=policy.grace_minutes):
        return Lateness(ON_TIME, due=due, handed_in=handed_in)
    minutes = math.ceil(after.total_seconds() / 60)
    credit = policy.after_last
    for w in policy.windows:
        if after <= timedelta(minutes=w.minutes):
            credit = w.credit
            break
    if ext is not None and ext.excused:
        credit = 100.0
    return Lateness(LATE, minutes, credit, due, handed_in)


# ---- overrides -----------------------------------------------------------------------

SET, ADJUST, REVOKE, BASIS = "set", "adjust", "revoke", "basis"


def read_overrides(folder: Path) -> list[dict]:
    """overrides.jsonl's lines; one that is JSON but not a whole override, revoke or
    run's record (edited by hand) is an error naming its line. A line that is not JSON
    is skipped, as written.jsonl's: only a killed writer's last line can be torn."""
    path = folder / OVERRIDES
    rows = _read_jsonl(path)
    need = {SET: ("id", "student_id", "part"), ADJUST: ("id", "student_id", "part"),
            REVOKE: ("id", "target"), BASIS: ("target",)}
    problems = []
    for n, r in enumerate(rows, start=1):
        kind = r.get("kind")
        bad = kind not in need or any(not isinstance(r.get(k), str) for k in need[kind]) \
            or (kind in (SET, ADJUST) and not isinstance(r.get("value"), (int, float))) \
            or (kind == BASIS and not isinstance(r.get("auto"), (int, float)))
        if bad:
            problems.append(f"{path}: override record {n} is not one `grader override` "
                            f"or `grader run` writes: {json.dumps(r)[:200]}")
    if problems:
        raise RecordError("\n".join(problems))
    return rows


def next_id(rows: list[dict]) -> str:
    return f"o{sum(1 for r in rows if r.get('kind') in (SET, ADJUST, REVOKE)) + 1}"


def active(rows: list[dict], student_id: str) -> list[dict]:
    """The student's overrides not revoked, in the order they were made."""
    revoked = {r.get("target") for r in rows if r.get("kind") == REVOKE}
    return [r for r in rows if r.get("kind") in (SET, ADJUST)
            and r.get("student_id") == student_id and r.get("id") not in revoked]


def bases(rows: list[dict]) -> dict[str, float]:
    """The automatic score the first run after each override saw under it."""
    out: dict[str, float] = {}
    for r in rows:
        if r.get("kind") == BASIS and isinstance(r.get("auto"), (int, float)):
            out.setdefault(str(r.get("target")), float(r["auto"]))
    return out


def overridden(auto: float, most: float, made: list[dict]) -> float:
    """A part's score after its overrides, in order: `set` replaces, `adjust` adds;
    kept from 0 to the part's points."""
    got = exact.units(auto, "a part's score")
    for r in made:
        value = exact.units(abs(float(r["value"])), "an override")
        value = value if float(r["value"]) >= 0 else -value
        got = value if r["kind"] == SET else got + value
    return exact.as_points(min(max(got, 0), exact.units(most, "a part's points")))


# ---- the run's last step -------------------------------------------------------------

@dataclass
class Applied:
    """What the step found for the TA: students whose hand-in time is unknown, those the
    grader could give no credit though the LMS marked them late, and overrides made on an
    automatic score that has since changed."""

    unknown: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    marked_late: list[str] = field(default_factory=list)  # late by the LMS's mark, under
    #                                 applied_by: grader: no credit (how late is unknown)


def earned_units(doc: dict) -> int:
    """The score earned before late credit: the parts (after their overrides) and the
    written marks."""
    return (sum(exact.units(float(p["score"]), "a part's score")
                for p in doc["parts"].values())
            + sum(exact.units(float(e["score"]), "a written mark")
                  for e in (doc.get("written") or {}).values()))


def apply(doc: dict, lesson: Lesson, lateness_: Lateness | None, ext: Extension | None,
          rows: list[dict], seen: dict[str, float], new_bases: list[dict],
          now: str) -> dict:
    """A student's scores.json entry as recorded: `parts` after overrides, `raw_score`
    (before overrides and credit), `score` (final), `late`, `late_status`, `extension`
    and `overrides` (never their private notes)."""
    sid = doc["student_id"]
    made = active(rows, sid)
    parts = {}
    shown = []
    for name, part in (doc.get("parts") or {}).items():
        mine = [r for r in made if r.get("part") == name]
        auto = float(part["score"])
        for r in mine:
            if r["id"] not in seen:
                seen[r["id"]] = auto
                new_bases.append({"kind": BASIS, "target": r["id"], "auto": auto,
                                  "at": now})
            shown.append({k: r.get(k) for k in ("id", "part", "kind", "value", "reason",
                                                 "by", "at")}
                         | {"auto": auto, "stale": seen[r["id"]] != auto})
        parts[name] = {**part, "score": overridden(auto, float(part["max_score"]), mine),
                       **({"auto_score": auto} if mine else {})}
    policy = lesson.late
    doc = {**doc, "raw_score": doc["score"], "parts": parts, "overrides": shown,
           "extension": ext.to_json() if ext else None}
    earned = earned_units(doc)
    if policy is None or lateness_ is None:
        return {**doc, "score": exact.as_points(earned)}
    late: dict[str, object] | None = None
    if lateness_.status == LATE:
        late = {"minutes": lateness_.minutes,
                "credit": None if lateness_.marked else lateness_.credit,
                "applied_by": policy.applied_by,
                **({"excused": True} if ext is not None and ext.excused else {})}
    final = exact.credited(earned, lateness_.credit) \
        if late is not None and policy.applied_by == "grader" and not lateness_.marked \
        else earned
    return {**doc, "score": exact.as_points(final), "late": late,
            "late_status": lateness_.status,
            "handed_in": lateness_.handed_in.isoformat() if lateness_.handed_in else None,
            **({"late_marked": True} if lateness_.marked else {}),
            "due_in_effect": lateness_.due.isoformat() if lateness_.due else None}


def apply_to_class(course, lesson_key: str, handed: dict[str, datetime | None], entries,
                   known: set[str], found: Applied, now: str, store=None,
                   language: str = "en", pages=None,
                   marked: dict[str, bool] | None = None):
    """`grader run`'s last step: each scores.json entry (bytes, as the spool keeps them)
    with the grade of record applied. Reads extensions.csv (a bad one stops the run
    before scores.json is written) and records, under each new override, the automatic
    score it was made on; never changes an override. Fills `found` for the TA. With
    `store` and `pages`, each page gets its grade-of-record section."""
    lesson = course.lesson(lesson_key)
    folder = grades_folder(course.root, lesson_key)
    extensions = read_extensions(folder, course.lms_zone(lesson_key), known)  # read now
    page = None if store is None or pages is None else (
        lambda doc: _put_on_page(store, doc, lesson, course.lms_zone(lesson_key), language,
                                 pages))
    return _applied(lesson, course.due(lesson_key), folder, handed, extensions,
                    read_overrides(folder), entries, found, now, page, marked or {})


def _applied(lesson: Lesson, due: datetime | None, folder: Path, handed, extensions,
             rows: list[dict], entries, found: Applied, now: str, page,
             marked: dict[str, bool]):
    from grader.store import dump, encode

    seen, new_bases = bases(rows), list[dict]()
    for entry in entries:
        doc = json.loads(entry)
        sid = doc["student_id"]
        ext = extensions.get(sid)
        late = lateness(lesson.late, handed.get(sid), due, ext, marked.get(sid)) \
            if lesson.late else None
        if late is not None and late.status == UNKNOWN:
            found.unknown.append(sid)
        if late is not None and late.marked and late.status == LATE \
                and lesson.late is not None and lesson.late.applied_by == "grader":
            found.marked_late.append(sid)
        doc = apply(doc, lesson, late, ext, rows, seen, new_bases, now)
        found.stale += [f"{sid} ({o['id']}, part {o['part']})"
                        for o in doc["overrides"] if o["stale"]]
        if page is not None:
            page(doc)
        yield encode(dump(doc)[:-1])
    append_jsonl(folder / OVERRIDES, new_bases)


# ---- what `grader override` and `grader history` write and read ----------------------

def new_override(folder: Path, lesson: Lesson, student_id: str, part: str, kind: str,
                 value: float, reason: str, note: str, by: str, now: str) -> dict:
    """Append one `set` or `adjust` to overrides.jsonl; a value the part cannot hold is
    refused before anything is written."""
    if part not in lesson.parts:
        raise RecordError(f"no part {part!r} (the lesson's parts: {', '.join(lesson.parts)})")
    most = lesson.parts[part].points
    if (why := exact.problem(abs(value))) is not None:
        raise RecordError(f"{value}: {why}")
    if kind == SET and not 0 <= value <= most:
        raise RecordError(f"--set {value:g} is not from 0 to part {part!r}'s {most:g} points")
    if not reason.strip():
        raise RecordError("give --reason: the student is shown it")
    rows = read_overrides(folder)
    row = {"id": next_id(rows), "kind": kind, "student_id": student_id, "part": part,
           "value": value, "reason": reason, "note": note, "by": by, "at": now}
    append_jsonl(folder / OVERRIDES, [row])
    return row


def mark_question(folder: Path, lesson: Lesson, student_id: str, question: str,
                  points: float, reason: str, by: str, now: str) -> dict:
    """A check question's mark set from `grader override --question`: a TA's mark in
    written.jsonl (its one home, as `grader mark` writes it) on the answer recorded
    now, the reason as its comment."""
    from grader.judge.written import Mark, recorded_answers

    q = lesson.written.get(question)
    if q is None or q.kind != "text":
        known = ", ".join(k for k, v in lesson.written.items() if v.kind == "text")
        raise RecordError(f"no text question {question!r} (marked by a TA: {known})")
    if not 0 <= points <= q.points or exact.problem(points) is not None:
        raise RecordError(f"--set {points:g} is not from 0 to {question}'s {q.points:g} "
                          "points in 1/1024s")
    answer = recorded_answers(folder).get((student_id, question))
    if answer is None:
        raise RecordError(f"no answer of {student_id} to {question} is recorded: run "
                          "`grader run` first")
    row = {**Mark(student_id, question, answer.digest, points=points,
                  comment=reason).to_json(), "by": by, "at": now}
    append_jsonl(folder / "written.jsonl", [row])
    return row


def revoke(folder: Path, target: str, student_id: str, reason: str, by: str,
           now: str) -> dict:
    """Append a revoke of override `target` (which stays in the file, as made)."""
    rows = read_overrides(folder)
    made = {r.get("id"): r for r in rows if r.get("kind") in (SET, ADJUST)}
    if target not in made or made[target].get("student_id") != student_id:
        raise RecordError(f"{student_id} has no override {target!r}")
    if target not in {r.get("id") for r in active(rows, student_id)}:
        raise RecordError(f"override {target} is already revoked")
    row = {"id": next_id(rows), "kind": REVOKE, "target": target, "student_id": student_id,
           "part": made[target].get("part"), "reason": reason, "by": by, "at": now}
    append_jsonl(folder / OVERRIDES, [row])
    return row


def open_requests(folder: Path) -> list[dict]:
    """Regrade requests not yet resolved, in the order they were opened."""
    rows = _read_jsonl(folder / REGRADES)
    done = {r.get("target") for r in rows if r.get("kind") == "resolve"}
    return [r for r in rows if r.get("kind") == "request" and r.get("id") not in done]


def request_regrade(folder: Path, lesson: Lesson, student_id: str, part: str, text: str,
                    by: str, now: datetime, window: tuple[datetime | None, datetime | None]
                    ) -> dict:
    """Open a request on a part (append to regrades.jsonl), inside the lesson's window."""
    opens, closes = window
    if part not in lesson.parts:
        raise RecordError(f"no part {part!r} (the lesson's parts: {', '.join(lesson.parts)})")
    if opens is not None and now < opens:
        raise RecordError(f"regrade requests open at {opens.isoformat()}")
    if closes is not None and now > closes:
        raise RecordError(f"regrade requests closed at {closes.isoformat()}")
    if not text.strip():
        raise RecordError("give the request's text")
    rows = _read_jsonl(folder / REGRADES)
    row = {"id": f"r{sum(r.get('kind') == 'request' for r in rows) + 1}", "kind": "request",
           "student_id": student_id, "part": part, "text": text, "by": by,
           "at": now.isoformat(timespec="microseconds")}
    append_jsonl(folder / REGRADES, [row])
    return row


def resolve_regrade(folder: Path, rid: str, reason: str, by: str, now: str) -> dict:
    """Close an open request (with or without an override, made by `grader override`)."""
    mine = [r for r in open_requests(folder) if r.get("id") == rid]
    if not mine:
        raise RecordError(f"no open regrade request {rid!r} (`grader regrade` lists them)")
    row = {"kind": "resolve", "target": rid, "student_id": mine[0]["student_id"],
           "part": mine[0]["part"], "reason": reason, "by": by, "at": now}
    append_jsonl(folder / REGRADES, [row])
    return row


def history(folder: Path, student_id: str | None = None) -> list[tuple[str, str, str]]:
    """The trail in time order (times to the microsecond, so a command and the run after
    it keep their order) as (when, student, what): extensions granted, overrides,
    revokes, the automatic score a run first saw under an override, regrade requests
    opened and resolved, written marks.
    Private notes are the TAs' own and are shown here, marked as such."""
    events = []
    for r in _read_jsonl(folder / EXTENSION_LOG):
        due = r.get("due")
        what = ("excused from the late rule" if due == EXCUSED else f"extension to {due}")
        was = r.get("replaced")
        events.append((str(r.get("granted_at") or ""), str(r.get("student_id")),
                       f"{what} by {r.get('granted_by')}: {r.get('reason')}"
                       + (f" (replaces: {was.get('due')})" if was else "")))
    made = {}
    for r in read_overrides(folder):
        kind = r.get("kind")
        if kind in (SET, ADJUST):
            made[r.get("id")] = r
            value = f"{float(r['value']):+g}" if kind == ADJUST else f"{float(r['value']):g}"
            what = (f"override {r['id']}: part {r.get('part')} {kind} {value} by "
                    f"{r.get('by')}: {r.get('reason')}"
                    + (f" [private note: {r['note']}]" if r.get("note") else ""))
            events.append((str(r.get("at")), str(r.get("student_id")), what))
        elif kind == REVOKE:
            events.append((str(r.get("at")), str(r.get("student_id")),
                           f"override {r.get('target')} revoked ({r.get('id')}) by "
                           f"{r.get('by')}: {r.get('reason')}"))
        elif kind == BASIS and (o := made.get(r.get("target"))):
            events.append((str(r.get("at")), str(o.get("student_id")),
                           f"run: automatic score under override {r.get('target')} "
                           f"was {float(r['auto']):g}"))
    for r in _read_jsonl(folder / REGRADES):
        what = (f"regrade request {r.get('id')} on part {r.get('part')} by {r.get('by')}: "
                f"{r.get('text')}" if r.get("kind") == "request" else
                f"regrade request {r.get('target')} resolved by {r.get('by')}: "
                f"{r.get('reason')}")
        events.append((str(r.get("at")), str(r.get("student_id")), what))
    for r in _read_jsonl(folder / "written.jsonl"):
        pts = r.get("points")
        mark = (f"{pts:g}" if isinstance(pts, (int, float))
                else "rubric " + ",".join(r.get("rubric") or []) or "cleared")
        events.append((str(r.get("at") or ""), str(r.get("student_id")),
                       f"written mark {r.get('question')}: {mark}"
                       + (f" ({r['comment']})" if r.get("comment") else "")))
    return sorted((e for e in events if student_id is None or e[1] == student_id),
                  key=lambda e: e[0])


# ---- the student's page --------------------------------------------------------------

BEGIN, END = "<!-- record -->", "<!-- /record -->"


def _shown_time(text: str | None, zone: tzinfo) -> str:
    return datetime.fromisoformat(text).astimezone(zone).strftime("%Y-%m-%d %H:%M") \
        if text else ""


def page_lines(doc: dict, lesson: Lesson, zone: tzinfo, language: str) -> dict:
    """What the page says of the grade of record, in `language`: the final score, when
    the file was handed in against the due date in effect and the credit (nothing of
    lateness when the time is unknown), who applies it, each override's value, date and
    reason. Never a TA's private note (`doc` holds none)."""
    from grader.text.shown import num
    from grader.text.strings import STRINGS

    t = STRINGS[language]
    lines = []
    ext, status = doc.get("extension"), doc.get("late_status")
    policy = lesson.late
    extended = t["record_extended"].format(by=ext["granted_by"]) \
        if ext and ext["due"] != EXCUSED else ""
    when, due = (_shown_time(doc.get("handed_in"), zone),
                 _shown_time(doc.get("due_in_effect"), zone))
    if ext and ext["due"] == EXCUSED:
        lines.append(t["record_excused"].format(by=ext["granted_by"], reason=ext["reason"]))
    elif doc.get("late_marked"):
        lines.append(t["record_marked_late" if status == LATE else "record_marked_on_time"])
    elif status == ON_TIME:
        lines.append(t["record_on_time"].format(when=when, due=due, extended=extended))
    elif status == LATE and doc.get("late"):
        late = doc["late"]
        h, m = divmod(int(late["minutes"]), 60)
        earned = earned_units(doc)
        lines.append(t["record_late"].format(
            when=when, after=t["record_hours"].format(h=h, m=m), due=due,
            extended=extended, credit=num(late["credit"]),
            before=num(exact.as_points(earned)),
            after_credit=num(exact.as_points(exact.credited(earned, late["credit"])))))
    if policy is not None and status in (ON_TIME, LATE) and not (ext and ext["due"] ==
                                                                  EXCUSED):
        lines.append(t["record_marked_no_credit"] if doc.get("late_marked") and status == LATE
                     and policy.applied_by == "grader" else t[f"record_by_{policy.applied_by}"])
    overrides = [t["record_override"].format(part=o["part"], value=num(
        doc["parts"][o["part"]]["score"]), date=_shown_time(o["at"], zone)[:10],
        reason=o["reason"]) for o in doc.get("overrides") or []]
    return {"t": t, "lines": lines, "overrides": overrides,
            "final": t["record_final"].format(score=num(doc["score"]),
                                              max_score=num(doc["max_score"]))}


def _put_on_page(store, doc: dict, lesson: Lesson, zone: tzinfo, language: str,
                 pages) -> None:
    from grader.store import write_atomic

    path = store.feedback_path(doc["student_id"])
    if not path.is_file():
        return
    section = pages.get_template("record.html.j2").render(
        **page_lines(doc, lesson, zone, language))
    write_atomic(path, with_section(path.read_text(encoding="utf-8"), section,
                                    (BEGIN, END)))


# ---- the class report ------------------------------------------------------------------

def report_rows(scores_path: Path) -> list[dict]:
    """The class report's rows of the grade of record, from scores.json: each student
    late, of unknown hand-in time (under a late rule), with an extension or with an
    override (stale ones marked); on-time students with nothing set are left out."""
    try:
        students = json.loads(scores_path.read_text(encoding="utf-8")).get("students") or []
    except (OSError, ValueError, AttributeError):
        return []
    rows = []
    for doc in students:
        if not isinstance(doc, dict):
            continue
        status, ext, made = (doc.get("late_status"), doc.get("extension"),
                             doc.get("overrides") or [])
        if status not in (LATE, UNKNOWN) and not ext and not made:
            continue
        late = doc.get("late") or {}
        rows.append({"student_id": str(doc.get("student_id")), "late_status": status or "",
                     "minutes": late.get("minutes"), "credit": late.get("credit"),
                     "applied_by": late.get("applied_by", ""),
                     "extension": (ext or {}).get("due", ""),
                     "overrides": [f"{o['id']} {o['part']} {o['kind']} {o['value']:g}"
                                   + (f" ({STALE})" if o.get("stale") else "")
                                   for o in made],
                     "score": doc.get("score"), "raw_score": doc.get("raw_score")})
    return rows
