"""`grader extend`, `override`, `regrade` and `history`: the TAs' commands of the grade
of record write only beside course.yml, refuse bad input before writing anything, and
the history shows every step in order."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from grader.cli import staff as cli

ROOT = Path(__file__).resolve().parents[2]


def course(tmp_path, lesson: str = "") -> Path:
    """The repository's course.yml with `lesson` lines in lesson 13 (a due date)."""
    lines = (ROOT / "course.yml").read_text(encoding="utf-8").splitlines()
    at = lines.index("    exercise: 13_moe.py")
    lines[at:at] = ["    due: 2026-10-01T23:59:00+00:00",
                    *(f"    {x}" for x in lesson.splitlines() if x)]
    (tmp_path / "course.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for d in ("solutions", "exercises", "hidden_tests", "examples", "tests"):
        (tmp_path / d).symlink_to(ROOT / d)
    return tmp_path / "course.yml"


def grader(course_yml: Path, *args: str):
    return CliRunner().invoke(cli.main, [args[0], "--course", str(course_yml), "--lesson",
                                         "13", *args[1:]])


def test_regrade_opened_listed_resolved_and_in_the_history(tmp_path):
    yml = course(tmp_path)
    done = grader(yml, "regrade", "--student", "s1", "--part", "moe", "--request", "why?")
    assert done.exit_code == 0 and "r1: opened" in done.output, done.output
    assert "1 open regrade request(s)" in grader(yml, "regrade").output
    assert grader(yml, "override", "--student", "s1", "--part", "moe", "--set", "2",
                  "--reason", "regrade r1").exit_code == 0
    assert grader(yml, "regrade", "--resolve", "r1", "--reason", "accepted").exit_code == 0
    assert "0 open regrade request(s)" in grader(yml, "regrade").output
    again = grader(yml, "regrade", "--resolve", "r1", "--reason", "twice")
    assert again.exit_code == 1 and "no open regrade request 'r1'" in again.output
    trail = grader(yml, "history", "--student", "s1").output
    order = [trail.index(s) for s in ("regrade request r1 on part moe", "override o1",
                                      "regrade request r1 resolved")]
    assert order == sorted(order), trail


def test_regrade_window_is_checked(tmp_path):
    yml = course(tmp_path, 'regrades: {opens: "+24h", closes: "2026-10-02 00:00"}')
    done = grader(yml, "regrade", "--student", "s1", "--part", "moe", "--request", "x")
    assert done.exit_code == 1 and "regrade requests closed at 2026-10-02" in done.output
    assert not (tmp_path / "grades" / "13" / "regrades.jsonl").exists()


def test_bad_input_writes_nothing(tmp_path):
    yml = course(tmp_path)
    folder = tmp_path / "grades" / "13"
    cases = [
        (("extend", "--student", "s1", "--until", "next week", "--reason", "r"),
         "'next week' is not a date"),
        (("extend", "--student", "s1", "--reason", "r"), "give one of --until"),
        (("override", "--student", "s1", "--part", "nope", "--set", "1", "--reason", "r"),
         "no part 'nope'"),
        (("override", "--student", "s1", "--part", "moe", "--set", "9", "--reason", "r"),
         "is not from 0 to part 'moe'"),
        (("override", "--student", "s1", "--revoke", "o7", "--reason", "r"),
         "s1 has no override 'o7'"),
    ]
    for args, said in cases:
        done = grader(yml, *args)
        assert done.exit_code != 0 and said in " ".join(done.output.split()), done.output
    assert not folder.exists() or not any(folder.iterdir())


def test_an_unknown_student_is_refused_with_a_roster(tmp_path):
    yml = course(tmp_path)
    yml.write_text("roster:\n  s1: {name: Ann}\n" + yml.read_text(encoding="utf-8"),
                   encoding="utf-8")
    done = grader(yml, "extend", "--student", "zz", "--excuse", "--reason", "r")
    assert done.exit_code == 2 and "'zz' is not on the course's roster" in done.output
    assert grader(yml, "extend", "--student", "s1", "--excuse", "--reason",
                  "r").exit_code == 0


def test_the_class_report_lists_open_requests_and_late_work(tmp_path):
    from grader import config
    from grader.judge.tally import Tally
    from grader.pages.report import render_report

    loaded = config.load(course(tmp_path))
    page = render_report(Tally(), loaded, "13", "en", record=[
        {"student_id": "s2", "late_status": "late", "minutes": 191, "credit": 80,
         "applied_by": "grader", "extension": "", "overrides": ["o1 moe set 2 (stale)"],
         "score": 6.4, "raw_score": 8.0}],
        regrades=[{"id": "r1", "student_id": "s1", "part": "moe", "text": "<b>why</b>",
                   "at": "2026-10-03T10:00:00+00:00"}])
    text = " ".join(page.split())
    assert "Open regrade requests" in text and "&lt;b&gt;why&lt;/b&gt;" in text
    assert "3 h 11 min late" in text and "o1 moe set 2 (stale)" in text


def test_a_question_is_marked_in_its_one_home(tmp_path):
    from grader import config
    from grader.intake.answers import read_answers
    from grader.judge.written import grades_folder, marks, record_answers

    yml = course(tmp_path)
    missing = grader(yml, "override", "--student", "s1", "--question", "q1", "--set", "1",
                     "--reason", "r")
    assert missing.exit_code == 1 and "no answer of s1 to q1" in missing.output
    f = tmp_path / "class" / "13_moe.py"
    f.parent.mkdir()
    f.write_text('ANSWER_Q1 = "attention mixes tokens"\n', encoding="utf-8")
    written = config.load(yml).lesson("13").written
    record_answers(grades_folder(tmp_path, "13"), {"s1": read_answers(f, written)})
    done = grader(yml, "override", "--student", "s1", "--question", "q1", "--set", "1.5",
                  "--reason", "clear, but no example")
    assert done.exit_code == 0, done.output
    m = marks(grades_folder(tmp_path, "13"))[("s1", "q1")]
    assert (m.points, m.comment) == (1.5, "clear, but no example")
    assert not (grades_folder(tmp_path, "13") / "overrides.jsonl").exists()
    assert "written mark q1: 1.5 (clear, but no example)" in grader(yml, "history").output
