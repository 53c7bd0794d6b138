"""A student's check tells the truth: every example student of lessons 10, 12 and 13
through `grader check` three ways (the .py in the project, the same code as a
notebook, and in a freshly built student bundle) gives the same per-part practice
results, and every student with full marks in the graded run passes every practice
test. One bundle build and one graded run per lesson.

The bundle's check runs as a student runs it, in its own `grader check --watch`
process, one per lesson, fed each student's code in turn as saves of one file
(`bundle_checks`); the project's two are that command's steps (`grader.run.practice_run`)
run here, on one warm slot per lesson (`check_here`): a process per file paid a torch
import and a sandbox boot each, most of this file's time, and the bundle's command
checks the same steps. (A one-off check in a bundle, its exit status included, is
tests/e2e/test_bundle.py's.)"""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.pages.feedback import example_in
from grader.run import practice_run
from grader.intake.notebook import load as load_submission
from grader.run.practice_output import exit_status
from grader.text.strings import restored
from tests.conftest import open_slot
from tests.e2e.test_check_watch import watch_saves

ROOT = Path(__file__).resolve().parents[2]
GRADER = [sys.executable, "-m", "grader.cli"]
LESSONS = {"10": "10_rmsnorm", "12": "12_rope", "13": "13_moe"}

pytestmark = pytest.mark.slow
# a lesson's cases run on one xdist worker: tests/conftest.py, BY_LESSON


def students(key: str) -> list[tuple[str, Path]]:
    """(student id, their file) for each example student who handed a file in."""
    found = []
    for folder in sorted((ROOT / "examples" / key).iterdir()):
        files = [f for f in folder.iterdir() if f.suffix in (".py", ".ipynb")] \
            if folder.is_dir() else []
        if files:
            found.append((folder.name, files[0]))
    return found


CASES = [(key, sid, path) for key in LESSONS for sid, path in students(key)]


@pytest.fixture(scope="module")
def lesson_runs(course, student_bundle, sample_class, tmp_path_factory):
    """Per lesson, made lazily, once: its student bundle's check of every student, its
    graded sample class (the suite's), and a warm slot with the lesson's context for
    the project's checks."""
    made: dict = {}

    def get(key: str) -> dict:
        if key not in made:
            bundle = student_bundle(key)
            out, _ = sample_class(key)
            scores = json.loads((out / "scores.json").read_text())
            made[key] = {"bundle": bundle, "out": out,
                         "scores": {s["student_id"]: s for s in scores["students"]},
                         "checked": bundle_checks(bundle, key,
                                                  tmp_path_factory.mktemp(f"bundle{key}"))}
            made[key]["ctx"] = practice_run.context(course, key)
            made[key]["slot"] = open_slot(course, key)
        return made[key]

    yield get
    for runs in made.values():
        runs["slot"].close()


def as_both(path: Path, work: Path, exercise: str) -> tuple[Path, Path]:
    """The student's code as a .py file and as a notebook (one code cell, so line
    numbers in messages agree); a notebook handed in is converted as intake does."""
    work.mkdir(parents=True)
    py, nb = work / exercise, work / (Path(exercise).stem + ".ipynb")
    if path.suffix == ".ipynb":
        converted, _ = load_submission(path, path.name, work / "converted.py")
        py.write_text(converted.read_text())
        nb.write_bytes(path.read_bytes())
    else:
        py.write_text(path.read_text())
        notebook = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_markdown_cell("My work"),
            nbformat.v4.new_code_cell(path.read_text())])
        nbformat.write(notebook, nb)
    return py, nb


def check_here(file: Path, runs: dict) -> tuple[int, dict]:
    """`grader check --json FILE` through the steps grader/cli/staff.py's `check` calls
    (`grader.run.practice_run`), in this process on the lesson's warm slot: its exit status
    and its JSON."""
    checked = practice_run.run_file(runs["ctx"], file, runs["slot"])
    return checked.status, json.loads(json.dumps(checked.outcome, ensure_ascii=False))


def bundle_checks(bundle: Path, key: str, work: Path) -> dict[str, dict]:
    """Each example student's report from `grader check --watch --json` in the lesson's
    bundle, run there as a student runs it, on one file saved with each one's code in
    turn (as a .py, as `as_both` makes it): one process and sandbox boot per lesson."""
    file = work / f"{LESSONS[key]}.py"
    versions = [(sid, as_both(path, work / sid, file.name)[0].read_text())
                for sid, path in students(key)]
    reports, _ = watch_saves(file, [code for _, code in versions], bundle,
                             {**os.environ, "PYTHONPATH": str(bundle)}, ("--lesson", key))
    return {sid: report for (sid, _), report in zip(versions, reports)}


def practice(report: dict) -> dict:
    """Per part: the practice tests' outcomes and messages, and the likely mistake."""
    return {name: {"passed": part["passed"], "total": part["total"],
                   "mistake": (part["likely_mistake"] or {}).get("id"),
                   "tests": [(t["name"], t["outcome"], t["message"]) for t in part["tests"]]}
            for name, part in report["parts"].items()}


@pytest.mark.parametrize(("key", "sid", "path"), CASES,
                         ids=[f"{key}-{sid}" for key, sid, _ in CASES])
def test_three_checks_agree_with_each_other_and_the_graded_run(key, sid, path, lesson_runs,
                                                               tmp_path):
    runs = lesson_runs(key)
    exercise = f"{LESSONS[key]}.py"
    py, nb = as_both(path, tmp_path / "work", exercise)
    project_code, project = check_here(py, runs)
    notebook_code, notebook = check_here(nb, runs)
    bundle = runs["checked"][sid]
    bundle_code = exit_status(bundle)  # what a one-off check in the bundle exits with
    # the notebook is one cell holding the file: its line N is the file's line N
    as_file = json.dumps(practice(notebook), ensure_ascii=False).replace(
        "(code cell 1, line ", f"({exercise}, line ")
    assert as_file == json.dumps(practice(project), ensure_ascii=False), \
        "the notebook's check differs"
    assert practice(bundle) == practice(project), "the bundle's check differs"
    assert bundle["examples"] == project["examples"], "the bundle's examples differ"
    # the shapes question's marks: one step of practice_run.STEPS for all three
    assert project.get("written") == notebook.get("written") == bundle.get("written")
    assert ("written" in project) == bool(runs["ctx"].lesson.written)
    assert project_code == notebook_code == bundle_code
    assert any(n.startswith("Graded the ") for n in notebook["notes"])
    parts = runs["scores"][sid]["parts"].values()  # the code's (written points aside)
    if sum(p["score"] for p in parts) == sum(p["max_score"] for p in parts):
        assert project_code == 0 and project["passed"] == project["total"] > 0, project
    # the smallest failing example: the check's is the page's, for every part failing in
    # both (the same fresh input and the reference's output; the student's side of an
    # error names the test it was raised in), and a check shows none for a part that passes
    failing = {name for name, part in project["parts"].items() if part["passed"] < part["total"]}
    assert set(project["examples"]) <= failing
    # (a snippet whose "yours gives" the grader said is kept per language: Said's texts)
    paged = {part: example_in(restored(e), runs["ctx"].course.language) for part, e in
             json.loads((runs["out"] / "results" / f"{sid}.json").read_text())["examples"]
             .items()}
    for part in failing & set(paged):
        assert part in project["examples"], part
        mine, theirs = (e.split("# the reference gives:", 1)[1]  # (yours: first)
                        for e in (project["examples"][part], paged[part]))
        assert mine == theirs, part


def test_a_missing_file_is_named_and_exits_2(tmp_path):
    done = subprocess.run([*GRADER, "check", "--lesson", "13", str(tmp_path / "missing.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"no such file: {tmp_path / 'missing.py'}" in done.stderr
    assert "practice tests" not in done.stdout + done.stderr


def test_a_missing_file_is_named_before_any_lesson_is_guessed():
    """Without --lesson, a file that is not there is named, not asked about."""
    done = subprocess.run([*GRADER, "check", "nope.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "no such file: nope.py" in done.stderr and "which lesson" not in done.stderr


def test_the_projects_check_keeps_its_practice_results_and_survives_a_damaged_copy(tmp_path):
    """In the project, a check keeps the practice results it computed from the solution
    in the user's cache (the next one need not load the solution); a damaged copy
    there is computed afresh, not an error."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for damage in (False, True):
        if damage:
            (kept,) = (tmp_path / "minimind-grader" / "practice").glob("*-13-*.bin")
            kept.write_bytes(kept.read_bytes()[:1000])
        done = subprocess.run([*GRADER, "check", "solutions/13_moe.py"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    (kept,) = (tmp_path / "minimind-grader" / "practice").glob("*-13-*.bin")
    assert kept.stat().st_size > 1000


def test_a_syntax_error_is_shown_once_with_its_caret_and_a_hint():
    done = subprocess.run([*GRADER, "check", "--lesson", "13",
                           "examples/13/carol/13_moe.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1
    assert done.stdout.count("SyntaxError") == 1 and done.stdout.count("line 49") == 2
    code, caret = done.stdout.split('line 49\n', 2)[1].splitlines()[:2]
    assert code.strip().startswith("def dispatch(") and caret.strip() == "^" * 13
    assert code.index("nn.ModuleList") == caret.index("^")
    assert "hint: Python could not read your file" in done.stdout
