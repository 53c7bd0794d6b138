"""`grader similarity`: every pair of a class compared, the stub never counted, a copy
with renamed variables and reordered functions found, independent work not flagged
(issue 19, item 3)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader import config
from grader.pages import report
from grader.run.similarity import THRESHOLD, compare, read_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "similarity"
HOSTILE = "</pre><script>alert(1)</script>\u202e"


@pytest.fixture(scope="module")
def stub() -> str:
    return read_text(ROOT / "exercises" / "13_moe.py")


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    """The sample class's .py files, alice's planted copy and an independent solution."""
    found = {p.parent.name: read_text(p) for p in (ROOT / "examples" / "13").glob("*/13_moe.py")}
    return {**found, "planted": read_text(FIXTURES / "planted.py"),
            "independent": read_text(FIXTURES / "independent.py")}


def pair_ids(pairs) -> set[tuple[str, str]]:
    return {(p.a.student_id, p.b.student_id) for p in pairs}


def test_a_renamed_and_reordered_copy_is_found(texts, stub):
    pairs = compare(texts, stub)
    copy = next(p for p in pairs if {p.a.student_id, p.b.student_id} == {"alice", "planted"})
    assert copy.similarity > 0.9
    copied = "".join(t for t, matched in copy.b.segments if matched)
    assert "index_add_" in copied and "one_hot" in copied  # dispatch and the loss, moved


def test_independent_correct_solutions_are_not_flagged(texts, stub):
    assert not any("independent" in ids for ids in pair_ids(compare(texts, stub)))
    (both,) = compare({"alice": texts["alice"], "independent": texts["independent"]}, stub, 0.0)
    assert both.similarity < THRESHOLD  # measured 0.32: they share what the contract forces


def test_the_stub_is_boilerplate(stub):
    assert compare({"dave": stub, "dave2": stub}, stub, 0.0) == []
    # the same two files with nothing excluded would match entirely
    (whole,) = compare({"dave": stub, "dave2": stub}, "", 0.0)
    assert whole.similarity == 1.0


def test_segments_rebuild_the_file(texts, stub):
    (pair,) = compare({"alice": texts["alice"], "planted": texts["planted"]}, stub)
    for side, sid in ((pair.a, "alice"), (pair.b, "planted")):
        assert "".join(t for t, _ in side.segments) == texts[sid]


def test_the_report_escapes_student_code(texts, stub):
    hostile = texts["alice"] + f"\n# {HOSTILE}\n"
    pairs = compare({"alice": texts["alice"], HOSTILE: hostile}, stub)
    course = config.load(ROOT / "course.yml")
    html = report.render_similarity(pairs, 2, THRESHOLD, course, "13")
    assert "<script>" not in html and "\u202e" not in html
    assert "&lt;/pre&gt;&lt;script&gt;" in html and html.count("<mark>") >= 2  # both sides


def test_grader_similarity_writes_the_report_and_the_class_report_links_it(tmp_path, texts):
    klass = tmp_path / "class"
    for sid in ("alice", "bob", "dave", "planted", "independent"):
        (klass / sid).mkdir(parents=True)
        (klass / sid / "13_moe.py").write_text(texts[sid], encoding="utf-8")
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)
    (out / "results" / "alice.json").write_text(json.dumps(
        {"student_id": "alice", "score": 10.0, "max_score": 10.0, "status": "graded"}))
    # the sample class's Moodle worksheet names alice (issue 25 item 4)
    course_yml = tmp_path / "course.yml"
    course_yml.write_text((ROOT / "course.yml").read_text().replace(
        "    exercise: 13_moe.py\n", "    exercise: 13_moe.py\n    moodle_worksheet: "
        f"{ROOT / 'examples' / '13-moodle-worksheet.csv'}\n", 1))
    for folder in ("solutions", "exercises", "hidden_tests", "examples"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    proc = subprocess.run(
        [sys.executable, "-m", "grader.cli", "similarity", "--course", str(course_yml),
         "--lesson", "13", "--submissions", str(klass), "--out", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "compared 5 submissions (10 pairs); 1 above 50%:" in proc.stderr
    assert "alice (Alice Anders) · planted" in proc.stderr
    page = (out / "similarity.html").read_text(encoding="utf-8")
    assert "planted" in page and "independent" not in page.split("<section", 1)[-1]
    assert 'href="similarity.html"' in (out / "report.html").read_text(encoding="utf-8")
