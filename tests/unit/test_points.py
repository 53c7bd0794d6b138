"""Points add up exactly: per-test scores sum with `==` to the part, parts to the total,
in any order, in Python floats and in SQLite's SUM (what nbgrader totals with)."""
from __future__ import annotations

import random
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from grader import points
from grader.config import Part
from grader.lesson.testfile import is_practice, name_of, part_of
from grader.record import GradeRecord, PartRecord, TestRecord
from grader.judge.tally import Tally

LESSON13 = {"ffn": (2, 8), "router": (2, 11), "dispatch": (2.5, 7), "aux_loss": (1.5, 9),
            "moe": (2, 11)}  # points, graded tests


def sql_sum(values: list[float]) -> float:
    """SQLite's own SUM over REAL values, as nbgrader's score queries compute it."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE g (v REAL)")
    db.executemany("INSERT INTO g VALUES (?)", [(v,) for v in values])
    return db.execute("SELECT SUM(v) FROM g").fetchone()[0] or 0.0


def sums_exactly(values: list[float], expected: float, rng: random.Random) -> bool:
    """The values add up to `expected` with ==, in order, shuffled, pairwise and in SQL."""
    shuffled = values[:]
    rng.shuffle(shuffled)
    pairwise = [sum(values[i:i + 2]) for i in range(0, len(values), 2)]
    return (sum(values) == expected and sum(shuffled) == expected
            and sum(pairwise) == expected and sql_sum(shuffled) == expected)


def records(spec: dict[str, tuple[float, int]], rng: random.Random,
            practice: int = 0) -> list[TestRecord]:
    return [TestRecord(name=f"test_{name}_{i}", part=name, practice=i < practice,
                       outcome=rng.choice(["passed", "failed"]))
            for name, (_, n) in spec.items() for i in range(n + practice)]


def parts(spec: dict[str, tuple[float, int]]) -> dict[str, Part]:
    return {name: Part(points=pts) for name, (pts, _) in spec.items()}


@pytest.mark.parametrize("total", [1, 1536, 2048, 2560, 10 * 1024 + 3])
@pytest.mark.parametrize("n", [1, 3, 7, 9, 11, 64])
def test_shares_are_as_equal_as_whole_units_allow(total, n):
    got = points.shares(total, n)
    assert sum(got) == total and len(got) == n
    assert max(got) - min(got) <= 1 and got == sorted(got, reverse=True)


@pytest.mark.parametrize("pts", [2, 2.5, 1.5, 0.75, 10, 37.125])
@pytest.mark.parametrize("n", [1, 3, 7, 9, 11, 13, 47])
def test_any_subset_of_a_parts_tests_sums_exactly(pts, n):
    rng = random.Random(f"{pts}-{n}")
    worth = [points.as_points(u) for u in points.shares(points.units(pts, "p"), n)]
    assert sums_exactly(worth, float(pts), rng)
    for _ in range(20):
        picked = [w for w in worth if rng.random() < 0.5]
        expected = float(sum(Fraction(w) for w in picked))  # the exact sum, rounded once
        assert sums_exactly(picked, expected, rng)


def test_the_check_catches_four_decimal_shares():
    """What the grader did before: round(points / n, 4) per test. The check above must
    reject it, or it proves nothing."""
    rng = random.Random(0)
    assert not sums_exactly([round(2 / 11, 4)] * 11, 2.0, rng)
    assert not sums_exactly([round(1.5 / 9, 4)] * 9, 1.5, rng)


def test_a_class_adds_up_exactly_and_full_marks_are_the_maximum():
    rng = random.Random(13)
    lesson = parts(LESSON13)
    for student in range(200):
        tests = records(LESSON13, rng, practice=student % 3)
        if student == 0:
            for t in tests:
                t.outcome = "passed"
        awarded = points.award(lesson, tests)
        total = points.total(awarded)
        assert points.total(awarded, "max_score") == 10.0
        assert sums_exactly([t.score for t in tests], total, rng)
        assert sums_exactly([t.max_score for t in tests], 10.0, rng)
        assert sums_exactly([p.score for p in awarded.values()], total, rng)
        for name, p in awarded.items():
            mine = [t for t in tests if t.part == name]
            assert sums_exactly([t.score for t in mine], p.score, rng)
            assert p.max_score == lesson[name].points
        if student == 0:
            assert total == 10.0


def test_practice_tests_are_worth_nothing_and_not_counted():
    spec = {"ffn": (2, 3), "router": (1.5, 2)}
    tests = records(spec, random.Random(1), practice=2)
    for t in tests:
        t.outcome = "passed"
    awarded = points.award(parts(spec), tests)
    practice = [t for t in tests if t.practice]
    assert len(practice) == 4
    assert all(t.score == 0.0 and t.max_score == 0.0 for t in practice)
    assert awarded["ffn"] == PartRecord(score=2.0, max_score=2.0, passed=3, tests=3)
    assert awarded["router"].tests == 2 and awarded["router"].passed == 2
    assert {t.max_score for t in tests if t.part == "ffn" and not t.practice} == \
        {points.as_points(683), points.as_points(682)}


def test_a_run_of_practice_tests_alone_scores_zero_of_zero():
    spec = {"ffn": (2, 0), "router": (1.5, 0)}
    tests = records(spec, random.Random(2), practice=3)
    awarded = points.award(parts(spec), tests)
    assert points.total(awarded) == 0.0 and points.total(awarded, "max_score") == 0.0
    assert all(p.tests == 0 and p.passed == 0 for p in awarded.values())


def test_a_part_without_graded_tests_is_a_lesson_error():
    spec = {"ffn": (2, 3), "router": (1.5, 0)}
    with pytest.raises(RuntimeError, match="router"):
        points.award(parts(spec), records(spec, random.Random(3), practice=1))


@pytest.mark.parametrize("pts", [0.1, 1 / 3, -1.0])
def test_points_that_cannot_add_up_exactly_are_refused(pts):
    with pytest.raises(ValueError, match="multiple of 1/1024"):
        points.units(pts, "part 'ffn'")


@pytest.mark.parametrize("path, part, practice", [
    ("hidden_tests/13_moe/test_ffn.py", "ffn", False),
    ("hidden_tests/13_moe/test_practice_ffn.py", "ffn", True),
    ("test_practice_aux_loss.py", "aux_loss", True),
    ("hidden_tests/13_moe/test_aux_loss.py", "aux_loss", False),
])
def test_practice_files_name_their_part(path, part, practice):
    assert part_of(path) == part and part_of(Path(path)) == part
    assert is_practice(path) is practice and is_practice(Path(path)) is practice


def test_score_grades_a_report_exactly_with_practice_files_apart(course):
    """runner.score on lesson 13: graded files share the points, practice files don't."""
    from grader.judge import runner
    from grader.judge.context import LessonContext

    rng = random.Random(5)
    tests = [{"nodeid": f"test_{name}.py::test_{i}", "outcome": rng.choice(["passed", "failed"]),
              "metadata": {}} for name, (_, n) in LESSON13.items() for i in range(n)]
    tests += [{"nodeid": f"test_practice_{name}.py::test_practice", "outcome": "passed",
               "metadata": {}} for name in LESSON13]
    rec = runner.score(LessonContext(course, "13"), {"tests": tests})
    assert rec.max_score == course.lesson("13").max_score == 10.0
    assert sums_exactly([t.score for t in rec.tests], rec.score, rng)
    assert sum(p.score for p in rec.parts.values()) == rec.score
    practice = [t for t in rec.tests if t.practice]
    assert sorted(t.part for t in practice) == sorted(LESSON13)
    assert all(t.score == t.max_score == 0.0 for t in practice)
    for name, (_, n) in LESSON13.items():
        graded = [t for t in tests if t["nodeid"].startswith(f"test_{name}.py")]
        assert rec.parts[name].tests == n
        assert rec.parts[name].passed == sum(t["outcome"] == "passed" for t in graded)


def test_pages_show_practice_records_without_counting_them(course):
    """A record with practice tests renders: the student page and the class report."""
    from grader.pages import feedback, report

    rng = random.Random(7)
    tests = records(LESSON13, rng, practice=1)
    for t in tests:
        t.name = f"test_{t.part}_{'practice' if t.practice else 'case'}"
        t.message = "" if t.passed else "output differs"
    awarded = points.award(course.lesson("13").parts, tests)
    record = GradeRecord(student_id="alice", lesson="13", status="graded",
                         score=points.total(awarded),
                         max_score=points.total(awarded, "max_score"),
                         parts=awarded, tests=tests)
    page = feedback.render_student(record, course, "13")
    assert f"{awarded['ffn'].passed} / {awarded['ffn'].tests}" in page
    assert report.render_report(Tally.of([record]), course, "13")


@pytest.mark.parametrize("part", ["ffn", "aux_loss"])
@pytest.mark.parametrize("practice", [False, True])
def test_a_parts_file_name_reads_back_as_that_part(part, practice):
    """grader/lesson/testfile.py writes the names new-lesson makes and reads them back."""
    name = name_of(part, practice)
    assert part_of(name) == part and is_practice(name) is practice
