"""The grade of record's arithmetic (grader/judge/final.py): late credit against the due
date in effect, extensions, overrides, their revoke and staleness, rounded once."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from grader import points
from grader.config import LatePolicy, Lesson
from grader.judge import final

UTC = timezone.utc
DUE = datetime(2026, 10, 1, 23, 59, tzinfo=UTC)
POLICY = LatePolicy(applied_by="grader", grace_minutes=10,
                    windows=[{"until": "+24h", "credit": 80}, {"until": "+72h", "credit": 50}],
                    after_last=0)


def late(after: timedelta, ext: final.Extension | None = None,
         policy: LatePolicy = POLICY) -> final.Lateness:
    return final.lateness(policy, DUE + after, DUE, ext)


@pytest.mark.parametrize("after, status, credit", [
    (timedelta(minutes=-5), final.ON_TIME, 100),
    (timedelta(minutes=10), final.ON_TIME, 100),            # the grace period's last second
    (timedelta(minutes=10, seconds=1), final.LATE, 80),     # just past it
    (timedelta(hours=24), final.LATE, 80),
    (timedelta(hours=24, minutes=1), final.LATE, 50),
    (timedelta(hours=72), final.LATE, 50),
    (timedelta(hours=72, seconds=1), final.LATE, 0),        # after the last window
])
def test_grace_and_each_window(after, status, credit):
    got = late(after)
    assert (got.status, got.credit) == (status, credit)


def test_minutes_late_count_every_started_minute():
    assert late(timedelta(hours=3, minutes=10, seconds=30)).minutes == 191


def test_no_time_claims_nothing():
    got = final.lateness(POLICY, None, DUE, None)
    assert (got.status, got.minutes, got.credit) == (final.UNKNOWN, None, 100)


def test_an_extension_replaces_the_due_date():
    ext = final.Extension("s1", DUE + timedelta(days=2), "ill", "ta", "")
    assert late(timedelta(days=1), ext).status == final.ON_TIME
    got = late(timedelta(days=2, hours=5), ext)  # 5 h after the extension: first window
    assert (got.status, got.minutes, got.credit, got.due) == (final.LATE, 300, 80, ext.due)


def test_an_excuse_keeps_all_credit():
    ext = final.Extension("s1", None, "family", "ta", "")
    got = late(timedelta(days=5), ext)
    assert (got.status, got.credit) == (final.LATE, 100)


def test_credit_is_rounded_once_half_up():
    assert points.credited(points.units(8.0, "x"), 80) == 6554  # 6553.6 units
    assert points.credited(3, 50) == 2  # 1.5 units, half up
    assert points.credited(points.units(10.0, "x"), 0) == 0


def test_policy_is_validated():
    with pytest.raises(ValidationError, match="applied_by"):
        LatePolicy(windows=[])
    with pytest.raises(ValidationError, match="must grow"):
        LatePolicy(applied_by="grader", windows=[{"until": "+3d", "credit": 50},
                                                 {"until": "+24h", "credit": 40}])
    with pytest.raises(ValidationError, match="more credit"):
        LatePolicy(applied_by="grader", windows=[{"until": "+1d", "credit": 50},
                                                 {"until": "+2d", "credit": 60}])
    with pytest.raises(ValidationError, match="offset"):
        LatePolicy(applied_by="lms", windows=[{"until": "tomorrow", "credit": 50}])
    with pytest.raises(ValidationError, match="grace"):
        LatePolicy(applied_by="lms", grace_minutes=90, windows=[{"until": "+1h", "credit": 5}])


LESSON = Lesson(title="t", exercise="13_moe.py", stub="s.py", tests="tests",
                parts={"ffn": {"points": 4}, "moe": {"points": 6}}, due=DUE,
                late=POLICY)


def entry(ffn: float = 4.0, moe: float = 4.0) -> dict:
    return {"student_id": "s1", "score": ffn + moe, "max_score": 10.0,
            "parts": {"ffn": {"score": ffn, "max_score": 4.0},
                      "moe": {"score": moe, "max_score": 6.0}}}


def applied(doc, lateness, rows=(), seen=None, ext=None):
    seen = {} if seen is None else seen
    return final.apply(doc, LESSON, lateness, ext, list(rows), seen, [], "now")


def test_late_credit_multiplies_the_whole_score():
    doc = applied(entry(), late(timedelta(hours=3)))
    assert doc["raw_score"] == 8.0 and doc["score"] == points.as_points(6554)
    assert doc["late"] == {"minutes": 180, "credit": 80, "applied_by": "grader"}
    assert doc["late_status"] == final.LATE


def test_lms_applies_the_credit_not_the_grader():
    lms = LESSON.model_copy(update={"late": POLICY.model_copy(update={"applied_by": "lms"})})
    doc = final.apply(entry(), lms, late(timedelta(hours=3)), None, [], {}, [], "now")
    assert doc["score"] == 8.0 and doc["late"]["credit"] == 80


def test_unknown_time_has_late_null():
    doc = applied(entry(), final.lateness(POLICY, None, DUE, None))
    assert doc["late"] is None and doc["late_status"] == final.UNKNOWN
    assert doc["score"] == 8.0


def test_the_lms_late_mark_says_late_or_not_but_not_how_late():
    """Issue 56: a Canvas download marks a late file `LATE` (against the due date Canvas
    holds) and gives no time: late or on time is known, how late is not, so the grader
    applies no credit window; a grader extension (a due date Canvas may not hold) makes
    the mark unusable."""
    late = final.lateness(POLICY, None, DUE, None, marked=True)
    assert late.status == final.LATE and late.minutes is None and late.marked
    doc = applied(entry(), late)
    assert doc["late"] == {"minutes": None, "credit": None, "applied_by": "grader"}
    assert doc["score"] == 8.0 and doc["late_marked"] is True
    en, zh = page(doc), page(doc, "zh")
    assert "The LMS marked this submission late" in en and "how late is not known" in en
    assert "The grader applied no late credit" in en
    assert "The grader applied the late credit" not in en and "Handed in" not in en
    assert "标记为迟交" in zh and "未计迟交得分比例" in zh
    on_time = applied(entry(), final.lateness(POLICY, None, DUE, None, marked=False))
    assert on_time["late_status"] == final.ON_TIME and on_time["late"] is None
    assert "did not mark this submission late" in page(on_time)
    ext = final.Extension("s1", DUE + timedelta(days=2), "ill", "ta", "t")
    assert final.lateness(POLICY, None, DUE, ext, marked=True).status == final.UNKNOWN


SET = {"id": "o1", "kind": "set", "student_id": "s1", "part": "moe", "value": 6.0,
       "reason": "regrade", "note": "private", "by": "ta", "at": "t"}


def test_an_override_then_credit_and_no_note_shown():
    new = []
    doc = final.apply(entry(), LESSON, late(timedelta(hours=3)), None, [SET], {}, new, "now")
    assert doc["parts"]["moe"]["score"] == 6.0 and doc["raw_score"] == 8.0
    assert doc["score"] == 8.0  # 10 × 80 %
    assert "note" not in doc["overrides"][0] and "private" not in str(doc)
    assert new == [{"kind": "basis", "target": "o1", "auto": 4.0, "at": "now"}]


def test_a_revoke_restores_the_automatic_score():
    revoke = {"id": "o2", "kind": "revoke", "target": "o1", "by": "ta", "at": "t"}
    doc = applied(entry(), final.lateness(POLICY, DUE, DUE, None), [SET, revoke])
    assert doc["parts"]["moe"]["score"] == 4.0 and doc["overrides"] == []


def test_adjust_is_kept_within_the_part():
    adj = {**SET, "kind": "adjust", "value": 5.0}
    doc = applied(entry(), final.lateness(POLICY, DUE, DUE, None), [adj])
    assert doc["parts"]["moe"]["score"] == 6.0
    down = {**SET, "kind": "adjust", "value": -5.0}
    assert applied(entry(), None, [down])["parts"]["moe"]["score"] == 0.0


def test_an_override_under_a_changed_score_is_stale_and_kept():
    seen = {"o1": 4.0}  # the first run saw 4.0 under it
    doc = applied(entry(moe=2.0), final.lateness(POLICY, DUE, DUE, None), [SET], seen)
    assert doc["overrides"][0]["stale"] is True
    assert doc["parts"]["moe"]["score"] == 6.0  # the override still stands
    assert applied(entry(), None, [SET], seen)["overrides"][0]["stale"] is False


def test_extension_granted_after_the_first_run(tmp_path):
    """The same file, late at the first run, is on time once the extension is written:
    nothing of the first run's penalty stays."""
    zone = UTC
    handed = DUE + timedelta(hours=5)
    first = applied(entry(), final.lateness(POLICY, handed, DUE, None))
    assert first["score"] < 8.0
    final.write_extension(tmp_path, final.Extension("s1", DUE + timedelta(days=1), "ill",
                                                    "ta", "now"), zone)
    ext = final.read_extensions(tmp_path, zone)["s1"]
    second = applied(entry(), final.lateness(POLICY, handed, DUE, ext), ext=ext)
    assert second["score"] == 8.0 and second["late"] is None
    assert second["extension"]["due"] == ext.due.isoformat()


def test_extensions_file_names_bad_lines(tmp_path):
    (tmp_path / "extensions.csv").write_text(
        "student_id,due,reason,granted_by,granted_at\n"
        "s1,2026-10-03 23:59,ill,ta,\n"
        "s2,next week,ill,ta,\n"
        "zz,2026-10-03,ill,ta,\n"
        "s1,excused,again,ta,\n", encoding="utf-8")
    with pytest.raises(final.RecordError) as err:
        final.read_extensions(tmp_path, UTC, {"s1", "s2"})
    text = str(err.value)
    assert "extensions.csv:3: due 'next week'" in text
    assert "extensions.csv:4: 'zz' is not a student" in text
    assert "extensions.csv:2 and 5: two rows for 's1'" in text


def test_extend_replaces_a_row_and_keeps_the_history(tmp_path):
    one = final.Extension("s1", DUE + timedelta(days=1), "ill", "ta", "t1")
    two = final.Extension("s1", None, "hospital", "lead", "t2")
    assert final.write_extension(tmp_path, one, UTC) is None
    assert final.write_extension(tmp_path, two, UTC) == one
    assert final.read_extensions(tmp_path, UTC) == {"s1": two}
    log = (tmp_path / "extensions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(log) == 2 and '"replaced"' in log[1]


def test_a_bad_file_is_not_written_over(tmp_path):
    bad = "student_id,due,reason,granted_by,granted_at\ns1,soon,x,y,\n"
    (tmp_path / "extensions.csv").write_text(bad, encoding="utf-8")
    with pytest.raises(final.RecordError):
        final.write_extension(tmp_path, final.Extension("s2", None, "r", "ta", ""), UTC)
    assert (tmp_path / "extensions.csv").read_text(encoding="utf-8") == bad
    assert not (tmp_path / "extensions.jsonl").exists()


def page(doc: dict, language: str = "en", lesson: Lesson = LESSON) -> str:
    said = final.page_lines(doc, lesson, UTC, language)
    return " ".join([said["final"], *said["lines"], *said["overrides"]])


def test_the_page_says_when_how_late_and_the_credit_in_both_languages():
    ext = final.Extension("s1", DUE + timedelta(hours=-1), "ill", "Dr Lee", "t")
    handed = DUE + timedelta(hours=2, minutes=11)  # 3 h 11 min after the extension
    doc = applied(entry(), final.lateness(POLICY, handed, DUE, ext), ext=ext)
    en = page(doc)
    assert ("Handed in 2026-10-02 02:10, 3 h 11 min after your due date "
            "(2026-10-01 22:59, extended by Dr Lee); late credit 80 %: 8 → 6.4") in en
    assert "The grader applied the late credit" in en
    zh = page(doc, "zh")
    assert "晚 3 小时 11 分钟" in zh and "迟交得分比例 80 %：8 → 6.4" in zh
    assert "由评分程序计算" in zh


def test_the_page_says_the_lms_applies_it():
    lms = LESSON.model_copy(update={"late": POLICY.model_copy(update={"applied_by": "lms"})})
    doc = final.apply(entry(), lms, late(timedelta(hours=3)), None, [], {}, [], "now")
    assert "The LMS applies the late credit" in page(doc, lesson=lms)
    assert "Final score: 8 / 10" in page(doc, lesson=lms)


def test_no_time_no_claim():
    doc = applied(entry(), final.lateness(POLICY, None, DUE, None))
    text = page(doc)
    assert "on time" not in text and "after your due date" not in text
    assert "late credit" not in text


def test_an_override_shows_value_date_and_reason_never_the_note():
    row = {**SET, "at": "2026-10-05T09:00:00+00:00"}
    doc = applied(entry(), final.lateness(POLICY, DUE, DUE, None), [row])
    text = page(doc)
    assert "A TA changed part moe to 6 on 2026-10-05: regrade" in text
    assert "private" not in text and "private" not in page(doc, "zh")


GRADESCOPE = """\
submission_1:
  :submitters:
  - :name: Ava Alvarez
    :sid: 's1'
  :created_at: 2026-10-02 03:10:00.000000000 +00:00
"""


@pytest.mark.parametrize("extended, late_note", [(None, True),
                                                 ({"s1": DUE + timedelta(days=2)}, False),
                                                 ({"s1": None}, False)])
def test_intake_says_late_against_the_students_own_due_date(tmp_path, extended, late_note):
    """The page's intake note and its grade-of-record section agree: with an extension,
    a file after the lesson's due but before the student's is not called late."""
    from grader.intake import submissions as intake

    (tmp_path / "submission_1").mkdir()
    (tmp_path / "submission_1" / "13_moe.py").write_text("x = 1\n")
    (tmp_path / "submission_metadata.yml").write_text(GRADESCOPE)
    got = intake.collect(tmp_path, "13_moe.py", cache=tmp_path / "cache", due=DUE,
                         extended=extended)
    [(sid, _, notes)] = got.found
    assert sid == "s1" and got.handed["s1"] == DUE + timedelta(hours=3, minutes=11)
    assert any("late" in str(n) for n in notes) == late_note


def test_a_hand_edited_override_is_named_not_a_crash(tmp_path):
    (tmp_path / "overrides.jsonl").write_text(
        json.dumps(SET) + "\n" + json.dumps({**SET, "id": "o2", "value": "two"}) + "\n",
        encoding="utf-8")
    with pytest.raises(final.RecordError, match="override record 2 is not one"):
        final.read_overrides(tmp_path)
