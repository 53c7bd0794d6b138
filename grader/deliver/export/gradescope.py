"""Gradescope autograder results.json, one per student, from a scores.json record.

Gradescope shows tests in the order given, numbered `part.test`, tagged with their
part; each test's visibility is its part's from course.yml. Per-test points are exact
(grader/points.py), so they add up to the top-level `score`, the grader's total;
practice tests are listed at 0 of 0. The top-level output is the student's page summed
up in HTML (`output_format: html`, which Gradescope sanitises and shows above the tests):
the total, each part's points in course order and the mistakes the page names.
A student who handed nothing in gets no file: Gradescope has no submission to attach
it to.
"""
from __future__ import annotations

import json
from pathlib import Path

from jinja2 import Environment
from markupsafe import escape

from grader.judge import disclosed
from grader.judge.written import AWAITING, STALE
from grader.config import Course, title_in
from grader.deliver.export.exporter import Exported, Exporter, ExportOptions
from grader.pages.feedback import clean, render_page_top, test_message
from grader.record import MISSING, ClassScores, GradeRecord, TestRecord
from grader.store import safe_name
from grader.text.strings import STRINGS

def results(course: Course, lesson_key: str, student: GradeRecord,
            pages: Environment | None = None, language: str | None = None) -> dict:
    """The student's results.json; `pages`: the templates of the run or export;
    `language`: the export's (else course.yml's), for every line the grader writes."""
    language = language or course.language
    said = STRINGS[language]
    lesson = course.lesson(lesson_key)
    order = list(lesson.parts)
    counters = dict.fromkeys(order, 0)
    tests = []
    for t in sorted(student.tests, key=lambda t: order.index(t.part)):
        part = lesson.parts[t.part]
        counters[t.part] += 1
        tests.append({
            "score": t.score, "max_score": t.max_score,
            "status": "passed" if t.passed else "failed",
            "name": f"{title_in(part, language) or t.part}: {t.name}"
                    + (said["gs_practice"] if t.practice else ""),
            "number": f"{order.index(t.part) + 1}.{counters[t.part]}",
            "output": _test_output(t, language), "output_format": "text",
            "tags": [t.part, "practice"] if t.practice else [t.part],
            "visibility": part.visibility,
        })
    for n, (qid, q) in enumerate(student.written.items(), start=1):  # the written part
        question = lesson.written.get(qid)
        status = str(q.get("status"))
        pending = status in (AWAITING, STALE)  # neither passed nor failed yet
        tests.append({
            "score": q.get("score", 0.0), "max_score": q.get("max_score", 0.0),
            **({} if pending else {"status": "passed" if q.get("score") == q.get("max_score")
                                   else "failed"}),
            "name": said["gs_question"].format(
                qid=qid, title=title_in(question, language) if question else qid,
                status=said.get(f"wst_{status}", status)),
            "number": f"{len(order) + 1}.{n}",
            "output": said["written_awaiting"] if pending else "",
            "output_format": "text", "tags": ["written", qid], "visibility": "visible"})
    head = [said.get(f"gs_status_{student.status}", student.status), *student.notes]
    output = "".join(f"<p>{escape(clean(line, 2000))}</p>" for line in head)
    top = render_page_top(student, course, lesson_key, language, pages=pages)
    return {"score": student.score, "output": output + top,
            "output_format": "html", "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}


def _test_output(test: TestRecord, language: str) -> str:
    # English: the record's message as the run joined it (three checks); another
    # language: the same checks in its words
    message = test.message if language == "en" or not test.message \
        else test_message(test, language, most=3)
    lines = [message] if message else []
    far = disclosed.test_difference(test.practice, test.max_abs_diff)  # a graded case: none
    if far:
        lines.append(far)
    diagnosis = test.diagnosis
    if diagnosis and diagnosis.id is not None:  # id None: no known mistake fits
        title, hint = diagnosis.title or {}, diagnosis.hint or {}
        lines.append(STRINGS[language]["gs_likely_cause"].format(
            title=title.get(language) or title.get("en", "")))
        if hint:
            lines.append(hint.get(language) or hint.get("en", ""))
    return "\n".join(lines)


class Gradescope(Exporter):
    to = "gradescope"

    def export(self, scores: ClassScores, options: ExportOptions) -> Exported:
        """One file per student who handed something in, named as the store names
        its results: whatever the id holds (`../`, `/`, a formula), the file lands in
        the folder and names never collide."""
        folder = options.out_dir / "gradescope"
        folder.mkdir(parents=True, exist_ok=True)
        paths: dict[Path, None] = {}
        for student in scores.students:
            if student.status == MISSING:
                continue
            path = folder / f"{safe_name(student.student_id)}.json"
            if path.parent != folder or path in paths:
                raise ValueError(f"no safe, unique file name for student id "
                                 f"{student.student_id!r}")
            got = results(options.course, options.lesson_key, student, options.pages,
                          options.language)
            path.write_text(json.dumps(got, indent=1, ensure_ascii=False), encoding="utf-8")
            paths[path] = None
        return Exported(list(paths))
