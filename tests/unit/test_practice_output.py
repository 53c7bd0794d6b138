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


def test_grader_check_names_the_full_width_character_and_its_line():
    from grader.record import TestRecord
    from grader.text.strings import STRINGS

    error = {"type": "SyntaxError", "kind": "import", "traceback": "",
             "message": "invalid character '：' (U+FF1A) (13_moe.py, line 38)"}
    tests = [TestRecord(name="test_x", part="ffn", practice=True, outcome="failed",
                        error=error)]
    assert practice_output._typed(tests, [], STRINGS["en"]) == {
        "char": "：", "code": "U+FF1A", "ascii": ":", "line": "Line 38"}
    plain = {**error, "message": "invalid syntax (13_moe.py, line 3)"}
    tests[0].error = plain
    assert practice_output._typed(tests, [], STRINGS["en"]) is None
