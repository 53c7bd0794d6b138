"""The check questions as the judge marks them: the shapes question by the grader
(shapes.py), the written ones by TAs, whose marks and the class's answers live beside
course.yml in grades/<lesson>/ (never under OUT); each answer's status, and the run's
last step that puts them in scores.json and on the pages. The answers themselves are
read by intake/answers.py, never by running the student's code.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grader.config import Question, title_in
from grader.intake.answers import MAX_ANSWER, Answer, read_answers

def shapes_marks(written: dict[str, Question], answers: dict[str, Answer],
                 language: str) -> dict[str, dict]:
    """Each shapes question's mark as pages, scores.json and `grader check` show it:
    score, max_score and per field whether it is right and why not (in `language`)."""
    from grader.judge import shapes
    from grader.text.strings import in_language

    out = {}
    for qid, q in written.items():
        if q.kind != "shapes":
            continue
        answer = answers.get(qid, Answer())
        marks = shapes.mark(answer.fields or {}, q.points, q.shapes)
        out[qid] = {"score": shapes.score(marks), "max_score": q.points,
                    "given": answer.given,
                    "fields": {f: {"given": (answer.fields or {}).get(f, ""), "ok": m.ok,
                                   "score": m.score, "max_score": m.max_score,
                                   "why": in_language(m.why, language) if m.why else "",
                                   "note": in_language(m.note, language) if m.note else ""}
                               for f, m in marks.items()}}
    return out


# ---- where answers and marks live: beside course.yml, never under OUT ----------------

AUTO, MARKED, AWAITING, STALE, NO_ANSWER = "auto", "marked", "awaiting", "stale", "no_answer"


def grades_folder(course_root: Path, lesson_key: str) -> Path:
    """grades/<lesson>/ beside course.yml: a new OUT or `--force` cannot lose a mark."""
    return course_root / "grades" / lesson_key


def _read_jsonl(path: Path) -> list[dict]:
    """Every whole line that is a JSON object (a line torn by a killed writer is skipped:
    only the last line can be, and the mark it held was never confirmed as saved)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def append_jsonl(path: Path, rows: list[dict]) -> None:
    """Appended in one write under an exclusive lock, flushed to disk before returning: a
    mark is saved as made, and two writers (the marking page's two tabs, `grader mark
    --import` beside it) never interleave their lines. The last line wins (`latest`)."""
    import fcntl
    import os

    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                   for r in rows).encode("utf-8", "replace")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            blob = b"\n" + blob  # a torn last line (a writer killed mid-line) ends here
        view = memoryview(blob)
        while view:  # one write(2) for any mark; a short write goes on where it stopped
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)  # (releases the lock)


def latest(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """The last row per (student_id, question): later lines supersede earlier ones."""
    out = {}
    for r in rows:
        if isinstance(r.get("student_id"), str) and isinstance(r.get("question"), str):
            out[(r["student_id"], r["question"])] = r
    return out


def recorded_answers(folder: Path) -> dict[tuple[str, str], Answer]:
    return {k: Answer.from_json(r.get("answer") or {})
            for k, r in latest(_read_jsonl(folder / "answers.jsonl")).items()}


def record_answers(folder: Path, found: dict[str, dict[str, Answer]]) -> None:
    """Append each answer that differs from the one last recorded for that student and
    question (a rerun over the same class appends nothing)."""
    known = recorded_answers(folder)
    rows = [{"student_id": sid, "question": qid, "hash": a.digest, "answer": a.to_json()}
            for sid, answers in sorted(found.items()) for qid, a in answers.items()
            if (old := known.get((sid, qid))) is None or old.digest != a.digest
            or old.problem != a.problem]
    append_jsonl(folder / "answers.jsonl", rows)


@dataclass
class Mark:
    """A TA's mark on one answer (grades/<lesson>/written.jsonl): `hash` is the answer it
    was made on; `points` given, else the applied rubric items' sum plus `adjust`."""

    student_id: str
    question: str
    hash: str
    points: float | None = None
    rubric: tuple[str, ...] = ()
    adjust: float = 0.0
    comment: str = ""
    cleared: bool = False

    def to_json(self) -> dict:
        return {"student_id": self.student_id, "question": self.question,
                "hash": self.hash, "points": self.points, "rubric": list(self.rubric),
                "adjust": self.adjust, "comment": self.comment, "cleared": self.cleared}

    @classmethod
    def from_json(cls, d: dict) -> Mark:
        pts = d.get("points")
        return cls(str(d["student_id"]), str(d["question"]), str(d.get("hash") or ""),
                   float(pts) if isinstance(pts, (int, float)) else None,
                   tuple(str(r) for r in d.get("rubric") or []),
                   float(d.get("adjust") or 0.0), str(d.get("comment") or ""),
                   bool(d.get("cleared")))

    @property
    def counts(self) -> bool:
        """A mark, not a comment alone: points given, a rubric item or an adjustment."""
        return self.points is not None or bool(self.rubric) or bool(self.adjust)

    def value(self, q: Question) -> float:
        """The mark in whole units (points.py's one rounding), from 0 to the question's
        points."""
        from grader import points as exact

        if self.points is not None:
            got = exact.units(self.points, "a mark")
        else:
            items = {r.id: r for r in q.rubric}
            got = sum(exact.units(items[i].points, "a rubric item")
                      for i in self.rubric if i in items)
            got += exact.units(abs(self.adjust), "an adjustment") * (1 if self.adjust >= 0
                                                                     else -1)
        return exact.as_points(min(max(got, 0), exact.units(q.points, "a question")))


def marks(folder: Path) -> dict[tuple[str, str], Mark]:
    """Each answer's current mark; a cleared one is no mark."""
    out = {}
    for k, r in latest(_read_jsonl(folder / "written.jsonl")).items():
        try:
            m = Mark.from_json(r)
        except (KeyError, TypeError, ValueError):
            continue
        if not m.cleared:
            out[k] = m
    return out


RUBRIC = "rubric.jsonl"  # the TAs' changes to rubric items' points (the marking page)


def rubric_changes(folder: Path) -> dict[tuple[str, str], float]:
    """Each rubric item's points as a TA last set them on the marking page, by (question,
    item): grades/<lesson>/rubric.jsonl, appended as written.jsonl is. course.yml stays
    the instructor's: it gives the items and their first points; a change made while
    marking is the TAs' decision and lives with their marks."""
    from grader import points as exact

    out = {}
    for r in _read_jsonl(folder / RUBRIC):
        qid, item, pts = r.get("question"), r.get("item"), r.get("points")
        if isinstance(qid, str) and isinstance(item, str) and \
                isinstance(pts, (int, float)) and not isinstance(pts, bool) and \
                pts >= 0 and exact.problem(float(pts)) is None:
            out[(qid, item)] = float(pts)
    return out


SPLITS = "splits.jsonl"  # the answers a TA split from their group (the marking page)


def splits(folder: Path) -> set[tuple[str, str, str]]:
    """(student_id, question, answer hash) of every answer a TA split from its group on
    the marking page: grades/<lesson>/splits.jsonl, appended as written.jsonl is, so a
    split holds after a reload or a restart and for every TA. It names the answer it was
    made on: a changed answer groups by its text again."""
    return {(r["student_id"], r["question"], r["hash"]) for r in _read_jsonl(folder / SPLITS)
            if all(isinstance(r.get(k), str) for k in ("student_id", "question", "hash"))}


def as_marked(written: dict[str, Question], folder: Path) -> dict[str, Question]:
    """The questions with each rubric item worth what the TAs last set (`rubric_changes`),
    else course.yml's points: a mark keeps the items' ids, never their points, so a change
    reaches every mark that applies the item."""
    changed = rubric_changes(folder)
    if not changed:
        return written
    return {qid: q.model_copy(update={"rubric": [
        r.model_copy(update={"points": changed[(qid, r.id)]}) if (qid, r.id) in changed
        else r for r in q.rubric]}) for qid, q in written.items()}


def report_rows(written: dict[str, Question], folder: Path, scores_path: Path) -> list[dict]:
    """The class report's check questions: per question how many students are in each
    status, the distribution of the counted marks (marked and auto), and how often each
    rubric item is applied in the marks that count (scores.json's `written` map, the
    marks in written.jsonl)."""
    from collections import Counter

    try:
        students = json.loads(scores_path.read_text(encoding="utf-8")).get("students") or []
    except (OSError, ValueError, AttributeError):
        return []
    questions, current = as_marked(written, folder), marks(folder)
    rows = []
    for qid, q in questions.items():
        statuses: Counter[str] = Counter()
        scores: Counter[float] = Counter()
        used: Counter[str] = Counter()
        for doc in students:
            e = ((doc.get("written") or {}) if isinstance(doc, dict) else {}).get(qid)
            if not isinstance(e, dict):
                continue
            statuses[str(e.get("status"))] += 1
            if e.get("status") in (AUTO, MARKED):
                scores[float(e.get("score") or 0.0)] += 1
            m = current.get((str(doc.get("student_id")), qid))
            if e.get("status") == MARKED and m is not None:
                used.update(m.rubric)
        counted = sum(scores.values())
        rows.append({"id": qid, "title": q.title, "title_zh": q.title_zh, "kind": q.kind,
                     "max_score": q.points, "statuses": dict(sorted(statuses.items())),
                     "counted": counted,
                     "distribution": [{"score": s, "n": n, "rate": n / counted}
                                      for s, n in sorted(scores.items())],
                     "rubric": [{"id": r.id, "points": r.points, "description": r.description,
                                 "description_zh": r.description_zh, "used": used[r.id],
                                 "rate": used[r.id] / statuses[MARKED]
                                 if statuses[MARKED] else 0.0} for r in q.rubric]})
    return rows


def graded_written(written: dict[str, Question], answers: dict[str, Answer],
                   marked: dict[str, Mark], language: str) -> dict[str, dict]:
    """A student's `written` map as scores.json keeps it: per question score, max_score
    and status. A TA's mark counts only on the answer it was made on: made on another,
    it is `stale`, kept and shown, worth 0 until the TA marks it again."""
    auto = shapes_marks(written, answers, language)
    out = {}
    for qid, q in written.items():
        a = answers.get(qid, Answer())
        entry: dict = {"max_score": q.points}
        if q.kind == "shapes":
            entry.update(score=auto[qid]["score"], status=AUTO if a.given else NO_ANSWER,
                         fields=auto[qid]["fields"])
        else:
            m = marked.get(qid)
            if m is not None and not m.counts:
                m = None  # a comment alone is no mark yet
            if m is not None and m.hash != a.digest:
                entry.update(score=0.0, status=STALE)
            elif m is not None:
                entry.update(score=m.value(q), status=MARKED, rubric=list(m.rubric),
                             comment=m.comment)
            else:
                entry.update(score=0.0, status=AWAITING if a.given else NO_ANSWER)
            if m is not None:
                entry["mark"] = m.to_json()
            elif (qid in marked) and marked[qid].comment:
                entry["comment"] = marked[qid].comment
        entry["answer"] = a.to_json()
        out[qid] = entry
    return out


def total(entries: dict[str, dict]) -> float:
    from grader import points as exact

    return exact.as_points(sum(exact.units(e["score"], "a written mark")
                               for e in entries.values()))


def page_section(lesson_questions: dict[str, Question], entries: dict[str, dict],
                 language: str, pages) -> str:
    """The check questions on a student's page: answers escaped and capped, marks,
    rubric items applied, the TA's comment, "awaiting a TA" until marked. Rubric
    notes (model answers) are never shown."""
    from grader.text.strings import STRINGS, in_language

    t = STRINGS[language]
    zh = language == "zh"
    questions = []
    for qid, q in lesson_questions.items():
        e = entries[qid]
        a = Answer.from_json(e.get("answer") or {})
        applied = set(e.get("rubric") or [])
        questions.append({
            "id": qid, "title": title_in(q, language),
            "text": q.text_zh if zh and q.text_zh else q.text, "status": e["status"],
            "score": e["score"], "max_score": e["max_score"], "given": a.given,
            "answer": a.text, "problem": t["written_problem"].format(why=a.problem)
            if a.problem else "",
            "cut": t["written_cut"].format(n=MAX_ANSWER) if a.cut else "",
            "fields": [{"name": f, **m} for f, m in (e.get("fields") or {}).items()]
            if a.given or a.problem else [],
            "rubric": [{"applied": r.id in applied, "points": r.points,
                        "description": in_language(
                            {"en": r.description, "zh": r.description_zh}, language)}
                       for r in q.rubric] if e["status"] == MARKED else [],
            "comment": e.get("comment") or ""})
    return pages.get_template("written.html.j2").render(
        t=t, questions=questions, score=total(entries),
        max_score=sum(q.points for q in lesson_questions.values()))


BEGIN, END = "<!-- written -->", "<!-- /written -->"


def with_section(page: str, section: str, marks: tuple[str, str] = (BEGIN, END)) -> str:
    """The page with a section between `marks` (the check questions' by default) put in
    (or replaced), before </main>."""
    begin, end = marks
    block = f"{begin}\n{section}\n{end}\n"
    if begin in page and end in page:
        head, rest = page.split(begin, 1)
        return head + block + rest.split(end, 1)[1].lstrip("\n")
    at = page.rfind("</main>")
    return page[:at] + block + page[at:] if at >= 0 else page + block


LEAN_KEYS = ("score", "max_score", "status")  # what scores.json keeps of each question


def apply_to_class(course, lesson_key: str, paths: dict[str, Path | None],
                   entries, store, language: str, pages):
    """`grader run`'s last step for a lesson with check questions: read and record each
    student's answers (beside course.yml), mark them (shapes now, text from the TAs'
    marks), put the written map into each scores.json entry (its score and max_score
    include the written points) and the section into each page. Yields the entries."""
    from grader import points as exact
    from grader.store import dump, encode, write_atomic

    lesson = course.lesson(lesson_key)
    folder = grades_folder(course.root, lesson_key)
    found = {sid: read_answers(p, lesson.written) for sid, p in paths.items()}
    record_answers(folder, found)
    marked = marks(folder)
    questions = as_marked(lesson.written, folder)
    for entry in entries:
        doc = json.loads(entry)
        sid = doc["student_id"]
        answers = found.get(sid) or read_answers(None, lesson.written)
        full = graded_written(questions, answers,
                              {q: m for (s, q), m in marked.items() if s == sid}, language)
        doc["written"] = {q: {k: e[k] for k in LEAN_KEYS} for q, e in full.items()}
        doc["score"] = exact.as_points(exact.units(doc["score"], "a score")
                                       + exact.units(total(full), "a written total"))
        doc["max_score"] = exact.as_points(exact.units(doc["max_score"], "a maximum")
                                           + exact.units(lesson.written_points, "written"))
        page = store.feedback_path(sid)
        if page.is_file():
            write_atomic(page, with_section(page.read_text(encoding="utf-8"),
                                            page_section(questions, full, language,
                                                         pages)))
        yield encode(dump(doc)[:-1])
