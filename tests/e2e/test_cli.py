"""`grader run` on the sample class as a TA runs it: scores, reruns, resume, check."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import staff as cli

ROOT = Path(__file__).resolve().parents[2]
GRADER = [sys.executable, "-m", "grader.cli"]
EXPECTED = {"alice": 10.0, "carol": 0.0, "dave": 0.0, "erin": 0.0, "heidi": 0.0, "ivan": 10.0}
# the shapes question (q6, 1.25 points, 0.25 a field) in the sample's answers; the text
# questions await a TA (no marks beside a fresh checkout's course.yml)
SHAPES_MARK = {"alice": 1.25, "bob": 1.0, "carol": 0.0, "dave": 0.0, "erin": 0.0,
               "frank": 0.75, "grace": 0.75, "heidi": 1.0, "ivan": 1.25}


def grade(out: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*GRADER, "run", "--lesson", "13", "--out", str(out), "--jobs", "2",
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def first_run(sample_class):
    """The sample class graded once for the run (tests/conftest.py): OUT, stderr."""
    return sample_class("13")


def by_id(out: Path) -> dict[str, dict]:
    doc = json.loads((out / "scores.json").read_text())
    return {s["student_id"]: s for s in doc["students"]}


@pytest.mark.fast_lane
def test_sample_class_scores(first_run):
    out, stderr = first_run
    students = by_id(out)
    assert set(students) == set(EXPECTED) | {"bob", "frank", "grace"}
    for sid, score in EXPECTED.items():
        assert sum(p["score"] for p in students[sid]["parts"].values()) == score, sid
    for sid, s in students.items():
        assert s["written"]["q6"]["score"] == SHAPES_MARK[sid], sid
        code = sum(p["score"] for p in s["parts"].values())
        assert s["score"] == code + sum(q["score"] for q in s["written"].values()), sid
    assert students["alice"]["written"]["q1"]["status"] == "awaiting"
    assert students["dave"]["written"]["q1"]["status"] == "no_answer"
    assert students["ivan"]["written"]["q6"]["status"] == "auto"  # from its markdown
    bob, frank, grace = students["bob"], students["frank"], students["grace"]
    assert bob["parts"]["router"]["diagnosis"]["id"] == "no_renorm"
    assert {p for p, v in bob["parts"].items() if v["score"] < v["max_score"]} == {"router"}
    assert frank["status"] == "timeout"
    assert frank["parts"]["ffn"]["score"] == 2.0 and frank["parts"]["router"]["score"] == 2.0
    assert frank["parts"]["dispatch"]["score"] == 0.0
    assert any("timed out after 5 s" in t["message"] for t in frank["tests"])
    assert grace["parts"]["ffn"]["diagnosis"]["id"] == "gelu"
    assert grace["parts"]["dispatch"]["diagnosis"]["id"] == "overwrite"
    assert students["erin"]["status"] == "missing"
    assert "SyntaxError" in students["carol"]["problem"]
    assert any("magic" in n or "shell" in n for n in students["ivan"]["notes"])
    assert all(s["sandboxed"] for s in students.values())
    assert "scores.json" in stderr and "feedback" in stderr


@pytest.mark.fast_lane
def test_every_student_gets_a_page_and_a_raw_log(first_run):
    out, _ = first_run
    for sid in by_id(out):
        page = (out / "feedback" / f"{sid}.html").read_text()
        assert sid in page and "<script>" not in page
        raw = json.loads((out / "raw" / f"{sid}.json").read_text())
        assert raw["tests"] and {"nodeid", "outcome"} <= set(raw["tests"][0])
    assert (out / "report.html").exists()


def written(folder: Path) -> dict[str, tuple[int, int]]:
    """Each file's inode and modification time: a file written again (atomically, so a
    new inode) or touched shows here, whatever its bytes."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_unchanged_rerun_skips_everything(first_run, tmp_path):
    out = tmp_path / "out"  # a copy (times kept): the run's sample class is shared
    shutil.copytree(first_run[0], out)
    before = {p.name: p.read_bytes() for p in (out / "feedback").iterdir()}
    results, raw = written(out / "results"), written(out / "raw")
    proc = grade(out)
    assert "unchanged (skipped)" in proc.stderr and "│ 9 " in proc.stderr
    # what remains is counted and named, though nothing was graded now (it said 0 and 0)
    assert re.search(r"errors \(missing, unreadable, import\)\s*│\s*3\s", proc.stderr)
    assert re.search(r"timeouts\s*│\s*1\s", proc.stderr)
    assert "errors: carol (import_error), erin (missing), heidi (import_error)" in proc.stderr
    assert "timeouts: frank" in proc.stderr
    assert {p.name: p.read_bytes() for p in (out / "feedback").iterdir()} == before
    # nobody was graded again: no result or raw log was written (the benchmark
    # script reports how much faster that makes the rerun, as a ratio)
    assert (written(out / "results"), written(out / "raw")) == (results, raw)


def same_bytes(out: Path, first: Path) -> None:
    """scores.json and every page as the first run's (but for the OUT path)."""
    assert (out / "scores.json").read_bytes().replace(bytes(out), b"") == \
        (first / "scores.json").read_bytes().replace(bytes(first), b"")
    for page in (first / "feedback").iterdir():
        assert (out / "feedback" / page.name).read_bytes() == page.read_bytes(), page.name


def test_forced_regrade_grades_again_to_the_same_bytes(first_run, tmp_path):
    """--force grades a student whose result is current again (a new result file),
    to the same page; those not handed in this time are left as they were."""
    out = tmp_path / "out"
    shutil.copytree(first_run[0], out)
    subs = tmp_path / "class"
    for sid in ("alice", "bob"):  # full marks and a known mistake
        shutil.copytree(ROOT / "examples" / "13" / sid, subs / sid)
    results = written(out / "results")
    grade(out, "--force", "--submissions", str(subs))
    now = written(out / "results")
    assert {name for name in results if now[name] != results[name]} == {"alice.json",
                                                                         "bob.json"}
    for page in ("alice.html", "bob.html"):
        assert (out / "feedback" / page).read_bytes() == \
            (first_run[0] / "feedback" / page).read_bytes(), page


def count(out: Path) -> int:
    return len(list((out / "results").glob("*.json")))


def started(out: Path, at_least: int, **popen) -> subprocess.Popen:
    """`grader run` in a session of its own, once `at_least` results are in OUT."""
    proc = subprocess.Popen([*GRADER, "run", "--lesson", "13", "--out", str(out),
                             "--jobs", "2"], cwd=ROOT, start_new_session=True, **popen)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and count(out) < at_least and proc.poll() is None:
        time.sleep(0.05)
    return proc


def test_ctrl_c_then_a_kill_then_the_rerun_resumes_to_the_same_bytes(first_run, tmp_path):
    """Ctrl-C stops a run cleanly (it printed a worker's traceback and "hidden tests
    ... did not run"); a rerun SIGKILLed midway loses nothing saved; the last rerun
    grades the rest, and the class ends as the run of it in one go did, byte for byte."""
    out, _ = first_run
    resumed = tmp_path / "resumed"
    # as a terminal starts it: a test run launched in the background (`make test &`)
    # ignores SIGINT, which its children would inherit, and Python then never raises
    # KeyboardInterrupt
    proc = started(resumed, 2, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends the whole group
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "did not run" not in stderr, stderr
    assert re.search(r"stopped \(Ctrl-C\) with \d of 9 graded; their results are kept: "
                     r"rerun the same command to resume\.", stderr), stderr
    stopped_at = count(resumed)
    assert 0 < stopped_at < 9
    proc = started(resumed, stopped_at + 1, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert stopped_at <= count(resumed) < 9
    grade(resumed)
    same_bytes(resumed, out)


@pytest.fixture
def here(monkeypatch):
    """`grader ARGS` run in this process, from the project's folder (no signal is tested
    with it: a process each paid a torch import): its exit status and output."""
    monkeypatch.chdir(ROOT)

    def invoke(*args: str) -> subprocess.CompletedProcess:
        done = CliRunner().invoke(cli.main, list(args))
        if done.exception is not None and not isinstance(done.exception, SystemExit):
            raise done.exception
        return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)

    return invoke


def run_on(here, tmp_path: Path, submissions: Path, *extra: str) -> subprocess.CompletedProcess:
    return here("run", "--lesson", "13", "--submissions", str(submissions),
                "--out", str(tmp_path / "o"), *extra)


def test_a_flat_folder_or_one_students_folder_names_the_layout(here, tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    for sid in ("alice", "bob"):
        (flat / f"{sid}.py").write_text((ROOT / "examples" / "13" / sid / "13_moe.py").read_text())
    proc = run_on(here, tmp_path, flat)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (f"no submissions found in {flat}: expected {flat}/<student_id>/13_moe.py (one "
            "folder per student)") in " ".join(proc.stderr.split())
    assert (f"It holds alice.py, bob.py directly: put each student's file in a folder named "
            f"after them, e.g. {flat}/alice/13_moe.py") in " ".join(proc.stderr.split())
    proc = run_on(here, tmp_path, ROOT / "examples" / "13" / "alice")
    assert proc.returncode == 1
    assert ("It holds 13_moe.py itself, as one student's folder does: give the folder that "
            "holds each student's folder") in " ".join(proc.stderr.split())


def test_a_canvas_gradebook_export_is_a_roster(here, tmp_path):
    """Its test student used to end `grader run` in a 30-line traceback."""
    text = (ROOT / "course.yml").read_text()
    for folder in ("solutions", "exercises", "hidden_tests", "examples"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    (tmp_path / "course.yml").write_text("roster: gradebook.csv\n" + text)
    (tmp_path / "gradebook.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Lesson 13 (5)\n"
        "    Points Possible,,,,,10.00\n"
        "\"Liddell, Alice\",4001,30000001,alice,SEC-001,\n"
        "\"Student, Test\",4999,,,SEC-001,\n"
        "\"Nobody, No\",,,,SEC-001,\n")
    flat = tmp_path / "flat"
    flat.mkdir()
    proc = run_on(here, tmp_path, flat, "--course", str(tmp_path / "course.yml"))
    assert "Traceback" not in proc.stderr
    assert ('note: 1 roster row(s) without a student id left out of the roster: '
            'gradebook.csv:5 "Nobody, No"') in " ".join(proc.stderr.split())


def check(course: Path, file: str) -> subprocess.CompletedProcess:
    """`grader check` as a student runs it, its own process (in this one, a run was seen
    to kill the solution's first router test, unexplained yet: see the suite's notes)."""
    return subprocess.run([*GRADER, "check", "--course", str(course), file], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_check_for_students(far_course):
    ok = check(far_course, "solutions/13_moe.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "router" in ok.stdout and "practice tests" in ok.stdout
    stub = check(far_course, "exercises/13_moe.py")
    assert stub.returncode == 1 and "not implemented" in stub.stdout


def test_check_names_a_mistake(far_course, tmp_path):
    wrong = tmp_path / "13_moe.py"
    wrong.write_text((ROOT / "solutions" / "13_moe.py").read_text().replace(
        "F.softmax(gate(x_flat), dim=-1)", "F.softmax(gate(x_flat), dim=0)"))
    proc = check(far_course, str(wrong))
    assert proc.returncode == 1 and "softmax runs over the tokens" in proc.stdout
    zh = subprocess.run([*GRADER, "check", "--language", "zh", str(wrong)], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
    assert zh.returncode == 1 and "softmax 沿 token 维而不是 expert 维计算" in zh.stdout, \
        zh.stdout + zh.stderr  # issue 25 item 9: check had no --language


def test_bad_course_file_and_missing_folder_are_clear(here, tmp_path):
    bad = tmp_path / "course.yml"
    bad.write_text((ROOT / "course.yml").read_text().replace("points: 2,", "points: two,", 1))
    proc = here("run", "--course", str(bad), "--lesson", "13")
    assert proc.returncode != 0 and "points" in proc.stderr and "course.yml:" in proc.stderr
    proc = here("run", "--lesson", "13", "--submissions", str(tmp_path / "none"),
                "--out", str(tmp_path / "o"))
    assert proc.returncode != 0 and "no submissions at" in proc.stderr


def test_messages_name_the_file_and_the_course_option(tmp_path):
    """Issue 25 item 8: `grader check nope.py` said "which lesson? give --lesson", and a
    command run outside the course's folder gave no hint of --course."""
    proc = subprocess.run([*GRADER, "check", "nope.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "no such file: nope.py" in proc.stderr, proc.stderr
    proc = subprocess.run([*GRADER, "run", "--lesson", "13"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    said = " ".join(proc.stderr.split())
    assert proc.returncode != 0 and "give --course path/to/course.yml" in said, said


def test_check_finds_the_course_beside_the_grader_from_any_folder(tmp_path):
    """Issue 25 item 7: a student who installed the bundle into their own venv ran
    `grader check` in their work folder and got "cannot read course.yml". The course
    beside the grader's package is used: here it answers about its lessons."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "13_moe.py").write_text("x = 1\n")
    proc = subprocess.run([*GRADER, "check", "--lesson", "99", "13_moe.py"], cwd=work,
                          capture_output=True, text=True, timeout=120)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "cannot read" not in said and "99" in said, said


def test_an_export_without_a_row_for_a_graded_student_fails(tmp_path):
    """Issue 25: `grader export --to moodle` wrote a moodle.csv with its header only
    and exited 0. A graded student without a row is now named and the export fails."""
    text = (ROOT / "course.yml").read_text()
    for folder in ("solutions", "exercises", "hidden_tests", "examples"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    (tmp_path / "course.yml").write_text(
        "moodle_identifier: email\nroster:\n  alice: {email: alice@u.edu}\n" + text)
    out = tmp_path / "out"
    out.mkdir()
    (out / "scores.json").write_text(json.dumps({
        "lesson": "13", "course": "minimind-llm", "version": "v", "max_score": 10.0,
        "students": [{"student_id": sid, "lesson": "13", "status": "graded", "score": 5.0,
                      "max_score": 10.0, "parts": {}, "tests": []}
                     for sid in ("alice", "bob")]}))
    proc = subprocess.run([*GRADER, "export", "--course", str(tmp_path / "course.yml"),
                           "--lesson", "13", "--to", "moodle", "--out", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    said = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 1 and "1 graded student(s) have no row" in said, said
    assert "moodle: bob: not in the roster" in said
    # piped, the roster report's lines are whole (rich wrapped them at 80 columns)
    assert ("Graded but not in the roster (exported under their student id where the "
            "format allows; the LMS may not match them):") in proc.stdout + proc.stderr
    assert (out / "export" / "moodle.csv").read_text().count("alice@u.edu") == 1


def test_release_check(here):
    proc = here("release", "--lesson", "13", "--check")
    assert proc.returncode == 0, proc.stderr
