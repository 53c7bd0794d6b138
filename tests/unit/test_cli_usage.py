"""The command line's conventions: usage errors exit 2 with a usage message, every
option has help, one name per thing (old spellings still work, unshown, with a
warning), a version,
and no traceback but a grader bug's, which asks to be reported."""
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from grader.cli import staff as cli

ROOT = Path(__file__).resolve().parents[2]


def grader(*args: str) -> click.testing.Result:
    return CliRunner().invoke(cli.main, list(args))


def test_version():
    result = grader("--version")
    assert result.exit_code == 0 and result.output.startswith("grader, version ")


@pytest.mark.parametrize("command", ["run", "audit", "selftest"])
def test_jobs_zero_is_a_usage_error(command):
    """--jobs 0 was accepted, then every submission was 'not graded (a worker stopped)'."""
    result = grader(command, "--lesson", "13", "--jobs", "0")
    assert result.exit_code == 2
    assert "Usage: " in result.output
    assert "Invalid value for '--jobs': 0 is not in the range x>=1." in result.output


def test_an_unknown_lesson_and_format_are_usage_errors():
    result = grader("report", "--course", str(ROOT / "course.yml"), "--lesson", "99")
    assert result.exit_code == 2 and "Usage: " in result.output
    assert "Invalid value for '--lesson': course.yml has no lesson '99'" in result.output
    result = grader("export", "--course", str(ROOT / "course.yml"), "--lesson", "13",
                    "--to", "canvas,blackboard")
    assert result.exit_code == 2 and "Usage: " in result.output
    assert "unknown format(s) blackboard; known: gradescope, canvas" in result.output


def course_without_out(tmp_path: Path) -> Path:
    """A course whose lesson sets no `out`, so its graded folder must be given."""
    text = (ROOT / "course.yml").read_text().replace("    out: out/13\n", "")
    for folder in ("solutions", "exercises", "hidden_tests"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    (tmp_path / "course.yml").write_text(text)
    return tmp_path / "course.yml"


@pytest.mark.parametrize("command", [["report"], ["export", "--to", "canvas"],
                                     ["upload", "--to", "lti"]])
def test_no_results_folder_is_a_usage_error(tmp_path, command):
    """report, export and upload used to end in a TypeError traceback."""
    result = grader(command[0], "--course", str(course_without_out(tmp_path)),
                    "--lesson", "13", *command[1:])
    assert result.exit_code == 2 and "Usage: " in result.output
    assert "give --out (course.yml sets no `out` for this lesson)" in result.output


def test_every_option_has_help():
    missing = [f"{name} {opt.opts[0]}" for name, command in cli.main.commands.items()
               for opt in command.params
               if isinstance(opt, click.Option) and not opt.hidden and not opt.help]
    assert missing == []


def test_one_name_for_the_graded_folder_and_for_where_a_command_writes():
    """Every command names OUT --out: run and similarity write it, export, report and
    upload read it, student-bundle and autograder-zip write there."""
    for name in ("run", "similarity", "export", "report", "upload", "student-bundle",
                 "autograder-zip"):
        shown = [o for p in cli.main.commands[name].params if not getattr(p, "hidden", False)
                 for o in p.opts]
        assert "--out" in shown and not {"--results", "--dest"} & set(shown), name
    assert "--dest" not in grader("student-bundle", "--help").output
    assert "--results" not in grader("export", "--help").output


def test_the_old_spelling_still_works_and_says_it_is_deprecated(tmp_path):
    results = tmp_path / "graded"
    (results / "results").mkdir(parents=True)
    for spelling in ("--results", "--out"):
        result = grader("report", "--course", str(ROOT / "course.yml"), "--lesson", "13",
                        spelling, str(results))
        assert result.exit_code == 1, result.output
        assert f"nothing graded in {results}" in result.output
        warned = "warning: --results is deprecated and will be removed; use --out"
        assert (warned in result.output) is (spelling == "--results")


def test_a_roster_problem_is_a_message_not_a_traceback(tmp_path):
    course = course_without_out(tmp_path)
    course.write_text("roster: people.csv\n" + course.read_text())
    (tmp_path / "people.csv").write_text("student_id,name\nann,A\nann,B\n")
    (tmp_path / "graded").mkdir()
    (tmp_path / "graded" / "scores.json").write_text(json.dumps(
        {"lesson": "13", "students": []}))
    result = grader("export", "--course", str(course), "--lesson", "13", "--to", "canvas",
                    "--out", str(tmp_path / "graded"))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "people.csv:3: student id 'ann' appears twice (first on line 2)" in result.output


def test_a_grader_bug_shows_its_traceback_and_asks_to_be_reported(monkeypatch):
    def broken(path: str):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "_course", broken)
    result = grader("report", "--lesson", "13")
    assert result.exit_code == 70
    assert "Traceback" in result.output and "ZeroDivisionError: a bug" in result.output
    assert result.output.rstrip().endswith(cli.BUG)


def test_ctrl_c_says_how_to_resume(monkeypatch):
    def interrupted(path: str):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_course", interrupted)
    result = grader("report", "--lesson", "13")
    assert result.exit_code == 130
    assert "Aborted!" not in result.output and "Traceback" not in result.output
    assert "stopped (Ctrl-C). What was written before is kept; rerun the same command to " \
        "resume." in result.output


def test_a_broken_scores_file_is_a_message(tmp_path):
    (tmp_path / "scores.json").write_text("{not json")
    result = grader("export", "--course", str(ROOT / "course.yml"), "--lesson", "13",
                    "--to", "canvas", "--out", str(tmp_path))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{tmp_path / 'scores.json'} is not the JSON `grader run` writes" in result.output


def test_the_machines_refusal_is_a_message(monkeypatch):
    def refused(path: str):
        raise PermissionError(13, "Permission denied", "/srv/out/report.html")

    monkeypatch.setattr(cli, "_course", refused)
    result = grader("report", "--lesson", "13")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "Error: /srv/out/report.html: Permission denied" in result.output


def test_a_required_folder_may_be_given_by_its_old_spelling(tmp_path):
    assert grader("student-bundle", "--lesson", "13").exit_code == 2
    result = grader("student-bundle", "--course", str(ROOT / "course.yml"), "--lesson", "99",
                    "--dest", str(tmp_path))
    assert result.exit_code == 2 and "Missing option" not in result.output
    assert "no lesson '99'" in result.output


def test_one_vocabulary_for_the_shared_options():
    """--course, --lesson, --language and --trust-worksheet say the same in every
    command that has them (grader/cli/options.py declares each once), --language offers
    the languages the strings have, and the commands that keep the grade of record work
    beside course.yml: they take no OUT."""
    from grader.text.strings import STRINGS

    helps: dict[str, set] = {}
    for name, command in cli.main.commands.items():
        for p in command.params:
            if isinstance(p, click.Option) and p.opts[0] in ("--course", "--lesson",
                                                             "--trust-worksheet"):
                helps.setdefault(f"{name == 'check'} {p.opts[0]}", set()).add(p.help)
            if p.opts[0] == "--language":
                assert list(p.type.choices) == list(STRINGS), name
                assert "(default: " in p.help, name
    assert helps and all(len(h) == 1 for h in helps.values()), helps
    for name in ("mark", "extend", "override", "regrade", "history"):
        assert not [p for p in cli.main.commands[name].params if "--out" in p.opts], name
