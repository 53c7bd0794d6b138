"""What `grader check` reports: its exit status, and the bundle's command line."""
from click.testing import CliRunner

from grader.cli import staff as cli, student as student_cli
from grader.run import practice_output


def report(status: str, outcomes: list[str]) -> dict:
    return {"status": status, "passed": outcomes.count("passed"), "total": len(outcomes)}


def test_exit_status_follows_the_practice_tests_and_the_file():
    assert practice_output.exit_status(report("graded", ["passed", "passed"])) == 0
    assert practice_output.exit_status(report("graded", ["passed", "failed"])) == 1
    assert practice_output.exit_status(report("import_error", ["failed"])) == 1
    assert practice_output.exit_status(report("graded", [])) == 1
    for status in ("missing", "unreadable"):
        assert practice_output.exit_status(report(status, ["failed"])) == 2


def test_the_bundles_command_line_offers_the_students_commands_only():
    assert set(student_cli.student.commands) == {"check"}
    shown = CliRunner().invoke(student_cli.student, ["--help"]).output
    assert "check" in shown and "audit" not in shown and "upload" not in shown
    assert {"check", "run", "audit"} <= set(cli.main.commands)
