"""`grader mark --lesson L`: the marking page, served from the TA's machine.

It reads and writes only grades/<lesson>/ beside course.yml (the answers `grader run`
recorded, the TAs' marks), so it needs no OUT. It grades one question at a time across
the class: identical answers (whitespace and case aside) form one group that one mark
grades, in an order shuffled once and the same on every load, names hidden until asked.
A group split into its answers stays split (splits.jsonl, beside the marks).

Nothing lives in the server: every request reads the files again and every mark is
appended to written.jsonl the moment it is made (judge/written.py `append_jsonl`: one
locked write), so a killed server loses nothing and two tabs see each other's marks;
the last mark saved for a student's answer wins. A mark names the answer it was made on
(its hash): a mark sent for an answer that has changed since the page showed it is
refused, and a mark on a changed answer is shown as stale for review.

The server is bound to 127.0.0.1 and answers only requests that carry its random token
(in the address it prints) and name it by that address (no other site's page, nor a
name rebound to 127.0.0.1, can reach it). Answers are student text: the page builds its
DOM with textContent only, and its data travels as JSON.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from grader import points as exact
from grader.config import Course, Lesson, Question, title_in
from grader.judge.written import (RUBRIC, SPLITS, Mark, append_jsonl, as_marked, grades_folder,
                                  marks, recorded_answers, splits)
from grader.pages.feedback import course_title, lesson_title, templates
from grader.text.strings import STRINGS

HOST = "127.0.0.1"
MAX_BODY = 1 << 20       # bytes of a request's JSON (a mark is a few hundred)
MAX_COMMENT = 5_000      # characters of a TA's comment


class Refused(ValueError):
    """A request the page should not have sent (the message says why): 400 or 409."""

    def __init__(self, why: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST):
        super().__init__(why)
        self.status = status


def normalised(text: str) -> str:
    """What makes two answers one group: the same words, whitespace and case aside."""
    return " ".join(text.split()).casefold()


def _order(lesson_key: str, qid: str, norm: str) -> str:
    """A group's place: shuffled (not by student, not by answer), the same on every load
    and for every TA, so "the next one" means the same answer in two tabs."""
    return hashlib.sha256(f"{lesson_key}\0{qid}\0{norm}".encode("utf-8", "replace")).hexdigest()


def _mark_json(m: Mark, q: Question) -> dict:
    return {"points": m.points, "rubric": list(m.rubric), "adjust": m.adjust,
            "comment": m.comment, "value": m.value(q)}


def question_view(course_root: Path, lesson_key: str, lesson: Lesson, qid: str) -> dict:
    """One text question as the page shows it: its rubric (with the points the TAs set),
    the groups of identical answers in their stable order, each with its members, their
    answers' hashes and their mark, and how many of the answered students are marked. An
    answer split from its group (`save_split`) is a group of its own."""
    folder = grades_folder(course_root, lesson_key)
    q = as_marked(lesson.written, folder)[qid]
    current = marks(folder)
    apart = splits(folder)
    groups: dict[tuple[str, str], dict] = {}
    answered = done = 0
    for (sid, aq), a in sorted(recorded_answers(folder).items()):
        if aq != qid or not a.given:
            continue
        answered += 1
        m = current.get((sid, qid))
        stale = m is not None and m.hash != a.digest
        done += m is not None and m.counts and not stale
        # members stay one group while their marks agree: marking a split-off member
        # differently keeps it apart
        said = "" if m is None else json.dumps([stale, m.points, m.rubric, m.adjust,
                                                m.comment])
        if (sid, qid, a.digest) in apart:  # split off: its own group, marked or not
            said = json.dumps([said, sid])
        norm = normalised(a.text)
        g = groups.setdefault((norm, said), {
            "id": hashlib.sha256(f"{norm}\0{said}".encode("utf-8", "replace")).hexdigest()[:16],
            "order": _order(lesson_key, qid, norm), "answer": a.text, "cut": a.cut,
            "members": [], "stale": stale,
            "mark": _mark_json(m, q) if m is not None else None,
            "marked": m is not None and m.counts and not stale})
        g["members"].append({"student_id": sid, "hash": a.digest})
    ordered = sorted(groups.values(), key=lambda g: (g["order"], g["members"][0]["student_id"]))
    configured = {r.id: r.points for r in lesson.written[qid].rubric}
    return {"question": qid, "title": q.title, "title_zh": q.title_zh, "text": q.text,
            "text_zh": q.text_zh, "max_score": q.points, "answered": answered,
            "marked": done,
            "rubric": [{"id": r.id, "points": r.points, "course_points": configured[r.id],
                        "description": r.description, "description_zh": r.description_zh,
                        "note": r.note} for r in q.rubric],
            "groups": [{k: v for k, v in g.items() if k != "order"} for g in ordered]}


def _adjustment(value: object, q: Question) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Refused("the adjustment is not a number")
    if exact.problem(float(value)) is not None or abs(value) > q.points:
        raise Refused(f"the adjustment {value:g} is not a multiple of 1/1024 within "
                      f"±{q.points:g}")
    return float(value)


def _named(lesson_key: str, lesson: Lesson, body: dict) -> tuple[str, dict[str, str]]:
    """The text question a request names, and its students as {student_id: answer hash}."""
    qid = body.get("question")
    q = lesson.written.get(qid) if isinstance(qid, str) else None
    if q is None or q.kind != "text" or not isinstance(qid, str):
        raise Refused(f"{qid!r} is not a text question of lesson {lesson_key}")
    students = body.get("students")
    if not isinstance(students, dict) or not students or \
            not all(isinstance(k, str) and isinstance(v, str) for k, v in students.items()):
        raise Refused("no students named, as {student_id: answer hash}")
    return qid, students


def _unchanged(folder: Path, qid: str, students: dict[str, str]) -> None:
    """Refuse (409) when an answer named is no longer the one the page showed."""
    answers = recorded_answers(folder)
    changed = sorted(sid for sid, h in students.items()
                     if (a := answers.get((sid, qid))) is None or a.digest != h)
    if changed:
        raise Refused(f"the answer of {len(changed)} student(s) changed since the page "
                      "showed it: nothing saved, the page shows the new answers",
                      HTTPStatus.CONFLICT)


def save_mark(course_root: Path, lesson_key: str, lesson: Lesson, body: dict, by: str
              ) -> int:
    """Append one mark per student the request names (a group's members), each on the
    answer hash the page showed; refused whole if any of those answers changed since.
    Returns how many marks were written."""
    qid, students = _named(lesson_key, lesson, body)
    q = lesson.written[qid]
    rubric = body.get("rubric") or []
    known = [r.id for r in q.rubric]
    if not isinstance(rubric, list) or any(i not in known for i in rubric):
        raise Refused(f"rubric items must be among {', '.join(known)}")
    rubric = [i for i in known if i in rubric]  # the rubric's order, each once
    adjust = _adjustment(body.get("adjust") or 0, q)
    points = body.get("points")
    if points is not None:
        if not isinstance(points, (int, float)) or isinstance(points, bool) or \
                exact.problem(float(points)) is not None or not 0 <= points <= q.points:
            raise Refused(f"points must be a multiple of 1/1024 from 0 to {q.points:g}")
        points = float(points)
    comment = body.get("comment") or ""
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT:
        raise Refused(f"the comment is not text of at most {MAX_COMMENT} characters")
    folder = grades_folder(course_root, lesson_key)
    _unchanged(folder, qid, students)
    cleared = points is None and not rubric and not adjust and not comment
    at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    rows = [{**Mark(sid, qid, h, points, tuple(rubric), adjust, comment.strip(),
                    cleared).to_json(), "by": by, "at": at}
            for sid, h in sorted(students.items())]
    append_jsonl(folder / "written.jsonl", rows)
    return len(rows)


def save_split(course_root: Path, lesson_key: str, lesson: Lesson, body: dict, by: str
               ) -> int:
    """Split a group: each answer the request names (student and the hash the page
    showed) is appended to grades/<lesson>/splits.jsonl and is from now on a group of
    its own, for every TA. Refused whole if any of those answers changed since. Returns
    how many answers were split off."""
    qid, students = _named(lesson_key, lesson, body)
    folder = grades_folder(course_root, lesson_key)
    _unchanged(folder, qid, students)
    at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    rows = [{"student_id": sid, "question": qid, "hash": h, "by": by, "at": at}
            for sid, h in sorted(students.items())]
    append_jsonl(folder / SPLITS, rows)
    return len(rows)


def save_rubric_points(course_root: Path, lesson_key: str, lesson: Lesson, body: dict,
                       by: str) -> None:
    """A rubric item's new points, appended to grades/<lesson>/rubric.jsonl: every mark
    that applies the item is worth them from now on (marks keep the item, not its points)."""
    qid, item, pts = body.get("question"), body.get("item"), body.get("points")
    q = lesson.written.get(qid) if isinstance(qid, str) else None
    if q is None or q.kind != "text" or item not in {r.id for r in q.rubric}:
        raise Refused(f"no rubric item {item!r} in question {qid!r}")
    if not isinstance(pts, (int, float)) or isinstance(pts, bool) or \
            exact.problem(float(pts)) is not None or not 0 <= pts <= q.points:
        raise Refused(f"an item's points are a multiple of 1/1024 from 0 to {q.points:g}")
    was = {r.id: r.points for r in q.rubric}[item]
    append_jsonl(grades_folder(course_root, lesson_key) / RUBRIC,
                 [{"question": qid, "item": item, "points": float(pts), "course_points": was,
                   "by": by, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}])


@dataclass
class Marking:
    """What the server knows: the course, the lesson, its token and the page's language."""

    course: Course
    lesson_key: str
    token: str
    language: str
    by: str

    @property
    def lesson(self) -> Lesson:
        return self.course.lesson(self.lesson_key)

    @property
    def questions(self) -> list[str]:
        return [k for k, q in self.lesson.written.items() if q.kind == "text"]

    def page(self, qid: str, nonce: str) -> str:
        t = STRINGS[self.language]
        zh = self.language == "zh"
        return templates().get_template("marking.html.j2").render(
            t={k: v for k, v in t.items() if k.startswith("mark_") or k in ("colon",)},
            lang=self.language, nonce=nonce,
            course_title=course_title(self.course, self.language),
            lesson_title=lesson_title(self.course, self.lesson_key, self.language),
            lesson_key=self.lesson_key, question=qid,
            questions=[{"id": k, "title": title_in(q, self.language)}
                       for k, q in self.lesson.written.items() if q.kind == "text"],
            config={"token": self.token, "question": qid, "zh": zh})


def make_handler(state: Marking) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "grader-mark"
        sys_version = ""

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: a request line would print the token to the terminal's scrollback."""

        def _allowed(self) -> dict[str, list[str]] | None:
            """The query, if the request carries the token and names this server by its
            own address (127.0.0.1:port); None after answering 403."""
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            port = self.server.server_address[1]  # type: ignore[index]  # (host, port)
            host_ok = self.headers.get("Host") in (f"{HOST}:{port}", f"localhost:{port}")
            given = (query.get("token") or [""])[0]
            if not host_ok or not secrets.compare_digest(given.encode(), state.token.encode()):
                self._send(HTTPStatus.FORBIDDEN, "text/plain; charset=utf-8",
                           b"refused: open the address `grader mark` printed (with its "
                           b"token)\n")
                return None
            return query

        def _send(self, status: HTTPStatus, kind: str, body: bytes, nonce: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Content-Security-Policy",
                             "default-src 'none'; style-src 'unsafe-inline'; "
                             "connect-src 'self'; base-uri 'none'; form-action 'none'"
                             + (f"; script-src 'nonce-{nonce}'" if nonce else ""))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, doc: object) -> None:
            self._send(status, "application/json; charset=utf-8",
                       json.dumps(doc, ensure_ascii=False).encode("utf-8", "replace"))

        def do_GET(self) -> None:
            query = self._allowed()
            if query is None:
                return
            qid = (query.get("q") or [state.questions[0]])[0]
            if qid not in state.questions:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no text question {qid!r}"})
                return
            path = urlsplit(self.path).path
            if path == "/":
                nonce = secrets.token_urlsafe(16)
                self._send(HTTPStatus.OK, "text/html; charset=utf-8",
                           state.page(qid, nonce).encode("utf-8", "replace"), nonce)
            elif path == "/api/question":
                self._json(HTTPStatus.OK, question_view(state.course.root, state.lesson_key,
                                                        state.lesson, qid))
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}"})

        def do_POST(self) -> None:
            if self._allowed() is None:
                return
            path = urlsplit(self.path).path
            size = int(self.headers.get("Content-Length") or 0)
            if not self.headers.get("Content-Type", "").startswith("application/json") \
                    or not 0 < size <= MAX_BODY:
                self._json(HTTPStatus.BAD_REQUEST, {"error": "send JSON (at most 1 MiB)"})
                return
            try:
                body = json.loads(self.rfile.read(size))
                if not isinstance(body, dict):
                    raise Refused("send a JSON object")
                if path == "/api/mark":
                    saved = save_mark(state.course.root, state.lesson_key, state.lesson,
                                      body, state.by)
                elif path == "/api/split":
                    saved = save_split(state.course.root, state.lesson_key, state.lesson,
                                       body, state.by)
                elif path == "/api/rubric":
                    save_rubric_points(state.course.root, state.lesson_key, state.lesson,
                                       body, state.by)
                    saved = 1
                else:
                    raise Refused(f"no action {path}", HTTPStatus.NOT_FOUND)
            except Refused as exc:
                self._json(exc.status, {"error": str(exc)})
                return
            except ValueError:
                self._json(HTTPStatus.BAD_REQUEST, {"error": "the body is not JSON"})
                return
            self._json(HTTPStatus.OK, {"saved": saved})

    return Handler


def serve(course: Course, lesson_key: str, language: str, port: int = 0
          ) -> tuple[ThreadingHTTPServer, str]:
    """The marking server, bound to 127.0.0.1 (`port` 0: any free one), and its address
    with the token; the caller runs `serve_forever`."""
    state = Marking(course, lesson_key, secrets.token_urlsafe(24), language,
                    getpass.getuser())
    server = ThreadingHTTPServer((HOST, port), make_handler(state))
    server.daemon_threads = True
    return server, f"http://{HOST}:{server.server_address[1]}/?token={state.token}"
