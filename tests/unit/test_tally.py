"""The class report from running counts: folded one student at a time, in whatever
order the workers finish, it says what the whole class in its own order says."""
from __future__ import annotations

import pickle
import random
from collections import Counter
from pathlib import Path

import pytest

from grader import config
from grader.pages import report
from grader.record import Diagnosis, GradeRecord, PartRecord, TestRecord, Timing
from grader.store import dump
from grader.judge.tally import SLOWEST, Entry, Tally

ROOT = Path(__file__).resolve().parents[2]
STATUSES = ["graded", "graded", "graded", "timeout", "import_error", "missing"]
KINDS = ["timeout", "exception", "not_implemented"]


@pytest.fixture(scope="module")
def course() -> config.Course:
    return config.load(ROOT / "course.yml")


def a_class(course: config.Course, n: int, seed: int) -> list[GradeRecord]:
    """Students with ties everywhere a ranking could break them: statuses, error kinds,
    mistakes and elapsed times (a tenth of a second apart at most)."""
    rng = random.Random(seed)
    parts = list(course.lesson("13").parts)
    records = []
    for i in range(n):
        tests = []
        for part in parts:
            for j in range(2):
                passed = rng.random() < 0.6
                diagnosis = None if passed else rng.choice(
                    [None, Diagnosis(None), Diagnosis("m_a", {"en": "A", "zh": "甲"}),
                     Diagnosis("m_b", {"en": "B", "zh": "乙"})])
                error = None if passed or rng.random() < 0.5 else {
                    "kind": rng.choice(KINDS), "message": "x", "traceback": ""}
                tests.append(TestRecord(f"test_{part}[{j}]", part, False,
                                        "passed" if passed else "failed", error=error,
                                        diagnosis=diagnosis, max_score=1.0,
                                        score=1.0 if passed else 0.0,
                                        checks=[{"name": "out", "heatmap": [[0.5] * 64] * 64}]))
        records.append(GradeRecord(
            student_id=f"s{rng.randrange(10**6):06d}", lesson="13", status=rng.choice(STATUSES),
            score=sum(t.score for t in tests), max_score=10.0,
            parts={p: PartRecord(sum(t.score for t in tests if t.part == p), 2.0, 0, 2)
                   for p in parts if rng.random() < 0.9},
            tests=tests, problem=f"problem {i}", name=rng.choice(["", "李雷"]),
            timing=Timing(elapsed_s=rng.randrange(5) / 10, cpu_s=0.1)))
    return records


def test_the_report_does_not_depend_on_the_order_students_finish(course):
    records = a_class(course, 40, seed=13)
    order = [r.student_id for r in records]
    whole = report.render_report(Tally.of(records), course, "13", "en")
    for seed in range(4):
        finished = records[:]
        random.Random(seed).shuffle(finished)
        tally = Tally(order)
        for record in finished:
            tally.add(Entry.of(record))
        assert report.render_report(tally, course, "13", "en") == whole


def test_the_counts_are_the_whole_class_counted_in_its_order(course):
    """What the report used to count over every record at once, with Counter and
    sorted (ties in class order), from a tally folded in another order."""
    records = a_class(course, 40, seed=7)
    tally = Tally([r.student_id for r in records])
    for record in reversed(records):
        tally.add(Entry.of(record))
    assert tally.statuses.ranked() == Counter(r.status for r in records).most_common()
    kinds: Counter = Counter()
    for r in records:
        kinds.update(list(dict.fromkeys(t.error["kind"] for t in r.tests if t.error)))
    assert tally.error_kinds.ranked() == kinds.most_common()
    slow = sorted(records, key=lambda r: -r.timing.elapsed_s)[:SLOWEST]
    assert [s.student_id for s in tally.slowest()] == [r.student_id for r in slow]
    assert len({r.timing.elapsed_s for r in records}) < len(records)  # ties were there
    got = {m["id"]: m["students"] for m in report.report_context(tally, course, "13", "en")
           ["mistakes"]}
    for mid in ("m_a", "m_b"):
        assert got[mid] == [r.student_id for r in records
                            if any(t.diagnosis and t.diagnosis.id == mid for t in r.tests)]
    passed = sum(t.passed for r in records for t in r.tests if t.name == "test_ffn[0]")
    assert tally.rates[("ffn", "test_ffn[0]")] == [passed, len(records)]


def test_an_entry_is_small_beside_the_result(course):
    """What the parent receives per student leaves out the per-check numbers, the bulk
    of a mistaken student's result."""
    record = a_class(course, 1, seed=1)[0]
    assert len(pickle.dumps(Entry.of(record))) * 10 < len(dump(record.to_json()))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_who_handed_nothing_in_is_counted_listed_and_out_of_the_averages(course, lang):
    """Issue 51: a Moodle download holds no folder for a student who handed nothing in;
    the report said 12 students and averaged over 12. Now the class counts them, lists
    them, and averages over those who handed something in, and says so."""
    def one(sid: str, status: str, score: float) -> GradeRecord:
        return GradeRecord(student_id=sid, lesson="13", status=status, score=score,
                           max_score=10.0, parts={"ffn": PartRecord(score / 5, 2.0, 0, 1)},
                           tests=[])

    tally = Tally.of([one("a", "graded", 10.0), one("b", "graded", 6.0),
                      one("erin", "missing", 0.0)])
    tally.absent = ["zed"]
    got = report.report_context(tally, course, "13", lang)
    assert (got["class_size"], got["n"], got["nothing"]) == (4, 2, ["erin", "zed"])
    assert got["mean"] == 8.0 and got["zero"] == 0
    assert next(p for p in got["parts"] if p["key"] == "ffn")["mean"] == 1.6
    page = report.render_report(tally, course, "13", lang)
    t = report.STRINGS[lang]
    assert t["averages_without"].format(n=2, m=2) in page
    assert ">zed<" in page and t["absent_status"] in page and ">erin<" in page
