"""The check questions' answers, read from a student's file on the trusted side.

A `.py` answers with module-level literals, `ANSWER_Q1` a triple-quoted string (and
`ANSWER_Q6 = {"x_flat": "…", …}` for a shapes question), found with `ast` and read with
`ast.literal_eval`: nothing the student wrote is imported or run to read them. A
notebook answers in a markdown cell whose first line names the question
(`ANSWER_Q3`, `## ANSWER_Q3`), or with the same literals in a code cell. An answer left
as the stub's placeholder, empty or blank is no answer, never a mark of 0.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.capped import MAX_FILE, MAX_SOURCE, read_capped
from grader.config import SHAPE_FIELDS, Question

PLACEHOLDER = "YOUR ANSWER HERE"   # a text answer in the stub, as nbgrader writes it
MAX_ANSWER = 20_000                 # characters of an answer kept (pages, CSV, record)
_NAME = re.compile(r"^ANSWER_Q([1-9][0-9]*)$")
_MARKED = re.compile(r"^\s*#*\s*ANSWER_Q([1-9][0-9]*)\b\s*:?\s*$")
_FIELD = re.compile(r"^\s*[-*]?\s*`?(\w+)`?(?:\.shape)?\s*[:=]\s*(.*?)\s*$")


@dataclass
class Answer:
    """One question's answer: `text` (a text question) or `fields` (a shapes question),
    `cut` when more than MAX_ANSWER characters were handed in; `problem` when the file
    gave something that is not an answer (the page says it)."""

    text: str = ""
    fields: dict[str, str] | None = None
    cut: bool = False
    problem: str = ""
    digest: str = ""   # of the whole answer as handed in, before any cut

    @property
    def given(self) -> bool:
        if self.fields is not None:
            return any(v.strip() for v in self.fields.values())
        return bool(self.text.strip()) and self.text.strip() != PLACEHOLDER

    def to_json(self) -> dict:
        return {"text": self.text, **({"fields": self.fields} if self.fields is not None
                                      else {}),
                "cut": self.cut, "problem": self.problem, "hash": self.digest}

    @classmethod
    def from_json(cls, d: dict) -> Answer:
        fields = d.get("fields")
        return cls(str(d.get("text") or ""),
                   {str(k): str(v) for k, v in fields.items()} if isinstance(fields, dict)
                   else None, bool(d.get("cut")), str(d.get("problem") or ""),
                   str(d.get("hash") or ""))


def digest(value: object) -> str:
    """The hash a mark is made on: the whole answer, so a changed one makes it stale."""
    blob = json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8", "replace")
    return hashlib.sha256(blob).hexdigest()[:16]


def _capped(text: str) -> tuple[str, bool]:
    return (text[:MAX_ANSWER], True) if len(text) > MAX_ANSWER else (text, False)


def _text_answer(value: object) -> Answer:
    if not isinstance(value, str):
        return Answer(problem=f"not a string but a {type(value).__name__}")
    text, cut = _capped(value)
    return Answer(text=text, cut=cut, digest=digest(value))


def _shapes_answer(value: object) -> Answer:
    if isinstance(value, str):  # a notebook's markdown, or a string instead of the dict
        value = _fields_of_text(value)
    if not isinstance(value, dict):
        return Answer(problem=f"not a dict of the five fields but a {type(value).__name__}")
    fields = {f: str(value.get(f, ""))[:MAX_ANSWER] for f in SHAPE_FIELDS}
    extra = sorted(str(k) for k in value if k not in SHAPE_FIELDS)
    problem = f"fields the question does not ask for: {', '.join(extra)}" if extra else ""
    whole = {f: str(value.get(f, "")) for f in SHAPE_FIELDS}
    return Answer(fields=fields, problem=problem, digest=digest(whole),
                  cut=any(len(v) > MAX_ANSWER for v in whole.values()))


def _fields_of_text(text: str) -> dict[str, str]:
    """`x_flat: [N, H]` lines (a notebook's markdown) as fields; other lines ignored."""
    found = {}
    for line in text.splitlines():
        m = _FIELD.match(line)
        if m and m[1] in SHAPE_FIELDS:
            found[m[1]] = m[2].strip("`")
    return found


class Unparsed:
    """The whole file is no Python: none of its answers can be read."""


def _literals(source: str) -> dict[str, object]:
    """ANSWER_Qn's value at module level, the last assignment winning, as Python would;
    a value that is not a literal is kept as the reason it cannot be read."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {"*": Unparsed()}
    found: dict[str, object] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        for target in targets:
            if isinstance(target, ast.Name) and (m := _NAME.match(target.id)):
                try:
                    found[f"q{m[1]}"] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    found[f"q{m[1]}"] = _NotLiteral()
    return found


class _NotLiteral:
    """An ANSWER_Qn the grader would have to run to know (a call, a name, an f-string)."""


def markdown_answers(path: Path) -> dict[str, str]:
    """A notebook's answers in marked markdown cells, which notebook.py appends to the
    Python file it grades as ANSWER_Qn literals (so the run reads them as a .py's)."""
    try:
        data, size = read_capped(path, MAX_FILE)
    except OSError:
        return {}
    found = _notebook_answers(data, markdown_only=True) if size <= MAX_FILE else {}
    return {k: v for k, v in found.items() if isinstance(v, str)}


def _notebook_answers(data: bytes, markdown_only: bool = False) -> dict[str, object]:
    try:
        nb = json.loads(data.decode("utf-8-sig"))
        cells = nb["cells"] if isinstance(nb, dict) else []
    except (ValueError, KeyError, RecursionError):
        return {}
    found: dict[str, object] = {}
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict):
            continue
        src = cell.get("source", "")
        src = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) \
            else src if isinstance(src, str) else ""
        if cell.get("cell_type") == "code" and not markdown_only:
            found.update({k: v for k, v in _literals(src).items() if k != "*"})
        elif cell.get("cell_type") == "markdown":
            first, _, rest = src.partition("\n")
            if m := _MARKED.match(first):
                found[f"q{m[1]}"] = rest.strip("\n")
    return found


def read_answers(path: Path | None, written: dict[str, Question]) -> dict[str, Answer]:
    """Each question's answer in the handed-in file (`.py` or `.ipynb`); a question the
    file does not answer is `Answer()`, no answer."""
    found: dict[str, object] = {}
    if path is not None:
        cap = MAX_FILE if path.suffix == ".ipynb" else MAX_SOURCE
        try:
            data, size = read_capped(path, cap)
        except OSError:
            data, size = b"", 0
        if size <= cap and data:
            if path.suffix == ".ipynb":
                found = _notebook_answers(data)
            else:
                found = _literals(data.decode("utf-8", "replace"))
    answers = {}
    for qid, q in written.items():
        value = found.get(qid)
        if "*" in found:
            answers[qid] = Answer(problem="your file does not parse as Python, so no "
                                  "answer in it could be read")
        elif value is None:
            answers[qid] = Answer()
        elif isinstance(value, _NotLiteral):
            answers[qid] = Answer(problem=f"ANSWER_{qid.upper()} is not a literal the "
                                  "grader can read without running your code (write the "
                                  "text itself, in quotes)")
        else:
            answers[qid] = (_shapes_answer if q.kind == "shapes" else _text_answer)(value)
    return answers


def stub_section(written: dict[str, Question]) -> str:
    """The questions as `grader release` appends them to the stub, after the code."""
    if not written:
        return ""
    out = ["\n\n# " + "-" * 76,
           "# Check questions (the lesson's §8). Answer each in its string, in English or",
           "# Chinese; leave the code above as it is. A TA marks the written answers; the",
           "# shapes question is marked by the grader (`grader check` shows it).",
           "# 本节检查：在下面的字符串里作答（中英文均可）。",
           "# " + "-" * 76]
    for qid, q in written.items():
        out.append("")
        out.append(f"# {qid} ({q.points:g} points): {q.text}")
        if q.text_zh:
            out.append(f"# {qid}（{q.points:g} 分）：{q.text_zh}")
        name = f"ANSWER_{qid.upper()}"
        if q.kind == "shapes":
            out.append(f"{name} = {{")
            out += [f'    "{f}": "",' for f in SHAPE_FIELDS]
            out.append("}")
        else:
            out.append(f'{name} = """{PLACEHOLDER}"""')
    return "\n".join(out) + "\n"


def shapes_marks(written: dict[str, Question], answers: dict[str, Answer],
                 language: str) -> dict[str, dict]:
    """Each shapes question's mark as pages, scores.json and `grader check` show it:
    score, max_score and per field whether it is right and why not (in `language`)."""
    from grader import shapes
    from grader.strings import in_language

    out = {}
    for qid, q in written.items():
        if q.kind != "shapes":
            continue
        answer = answers.get(qid, Answer())
        marks = shapes.mark(answer.fields or {}, q.points)
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
    """Appended in one write, flushed to disk before returning: a mark is saved as made."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    with open(path, "a", encoding="utf-8") as f:
        f.write(blob)
        f.flush()
        import os

        os.fsync(f.fileno())


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
            if m is not None and m.points is None and not m.rubric:
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
    from grader.strings import STRINGS, in_language

    t = STRINGS[language]
    zh = language == "zh"
    questions = []
    for qid, q in lesson_questions.items():
        e = entries[qid]
        a = Answer.from_json(e.get("answer") or {})
        applied = set(e.get("rubric") or [])
        questions.append({
            "id": qid, "title": q.title_zh if zh and q.title_zh else q.title,
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


def with_section(page: str, section: str) -> str:
    """The page with its check-questions section put in (or replaced), before </main>."""
    block = f"{BEGIN}\n{section}\n{END}\n"
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1].lstrip("\n")
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
    for entry in entries:
        doc = json.loads(entry)
        sid = doc["student_id"]
        answers = found.get(sid) or read_answers(None, lesson.written)
        full = graded_written(lesson.written, answers,
                              {q: m for (s, q), m in marked.items() if s == sid}, language)
        doc["written"] = {q: {k: e[k] for k in LEAN_KEYS} for q, e in full.items()}
        doc["score"] = exact.as_points(exact.units(doc["score"], "a score")
                                       + exact.units(total(full), "a written total"))
        doc["max_score"] = exact.as_points(exact.units(doc["max_score"], "a maximum")
                                           + exact.units(lesson.written_points, "written"))
        page = store.feedback_path(sid)
        if page.is_file():
            write_atomic(page, with_section(page.read_text(encoding="utf-8"),
                                            page_section(lesson.written, full, language,
                                                         pages)))
        yield encode(dump(doc)[:-1])
