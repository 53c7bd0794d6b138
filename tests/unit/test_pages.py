"""Pages that reach students: scores.json names each page, file names stay readable,
and each LMS gets the page, its top or its one-line comment beside the score (issue 19, item 2)."""
from __future__ import annotations

import csv
import html
import re
import json
import unicodedata
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from grader.cli import console
from grader.config import ConfigError, Course, Lesson, Part, Student
from grader.deliver.export.moodle_files import ZIP_NAME
from grader.record import GradeRecord
from grader.store import Store, safe_name, scores_entry
from grader.judge.tally import Tally
from tests.unit.test_export import export, record


def test_odd_ids_get_readable_names_that_never_collide():
    name = safe_name("José Núñez")
    assert name.startswith("José_Núñez-") and "/" not in name
    assert safe_name(unicodedata.normalize("NFD", "José Núñez")).startswith("José_Núñez-")
    assert safe_name("李雷") == "李雷" and safe_name("alice") == "alice"
    odd = [safe_name(s) for s in ("a b", "a_b", "a/b", "../x", ".x", "\u202ex", "")]
    assert len(set(odd)) == len(odd)
    assert all(n and not n.startswith(".") and "/" not in n and "\u202e" not in n for n in odd)


def test_scores_json_names_each_students_page(tmp_path):
    store = Store(tmp_path)
    for sid in ("alice", "José Núñez"):
        store.save(GradeRecord(student_id=sid, lesson="13", status="graded", score=1.0,
                               max_score=10.0, parts={}, tests=[], fingerprint="f"),
                   "<html></html>")
    store.write_scores("13", "c", "v", 10.0, [scores_entry(store.load(sid))
                                               for sid in ("alice", "José Núñez")])
    doc = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    pages = {s["student_id"]: s["page"] for s in doc["students"]}
    assert pages["alice"] == "feedback/alice.html"
    assert pages["José Núñez"].startswith("feedback/José_Núñez-")
    assert all((tmp_path / p).is_file() for p in pages.values())


def test_the_summary_prints_the_real_page_names(tmp_path, monkeypatch):
    shown = Console(record=True, width=200)
    monkeypatch.setattr(console, "console", shown)
    console.pages(["alice", "José Núñez"], tmp_path)
    text = shown.export_text()
    assert f"José Núñez: {tmp_path}/{Store.page_of('José Núñez')}" in text
    assert Store.page_of("José Núñez").startswith("feedback/José_Núñez-")
    assert "alice:" not in text  # a plain id's page is <student_id>.html, as printed


def course_in_order(**options) -> Course:
    """router comes before ffn in the course, after it in the alphabet."""
    parts = {"router": Part(points=3, title="Router"), "ffn": Part(points=2, title="Dense FFN")}
    lesson = Lesson(title="MoE", exercise="13_moe.py", solution=Path("s.py"), stub=Path("e.py"),
                    tests=Path("t"), parts=parts, **options.pop("lesson", {}))
    roster = {"alice": Student(name="Liddell, Alice", email="alice@u.edu", lms_id="4001"),
              "bob": Student(name="Bob_Brown", email="bob@u.edu", lms_id="4002"),
              "zed": Student(email="zed@u.edu", lms_id="4003")}
    return Course(course="c", lessons={"13": lesson}, roster=roster, **options)


def sorted_scores(tmp_path: Path) -> dict:
    """Records as scores.json stores them: keys sorted, so `ffn` before `router`; and
    each student's page on disk."""
    students = [record("alice", "graded", [True, True, False, True, True]),
                record("bob", "graded", [True] * 5), record("zed", "graded", [False] * 5)]
    for s in students:
        s["page"] = f"feedback/{s['student_id']}.html"
        (tmp_path / s["page"]).parent.mkdir(exist_ok=True)
        (tmp_path / s["page"]).write_text(f"<html>{s['student_id']}'s page</html>")
    return json.loads(json.dumps({"lesson": "13", "max_score": 5.0, "students": students},
                                 sort_keys=True))


def test_comments_list_parts_in_course_order(tmp_path):
    scores = sorted_scores(tmp_path)
    course = course_in_order(moodle_identifier="email")
    export(course, "13", scores, tmp_path / "export", ["lti", "moodle"])
    lti = [json.loads(line) for line in
           (tmp_path / "export" / "lti_scores.jsonl").read_text().splitlines()]
    assert lti[0]["comment"] == "Graded. router 2/3; ffn 2/2"
    with (tmp_path / "export" / "moodle.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["Feedback: Lesson 13 MoE"] == "Graded. router 2/3; ffn 2/2"


WORKSHEET = ("\ufeffIdentifier,Full name,Email address,Status,Grade,Maximum Grade\n"
             "Participant 1234567,Alice Liddell,alice@u.edu,Submitted,,5.00\n"
             "Participant 7654321,Bob_Brown,bob@u.edu,Submitted,,5.00\n")


def moodle_import(entry: str) -> tuple[int, str, str, str]:
    """What Moodle's assignfeedback_file_zip_importer reads from an entry's name:
    explode('_', name, 5), participant number, plugin type and name, file name."""
    info = entry.split("_", 4)
    assert len(info) == 5 and info[1].isdigit(), entry
    return int(info[1]), info[2], info[3], info[4]


def test_moodle_feedback_files_zip_is_named_as_the_assignment_expects(tmp_path):
    scores = sorted_scores(tmp_path)
    (tmp_path / "worksheet.csv").write_text(WORKSHEET, encoding="utf-8")
    course = course_in_order(moodle_identifier="email",
                             lesson={"moodle_worksheet": tmp_path / "worksheet.csv"})
    written = export(course, "13", scores, tmp_path / "export", ["moodle"])
    assert tmp_path / "export" / ZIP_NAME in written
    with zipfile.ZipFile(tmp_path / "export" / ZIP_NAME) as z:
        got = {moodle_import(n): z.read(n).decode() for n in z.namelist()}
    assert got == {
        (1234567, "assignfeedback", "file", "feedback-lesson-13.html"): "<html>alice's page</html>",
        (7654321, "assignfeedback", "file", "feedback-lesson-13.html"): "<html>bob's page</html>"}
    report = (tmp_path / "export" / "roster_report.txt").read_text()
    assert "moodle files: zed: not in the grading worksheet (Email address zed@u.edu)" in report


@pytest.mark.parametrize("lang", ["en", "zh_cn"])
def test_moodle_exports_speak_the_worksheets_own_headers(tmp_path, lang):
    """Issue 51: moodle.csv's grade and feedback headers are the TA's worksheet's own,
    in its language; and the worksheet comes back filled in, every header, row and cell
    kept but each graded student's grade and feedback, for the assignment's "Upload
    grading worksheet", which finds its columns by those headers (importgradeslib.php)."""
    from grader.deliver.export.moodle_files import FILLED
    from tests.vendors import MOODLE_HEADERS, moodle_worksheet

    scores = sorted_scores(tmp_path)
    sheet = moodle_worksheet(tmp_path / "worksheet.csv", [
        (1234567, "Alice Liddell", "alice@u.edu"), (7654321, "Bob_Brown", "bob@u.edu"),
        (5555555, "Nobody Here", "nobody@u.edu")], lang=lang)
    course = course_in_order(lesson={"moodle_worksheet": sheet})
    export(course, "13", scores, tmp_path / "export", ["moodle"])
    heads = MOODLE_HEADERS[lang]
    with (tmp_path / "export" / "moodle.csv").open(newline="", encoding="utf-8") as f:
        assert next(csv.reader(f)) == [heads[2], heads[4], heads[9]]
    before = list(csv.reader(sheet.read_text(encoding="utf-8-sig").splitlines()))
    filled = tmp_path / "export" / FILLED
    assert filled.read_bytes().startswith(b"\xef\xbb\xbf")  # as Moodle wrote it
    after = list(csv.reader(filled.read_text(encoding="utf-8-sig").splitlines()))
    assert after[0] == before[0] == heads
    assert after[3] == before[3]  # a participant the class lacks: untouched
    for row, was, score in ((after[1], before[1], "4.0"), (after[2], before[2], "5.0")):
        assert row[4] == score and row[9].startswith("Graded. router")
        assert row[:4] + row[5:9] == was[:4] + was[5:9]
    no_grade = tmp_path / "no-grade.csv"
    no_grade.write_text("\n".join(",".join(r[:4]) for r in before) + "\n", encoding="utf-8")
    course = course_in_order(lesson={"moodle_worksheet": no_grade})
    with pytest.raises(ConfigError, match=f"no 'Grade' column .*{heads[1]}"):
        export(course, "13", scores, tmp_path / "export", ["moodle"])


def test_a_worksheet_without_the_identifier_column_is_a_clear_error(tmp_path):
    scores = sorted_scores(tmp_path)
    (tmp_path / "worksheet.csv").write_text(WORKSHEET, encoding="utf-8")
    course = course_in_order(moodle_identifier="idnumber",
                             lesson={"moodle_worksheet": tmp_path / "worksheet.csv"})
    with pytest.raises(ConfigError, match="no 'ID number' column"):
        export(course, "13", scores, tmp_path / "export", ["moodle"])



def test_naming_the_worksheet_regrades_nobody():
    """A TA sets moodle_worksheet the day they export: the class must not be graded
    again for it (keys that say where scores go are not the lesson's version)."""
    plain = course_in_order().version("13")
    assert course_in_order(lesson={"moodle_worksheet": Path("w.csv"), "moodle_item": "L13",
                                   "canvas_assignment_id": 9}).version("13") == plain
    assert course_in_order(lesson={"title_zh": "FFN 与 MoE"}).version("13") != plain


def test_the_class_report_links_each_students_page():
    from grader.pages import report
    course = course_in_order()
    records = [GradeRecord.from_json(record(sid, "graded", [True] * 5))
               for sid in ("alice", "José Núñez")]
    html = report.render_report(Tally.of(records), course, "13")
    assert 'href="feedback/alice.html"' in html
    assert f'href="feedback/{safe_name("José Núñez")}.html"' in html


@pytest.mark.parametrize("language, heading", [("en", "What was graded"), ("zh", "评分了哪份文件")])
def test_intakes_notes_are_on_the_students_page(language, heading):
    """Issue 25 item 2: lateness, a converted notebook and its dropped lines, and which of
    several files was graded were in scores.json only, though the docs promise them on
    the page."""
    from grader.pages.feedback import render_student

    notes = ["Several files were submitted; graded 13_moe-1.py, the newest (also found: "
             "13_moe.py).", "This submission was late.",
             "Left out 1 IPython magic or shell line(s), which plain Python cannot run: "
             "`!pip install torch`."]
    doc = record("alice", "graded", [True] * 5)
    doc["notes"] = notes
    page = render_student(GradeRecord.from_json(doc), course_in_order(), "13", language)
    assert heading in page
    for note in notes:  # a note's `code` is set as code (issue 51: no Markdown shown)
        shown = re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(note, quote=False))
        assert shown in page and "`" not in shown, note
    doc["notes"] = []
    assert heading not in render_student(GradeRecord.from_json(doc), course_in_order(), "13",
                                         language)


def test_a_worksheet_row_longer_than_its_header_is_read_not_a_traceback(tmp_path):
    """An unquoted date with commas made a row longer than the header: csv puts the
    rest under None as a list, which the reader took for text (a grader bug)."""
    from grader.intake.roster import participant_rows

    (tmp_path / "w.csv").write_text("Identifier,Full name,Email address,Last modified\n"
                                    "Participant 1,Ann Lee,ann@u.edu,Monday, 1 May 2026\n")
    assert [(r["number"], r["Email address"]) for r in
            participant_rows(tmp_path / "w.csv", "Email address")] == [("1", "ann@u.edu")]


def test_chinese_pages_give_the_courses_chinese_title():
    """Issue 25 item 9: the course title stayed English on zh pages (no `title_zh`)."""
    from grader.pages.feedback import render_student

    course = course_in_order(title="MiniMind", title_zh="MiniMind 课程")
    rec = GradeRecord.from_json(record("alice", "graded", [True] * 5))
    assert "MiniMind 课程" in render_student(rec, course, "13", "zh")
    assert "MiniMind 课程" not in render_student(rec, course, "13", "en")


def test_a_missing_worksheet_is_a_note_not_a_stopped_run(tmp_path):
    """course.yml names the worksheet the TA downloads on export day: before then a run
    (or a copy of the course elsewhere) grades without it and says so."""
    from grader.intake import roster

    course = course_in_order(lesson={"moodle_worksheet": tmp_path / "not-yet.csv"})
    found = roster.load(course, "13")
    assert set(found.students) == {"alice", "bob", "zed"} and not found.aliases
    assert "no Moodle grading worksheet at" in found.note() and "not-yet.csv" in found.note()


def test_intakes_notes_are_chinese_on_a_chinese_page(tmp_path):
    """Intake's notes (lateness, which of several files, a file left out, a converted
    notebook's dropped lines) are made before the page's language is known: a zh page,
    rendered again from the stored record, says them in Chinese."""
    import json

    from grader.intake import submissions as intake
    from grader.pages.feedback import render_student

    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": None,
         "outputs": [], "source": "!pip install torch\nimport torch"}]}
    with zipfile.ZipFile(tmp_path / "submissions.zip", "w") as z:
        z.writestr("annlee_1001_5000_13_moe.py", "x = 1\n")
        z.writestr("annlee_LATE_1001_5001_13_moe.py", "x = 2\n")
        z.writestr("annlee_1001_5002_notes.pdf", "%PDF")
        z.writestr("bobby_1002_6000_13_moe.ipynb", json.dumps(notebook))
    taken = intake.collect(tmp_path / "submissions.zip", "13_moe.py", cache=tmp_path / "c")
    notes = {sid: n for sid, _, n in taken.found}
    english = {"1001": ["Several files were submitted; graded 13_moe.py, the newest",
                        "This submission was late.",
                        "Left out notes.pdf (only .py and .ipynb files are graded)."],
               "1002": ["Graded the 1 code cells of 13_moe.ipynb, joined in order.",
                        "Left out 1 IPython magic or shell line(s)"]}
    chinese = {"1001": ["提交了多个文件；评分的是最新的 13_moe.py", "这份作业迟交了。",
                        "未评分：notes.pdf（只评分 .py 和 .ipynb 文件）。"],
               "1002": ["评分的是 13_moe.ipynb 中的 1 个代码单元，按顺序拼接。",
                        "去掉了 1 行 IPython 魔法命令或 shell 命令"]}
    for sid in english:
        doc = record(sid, "graded", [True] * 5)
        doc["notes"] = notes[sid]
        stored = json.loads(json.dumps(GradeRecord.from_json(doc).to_json()))
        en, zh = (html.unescape(render_student(GradeRecord.from_json(stored),
                                               course_in_order(), "13", lang))
                  for lang in ("en", "zh"))
        for said in english[sid]:
            assert said in en and said not in zh, said
        for said in chinese[sid]:
            assert said in zh and said not in en, said
    assert "1001: Left out notes.pdf (only .py and .ipynb files are graded)." in taken.skipped


def test_what_the_sandbox_says_is_chinese_on_a_chinese_page():
    """Issue 25's leftover: the sandbox's sentences (a timeout while importing, a test
    killed by a limit, a file that could not be graded) are made while grading, before
    the page's language is known; a zh page, rendered again from the stored record,
    says them in Chinese, and scores.json and the exports keep the English."""
    import signal

    from grader.pages.feedback import render_student
    from grader.intake.capped import read_source
    from grader.sandbox.limits import Limits, StudentError
    from grader.sandbox.session import _death_cause
    from grader.text.strings import say

    limits = Limits(test_wall_s=5)
    timeout = StudentError("timeout", say("err_timeout", s="5", where=say("where_importing")))
    killed = StudentError("crash", _death_cause({"signal": signal.SIGXCPU}, limits,
                                                say("where_in", name="ffn (test_shape)")))
    unread = read_source(Path("/nonexistent/13_moe.py")).problem
    cases = [(timeout.message, None, "timed out after 5 s while importing your file",
              "在导入你的文件时超时（超过 5 秒）"),
             ("", killed.as_dict(), "your code exceeded the CPU time limit of 60 s in ffn",
              "你的代码在 ffn (test_shape) 中超过了 60 秒的 CPU 时间上限"),
             (unread, None, "no file was submitted", "没有提交文件")]
    for problem, error, english, chinese in cases:
        doc = record("alice", "graded" if error else "import_error", [not error] + [True] * 4)
        doc["tests"][0]["error"] = error
        stored = GradeRecord.from_json(json.loads(json.dumps(
            GradeRecord(**{**GradeRecord.from_json(doc).__dict__, "problem": problem})
            .to_json())))
        en, zh = (html.unescape(render_student(stored, course_in_order(), "13", lang))
                  for lang in ("en", "zh"))
        assert english in en and english not in zh, english
        assert chinese in zh and chinese not in en, chinese
        # scores.json: the problem in English, and its texts, for LMS comments in zh
        kept = stored.score_json()
        assert not problem or (english in kept["problem"]
                               and chinese in kept["problem_texts"]["zh"])
        assert problem or "problem_texts" not in kept
