"""The terminal shows text an instructor or a student wrote as written: rich markup in
it ("[cos, cos]", a test id's "[float32-64]") is never interpreted."""
import io
from pathlib import Path

from rich.console import Console

from grader.run import practice_output
from grader import config
from grader.cli import console
from grader.record import GradeRecord
from grader.author.selftest.findings import Finding

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["torch.cat([cos, cos], dim=-1)", "[bold]not bold[/bold]", "x[mask] \\ [/]"]


def shown(print_fn, *args) -> str:
    out = io.StringIO()
    print_fn(*args, Console(file=out, width=10_000, color_system=None, highlight=False))
    return out.getvalue()


def printed(record: GradeRecord, course: config.Course, out: Console) -> None:
    """What `grader check` prints for the record (lesson 10, no notes)."""
    practice_output.print_outcome(record, practice_output.outcome(record, course, "10", []), course,
                             "10", out)


def test_check_output_keeps_brackets():
    course = config.load(ROOT / "course.yml")
    part = course.lesson("10").parts["norm"].model_copy(update={"title": TEXTS[1]})
    lesson = course.lesson("10").model_copy(update={"parts": {"norm": part}})
    course = course.model_copy(update={"lessons": {"10": lesson}})
    diagnosis = {"id": "m", "title": {"en": TEXTS[0]}, "hint": {"en": TEXTS[2]}}
    test = {"name": "test_output[float32-48-1e-06-1]", "part": "norm", "outcome": "failed",
            "message": TEXTS[2], "error": None, "checks": []}
    record = {"status": "graded", "problem": "", "tests": [test], "output": TEXTS[1],
              "parts": {"norm": {"diagnosis": diagnosis}}}
    text = shown(lambda *a: printed(GradeRecord.from_json(record), course, a[-1]))
    for expected in [*TEXTS, test["name"]]:
        assert expected in text, expected
    failed = {**record, "status": "import_error", "problem": "SyntaxError: [x for x in"}
    text = shown(lambda *a: printed(GradeRecord.from_json(failed), course, a[-1]))
    assert failed["problem"] in text


def test_selftest_findings_keep_brackets():
    found = [Finding("hints", "m[1]", "failed", TEXTS[0])]
    text = shown(lambda *a: console.print_findings(found, "10", a[-1]))
    assert f"m[1]: {TEXTS[0]}" in text
