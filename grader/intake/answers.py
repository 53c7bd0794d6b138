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

from grader.config import Question
from grader.intake.capped import MAX_FILE, MAX_SOURCE, TEXT, read_capped
from grader.lesson.release import PLACEHOLDER, SHAPE_FIELDS

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


def _shapes_answer(value: object, names: tuple[str, ...] = SHAPE_FIELDS) -> Answer:
    """A shapes question's answer: the dict of its fields (`names`)."""
    if isinstance(value, str):  # a notebook's markdown, or a string instead of the dict
        value = _fields_of_text(value, names)
    if not isinstance(value, dict):
        return Answer(problem=f"not a dict of the {len(names)} fields but a "
                      f"{type(value).__name__}")
    fields = {f: str(value.get(f, ""))[:MAX_ANSWER] for f in names}
    extra = sorted(str(k) for k in value if k not in names)
    problem = f"fields the question does not ask for: {', '.join(extra)}" if extra else ""
    whole = {f: str(value.get(f, "")) for f in names}
    return Answer(fields=fields, problem=problem, digest=digest(whole),
                  cut=any(len(v) > MAX_ANSWER for v in whole.values()))


def _fields_of_text(text: str, names: tuple[str, ...] = SHAPE_FIELDS) -> dict[str, str]:
    """`x_flat: [N, H]` lines (a notebook's markdown) as fields; other lines ignored."""
    found = {}
    for line in text.splitlines():
        m = _FIELD.match(line)
        if m and m[1] in names:
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
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and (m := _NAME.match(target.id)):
                try:
                    found[f"q{m[1]}"] = ast.literal_eval(value)
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
                found = _literals(data.decode(TEXT, "replace"))  # as the code is read
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
            answers[qid] = (_shapes_answer(value, q.fields()) if q.kind == "shapes"
                            else _text_answer(value))
    return answers
