"""`grader similarity`: every pair of a class compared, the stub never counted, a copy
with renamed variables and reordered functions found, independent work not flagged
(issue 19, item 3); within a budget of time and bytes, and files alike only in the
shape of their statements not flagged (issue 52, item 2)."""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import config
from grader.config import Budget
from grader.run import similarity
from grader.run.similarity import KEPT, THRESHOLD, compare, read_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "similarity"
HOSTILE = "</pre><script>alert(1)</script>\u202e"


@pytest.fixture(scope="module")
def stub() -> str:
    return read_text(ROOT / "exercises" / "13_moe.py")[0]


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    """The sample class's .py files, alice's planted copy and an independent solution."""
    found = {p.parent.name: read_text(p)[0]
             for p in (ROOT / "examples" / "13").glob("*/13_moe.py")}
    return {**found, "planted": read_text(FIXTURES / "planted.py")[0],
            "independent": read_text(FIXTURES / "independent.py")[0]}


def pair_ids(pairs) -> set[tuple[str, str]]:
    return {(p.a.student_id, p.b.student_id) for p in pairs}


def test_a_renamed_and_reordered_copy_is_found(texts, stub):
    pairs = compare(texts, stub).pairs
    copy = next(p for p in pairs if {p.a.student_id, p.b.student_id} == {"alice", "planted"})
    assert copy.similarity > 0.9
    copied = "".join(t for t, matched in copy.b.segments if matched)
    assert "index_add_" in copied and "one_hot" in copied  # dispatch and the loss, moved


def test_independent_correct_solutions_are_not_flagged(texts, stub):
    assert not any("independent" in ids for ids in pair_ids(compare(texts, stub).pairs))
    (both,) = compare({"alice": texts["alice"], "independent": texts["independent"]}, stub, 0.0).pairs
    assert both.similarity < THRESHOLD  # measured 0.32: they share what the contract forces


def test_the_stub_is_boilerplate(stub):
    assert compare({"dave": stub, "dave2": stub}, stub, 0.0).pairs == []
    # the same two files with nothing excluded would match entirely
    (whole,) = compare({"dave": stub, "dave2": stub}, "", 0.0).pairs
    assert whole.similarity == 1.0


def test_segments_rebuild_the_file(texts, stub):
    (pair,) = compare({"alice": texts["alice"], "planted": texts["planted"]}, stub).pairs
    for side, sid in ((pair.a, "alice"), (pair.b, "planted")):
        assert "".join(t for t, _ in side.segments) == texts[sid]


def test_the_report_escapes_student_code(texts, stub):
    hostile = texts["alice"] + f"\n# {HOSTILE}\n"
    found = compare({"alice": texts["alice"], HOSTILE: hostile}, stub)
    course = config.load(ROOT / "course.yml")
    html, _ = similarity.render_similarity(found, 2, THRESHOLD, course, "13")
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


# Issue 52, item 2: a class of hostile files must not slow the TA's run, swell the page,
# or flag an innocent classmate.

SHAPES = ("{0} = {1}\n", "{0} = {1} + {2}\n", "{0} = {1}({2})\n", "{0} = {1} * 2\n")


def assignments(student: int, size: int) -> str:
    """`size` bytes of random assignments in a few statement shapes, under names of the
    student's own (`v123`, `w456`): unrelated to any other student's but for the shape."""
    rng, letter, lines, n = random.Random(student), "vwxyz"[student], [], 0
    while n < size - 60:
        names = (f"{letter}{rng.randrange(10**6)}" for _ in range(3))
        lines.append(rng.choice(SHAPES).format(*names))
        n += len(lines[-1])
    return "".join(lines)


def similarity_cli(course: Path, klass: Path, out: Path, *extra: str):
    return subprocess.run(
        [sys.executable, "-m", "grader.cli", "similarity", "--course", str(course),
         "--lesson", "13", "--submissions", str(klass), "--out", str(out), *extra],
        capture_output=True, text=True, timeout=600)


def test_unrelated_files_of_the_same_shape_keep_the_budget_and_are_not_flagged(tmp_path):
    """4 students with 1 MB of unrelated random assignments: before, 6 pairs at 98%, a
    12.7 MB page and 35 s on a loaded machine."""
    klass, out = tmp_path / "class", tmp_path / "out"
    for student in range(4):
        (klass / f"s{student}").mkdir(parents=True)
        (klass / f"s{student}" / "13_moe.py").write_text(assignments(student, 1 << 20))
    start = time.monotonic()
    proc = similarity_cli(ROOT / "course.yml", klass, out)
    print(f"4 files of 1 MB: {time.monotonic() - start:.1f} s")  # shown, never asserted
    assert proc.returncode == 0, proc.stderr
    budget = Budget()
    for student in range(4):  # the bytes budget: each file compared up to file_kb only
        assert (f"s{student}: only its first {budget.file_kb} KB compared (1024 KB; "
                "course.yml similarity.file_kb)") in proc.stderr
    assert "compared 4 submissions (6 pairs); 0 above 50%:" in proc.stderr
    assert f"6 pairs above 50% not listed: they share under {KEPT} characters" in proc.stderr
    page = (out / "similarity.html").read_bytes()
    assert len(page) < min(2 << 20, budget.page_kb * 1024)
    assert b"<section" not in page and b"(1024 KB)" in page and b"6 pairs above 50% are not" in page


def test_unrelated_files_share_no_code_with_names_kept():
    """The floor, not the threshold, keeps them out: their shapes match at about 98%."""
    texts = {f"s{student}": assignments(student, 50_000) for student in range(3)}
    found = compare(texts, "", 0.8)
    assert found.pairs == [] and found.shape_only == 3 and found.examined == found.total == 3


def test_a_copy_inside_a_large_file_is_found_and_shown_without_the_rest(texts, stub):
    """The page shows the matched regions with a few lines around them, not whole files."""
    filler = assignments(0, 200_000)
    padded = filler + texts["planted"] + filler
    found = compare({"alice": texts["alice"], "padded": padded}, stub)
    (pair,) = found.pairs
    assert pair.similarity > 0.8 and pair.kept >= KEPT
    course = config.load(ROOT / "course.yml")
    html, shown = similarity.render_similarity(found, 2, THRESHOLD, course, "13")
    assert shown == 1 and "index_add_" in html and "lines not shown" in html
    assert len(html.encode()) < 64 * 1024  # the padded file alone is 400 KB
    # most of the filler is counted, not shown (with some salts of hash(), one of alice's
    # shapes is frequent in it and marks a stretch: that shows MATCHED lines of it)
    assert sum(p.skipped for p in pair.b.excerpt) > filler.count("\n")


def test_the_page_keeps_its_budget_and_says_what_it_left_out(texts, stub):
    found = compare(texts, stub)
    course = config.load(ROOT / "course.yml")
    whole, every = similarity.render_similarity(found, len(texts), THRESHOLD, course, "13")
    assert every == len(found.pairs) > 5 and "not on this page" not in whole
    for language, said in (("en", "more pairs above 50% are not on this page"),
                           ("zh", "不在本页")):
        html, shown = similarity.render_similarity(found, len(texts), THRESHOLD, course, "13",
                                               language, budget=Budget(page_kb=64))
        assert 0 < shown < every and len(html.encode()) <= 64 * 1024 < len(whole.encode())
        assert html.count("<section") == shown and said in html


def test_the_time_budget_stops_the_comparison_and_says_so(tmp_path, texts):
    """A deterministic budget: one so small it is spent before the first file."""
    found = compare(texts, "", budget=Budget(seconds=1e-9))
    assert found.examined == 0 < found.total and found.pairs == []
    for folder in ("solutions", "exercises", "hidden_tests", "examples", "tests"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    course = tmp_path / "course.yml"
    text = (ROOT / "course.yml").read_text()
    assert "  seconds: 300 " in text
    course.write_text(text.replace("  seconds: 300 ", "  seconds: 1.0e-9 ", 1))
    klass, out = tmp_path / "class", tmp_path / "out"
    for sid in ("alice", "planted"):
        (klass / sid).mkdir(parents=True)
        (klass / sid / "13_moe.py").write_text(texts[sid], encoding="utf-8")
    for language, said in (("en", "The time budget of 1e-09 s"), ("zh", "时间预算 1e-09 秒")):
        proc = similarity_cli(course, klass, out, "--language", language)
        assert proc.returncode == 0, proc.stderr
        assert ("time budget reached (1e-09 s, course.yml similarity.seconds): 0 of 1 "
                "pairs compared, the rest not") in proc.stderr
        assert "compared 2 submissions (0 of 1 pairs); 0 above 50%:" in proc.stderr
        assert said in (out / "similarity.html").read_text(encoding="utf-8")
