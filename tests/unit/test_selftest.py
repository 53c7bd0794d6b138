"""`grader selftest`'s judgements, each shown to fail where it should."""
from pathlib import Path

import pytest

from grader import config
from grader.judge.reference import Mistake
from grader.record import GradeRecord
from grader.author.selftest import graded, hints, leaks, names
from grader.author.selftest.findings import FAILED, INDISTINGUISHABLE, OK, RAISES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def course() -> config.Course:
    return config.load(ROOT / "course.yml")


def mistake(hint: str = "mean over the last dimension (-1)", part: str = "norm") -> Mistake:
    return Mistake("m1", part, {"en": "a title", "zh": "标题"}, {"en": hint, "zh": hint}, [])


def test_names_unique_in_the_course(course):
    assert all(f.status == OK for f in names.inspect(course, "10"))


def test_names_shared_with_another_lesson_fail(course):
    twin = course.lesson("10").model_copy(update={"exercise": "other.py"})
    doubled = course.model_copy(update={"lessons": {**course.lessons, "99": twin}})
    found = {f.subject: f for f in names.inspect(doubled, "10")}
    assert found["part"].failed and "'norm' (also lesson 99)" in found["part"].message
    assert found["module"].failed and found["exercise"].status == OK


def test_secret_lines_are_inside_markers_and_not_given_outside():
    solution = ("x = compute_something(a, b)\n"
                "    ### BEGIN SOLUTION\n"
                "    y = torch.rsqrt(x.pow(2).mean(-1))\n"
                "    x = compute_something(a, b)\n"
                "    else:\n"
                "    ### END SOLUTION\n")
    assert leaks.secret_lines(solution) == {"y = torch.rsqrt(x.pow(2).mean(-1))"}


def test_a_solution_line_in_a_shipped_file_is_a_leak(course, tmp_path):
    """Lesson 10 copied with its solution's key line pasted into the practice test."""
    import shutil

    tests = tmp_path / "hidden"
    shutil.copytree(course.path(course.lesson("10").tests), tests)
    line = "normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)"
    practice = tests / "test_practice_norm.py"
    practice.write_text(practice.read_text() + f"\n# {line}\n")
    lesson = course.lesson("10").model_copy(update={"tests": tests})
    copy = course.model_copy(update={"lessons": {"10": lesson}})
    found = {f.subject: f for f in leaks.inspect(copy, "10", [])}
    assert found[str(tests / "test_practice_norm.py")].failed
    assert found[str(tests / "probes.py")].status == OK
    assert found[str(lesson.stub)].status == OK


@pytest.mark.parametrize("hint", ["torch.cat([cos, cos], dim=-1)", "[bold]x[/bold] <b>&</b>"])
def test_hints_with_brackets_and_html_render_as_written(course, hint):
    assert hints.inspect(course, "10", [mistake(hint)])[0].status == OK


def test_a_hint_with_control_characters_fails(course):
    assert hints.inspect(course, "10", [mistake("red \x1b[31m text")])[0].failed


def test_a_terminal_that_reads_markup_fails(course, monkeypatch):
    """If `grader check` printed hints as rich markup, the selftest would say so."""
    def markup_on(record, report, course, key, out):
        for part in record.parts.values():
            out.print(f"{part.diagnosis.title['en']} {part.diagnosis.hint['en']}")

    monkeypatch.setattr(hints, "print_outcome", markup_on)
    assert hints.inspect(course, "10", [mistake("torch.cat([cos, cos], dim=-1)")])[0].failed


def record(scores: dict[str, tuple[float, float]], tests: list[dict] | None = None,
           diagnosis: dict[str, str] | None = None, status: str = "graded") -> GradeRecord:
    parts = {p: {"score": s, "max_score": m,
                 "diagnosis": {"id": (diagnosis or {}).get(p)} if (diagnosis or {}).get(p)
                 else None} for p, (s, m) in scores.items()}
    return GradeRecord.from_json({"status": status, "problem": "",
                                  "score": sum(s for s, _ in scores.values()),
                                  "max_score": sum(m for _, m in scores.values()),
                                  "parts": parts, "tests": tests or []})


def failing(part: str, error: bool = False) -> dict:
    return {"name": "test_x", "part": part, "outcome": "failed", "message": "differs",
            "error": {"kind": "exception"} if error else None, "diagnosis": None}


@pytest.mark.parametrize("rec,status", [
    (record({"a": (0, 2), "b": (2, 2)}, [failing("a")], {"a": "m1"}), OK),
    (record({"a": (0, 2), "b": (2, 2)}, [failing("a", error=True)]), RAISES),
    (record({"a": (0, 2), "b": (2, 2)}, [failing("a")], {"a": "m0"}), INDISTINGUISHABLE),
    (record({"a": (0, 2), "b": (2, 2)}, [failing("a")]), FAILED),
    (record({"a": (2, 2), "b": (2, 2)}), FAILED),
    (record({"a": (0, 2), "b": (1, 2)}, [failing("a"), failing("b")], {"a": "m1"}), FAILED),
    # named in its part, and the composite part built on it raises (a shape it can't use)
    (record({"a": (0, 2), "b": (1, 2)}, [failing("a"), failing("b", error=True)], {"a": "m1"}),
     RAISES),
    (record({"a": (2, 2), "b": (1, 2)}, [failing("b", error=True)]), FAILED),
    (record({"a": (0, 2), "b": (0, 2)}, status="import_error"), FAILED),
], ids=["named", "raises", "indistinguishable", "unnamed", "uncaught", "leaks-out",
    "composite-raises", "raises-elsewhere-only", "import"])
def test_mistake_verdicts(rec, status):
    assert graded.mistake(mistake(part="a"), rec).status == status


def test_solution_stub_and_variants():
    full = record({"a": (2, 2)}, [{"name": "t", "part": "a", "outcome": "passed",
                                   "diagnosis": None}])
    assert graded.solution(full).status == OK and graded.correct("v", full).status == OK
    assert graded.solution(record({"a": (1, 2)}, [failing("a")])).failed
    assert graded.correct("v", record({"a": (2, 2)}, diagnosis={"a": "m1"})).failed
    assert graded.stub(record({"a": (0, 2)}, [failing("a")])).status == OK
    assert graded.stub(full).failed


def test_a_todo_in_a_title_names_its_course_yml_key(course):
    """It said "course.yml titles … line(s) 1, 2", which are no lines of course.yml."""
    from grader.author.newlesson.templates import MARK
    from grader.author.selftest import todos

    lesson = course.lesson("10")
    parts = {"norm": lesson.parts["norm"].model_copy(update={"title": f"{MARK}: a title"})}
    copy = course.model_copy(update={"lessons": {"10": lesson.model_copy(
        update={"title": MARK, "parts": parts})}})
    (finding,) = [f for f in todos.inspect(copy, "10") if f.subject == "course.yml"]
    assert finding.failed
    assert finding.message == (f"2 {MARK} left, in lessons.10.title, "
                               "lessons.10.parts.norm.title")
