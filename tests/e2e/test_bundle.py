"""The student bundle: `grader check` works at home, diagnoses, and holds no solution."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = (ROOT / "solutions" / "13_moe.py").read_text()
# the `grader` a student bundle installs (its pyproject.toml's script), and the staff's
BUNDLES_GRADER = [sys.executable, "-c", "from grader.cli.student import student; student()"]
STAFFS_GRADER = [sys.executable, "-m", "grader.cli"]


@pytest.fixture(scope="module")
def bundle(student_bundle) -> Path:
    """Lesson 13's bundle, built once for the suite (tests/conftest.py)."""
    return student_bundle("13")


def check(bundle: Path, source: str, tmp_path: Path, *options: str,
          grader: list[str] = BUNDLES_GRADER) -> subprocess.CompletedProcess:
    """The bundle's `grader check` run as a student who installed it runs it: from
    their own work folder, which holds no course.yml (the bundle's is found beside
    its grader)."""
    work = tmp_path / "13_moe.py"
    work.write_text(source)
    env = {**os.environ, "PYTHONPATH": str(bundle)}
    return subprocess.run([*grader, "check", *options, str(work)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def whole_in_bwrap() -> None:
    """Skip where a bundle's check cannot run whole inside bwrap."""
    from grader.sandbox import bwrap

    support = bwrap.probe()
    if support.mode not in ("root", "userns"):
        pytest.skip(f"bwrap not usable here: {support.reason or support.mode}")


def test_bundle_holds_no_solution(bundle):
    names = {p.name for p in bundle.rglob("*")}
    assert "mistakes.yml" not in names and not (bundle / "solutions").exists()
    assert (bundle / "13_moe.py").read_text() == (ROOT / "exercises" / "13_moe.py").read_text()
    body = [line.strip() for line in SOLUTION.splitlines() if "topk_weight[mask]" in line]
    for f in bundle.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert all(b.encode() not in data for b in body), f


def test_check_at_home_passes_the_solution(bundle, tmp_path):
    proc = check(bundle, SOLUTION, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "practice tests: 5/5 passed" in proc.stdout


def test_check_at_home_names_the_mistake(bundle, tmp_path):
    wrong = SOLUTION.replace("F.softmax(gate(x_flat), dim=-1)", "F.softmax(gate(x_flat), dim=0)")
    proc = check(bundle, wrong, tmp_path)
    assert proc.returncode == 1
    assert "softmax runs over the tokens" in proc.stdout
    # the composite part's practice test is excused by the mistake named in router: the
    # bundle recorded what `explained` asks there
    assert [line.split()[:3] for line in proc.stdout.splitlines() if " moe " in line] == [
        ["✓", "moe", "1/1"]], proc.stdout


def test_check_at_home_speaks_chinese(bundle, tmp_path):
    wrong = SOLUTION.replace("F.softmax(gate(x_flat), dim=-1)", "F.softmax(gate(x_flat), dim=0)")
    proc = check(bundle, wrong, tmp_path, "--language", "zh")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "softmax 沿 token 维而不是 expert 维计算" in proc.stdout  # the mistake's title_zh
    assert "路由：softmax 与 top-k" in proc.stdout  # the part's title_zh
    assert "练习测试：4/5 通过" in proc.stdout and "practice tests" not in proc.stdout
    proc = check(bundle, wrong, tmp_path, "--language", "zh", "--json")
    report = json.loads(proc.stdout)
    assert report["language"] == "zh"
    assert report["parts"]["router"]["likely_mistake"]["title"] == (
        "softmax 沿 token 维而不是 expert 维计算")


def test_check_at_home_names_the_line_where_values_leave_the_reference(bundle, tmp_path):
    """A mistake of the divergence corpus (the dispatch weight's `.sqrt()`, no known
    mistake): the bundle's check names its line, in English and Chinese, from the
    reference's recorded traces, without the solution."""
    import yaml
    entry = next(e for e in yaml.safe_load((ROOT / "tests" / "fixtures" / "divergence" /
                                            "13.yml").read_text(encoding="utf-8"))
                 if e["id"] == "hand-9")
    lines = SOLUTION.splitlines()
    lines[entry["line"] - 1] = entry["new"]
    wrong = "\n".join(lines) + "\n"
    code = entry["new"].strip()
    for lang, said, example in (
            ("en", f"where: Line {entry['line']} `{code}`: up to here", "smallest failing example"),
            ("zh", f"位置： 第 {entry['line']} 行 `{code}`：", "最小的失败示例")):
        proc = check(bundle, wrong, tmp_path, "--language", lang)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        dispatch = proc.stdout[proc.stdout.index(" dispatch "):proc.stdout.index(" aux_loss ")]
        assert said in dispatch, proc.stdout
        # the smallest failing example as in the project: the bundle ships its makers
        # and the reference's results on them
        assert example in dispatch and "print(m.dispatch(" in dispatch
    # and none on the solution, whose parts all pass
    solved = check(bundle, SOLUTION, tmp_path).stdout
    assert "where:" not in solved and "smallest failing example" not in solved


def _values(obj: object) -> list:
    """Every tensor in a decoded recording's value."""
    import torch
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _values(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _values(v)]
    return []


def _key(t) -> tuple | None:
    """A tensor by its numbers; None for one too plain to tell (a constant, a few
    elements) which any two computations may share."""
    if t.numel() < 4 or bool((t == t.reshape(-1)[0]).all()):
        return None
    return (str(t.dtype), tuple(t.shape), tuple(t.reshape(-1).tolist()))


def test_bundle_traces_hold_no_graded_input_nor_output(bundle, ctx13):
    """The reference's traces the bundle's check names a line from: requests of fresh
    inputs, none a graded case's, no tensor of a graded case's input or of the
    reference's output on one among them, and no text of the solution."""
    from grader.judge import runner
    from grader.judge import smallest
    from grader.deliver.bundle import RECORDING
    from grader.inside import protocol
    from grader.judge.reference import request_key

    recorded = protocol.loads((bundle / "tests" / "13_moe" / RECORDING).read_bytes())
    graded = runner.grade_solution(ctx13)
    requests = [r for found in recorded["fresh"]["requests"].values() for r in found]
    requests += [[probe, args] for _, probe, args in smallest.requests(bundle / "tests" / "13_moe")]
    assert requests and recorded["traces"]
    keys = {request_key(probe, args) for probe, args in requests}
    assert set(recorded["traces"]) <= keys and not keys & set(graded)
    assert len(recorded["traces"]) > sum(map(len, recorded["fresh"]["requests"].values()))
    secret = {_key(t) for g in graded.values() for t in _values(g["args"])}
    secret |= {_key(t) for g in graded.values()
               for t in _values(ctx13.refs.reference.call(g["probe"], **g["args"]))}
    secret.discard(None)
    shipped = [t for _, args in requests for t in _values(args)]
    for packed in recorded["traces"].values():
        plain = protocol.loads(packed.numpy().tobytes())
        shipped += _values(plain)
        for t in plain["traces"][1:]:  # a variant's: values only
            assert t["lines"] == [] and {e[0] for e in t["events"]} == {0}
    assert len(shipped) > 100
    assert not [t for t in shipped if _key(t) in secret]
    digests = dict(recorded["fresh"]["statements"])
    assert digests and all(len(d) == 16 for d in digests.values())


PEEK = """
import errno as _errno
def _peek(path, mode="r"):
    try:
        open(path, mode).close()
        return "OPEN"
    except OSError as exc:
        return _errno.errorcode.get(exc.errno, "?")
raise RuntimeError("PEEK " + " ".join(f"{{n}}={{_peek(p, m)}}" for n, p, m in (
    ("host", {host!r}, "r"), ("bundle", {bundle!r}, "a"), ("tmp", "/tmp/mine", "w"))))
"""


@pytest.mark.parametrize("grader", [BUNDLES_GRADER, STAFFS_GRADER], ids=["bundles", "staffs"])
def test_check_runs_whole_in_bwrap_and_keeps_the_machine(bundle, tmp_path, grader):
    """Where bwrap works, a bundle's check runs inside it whole (one torch import for
    the grader and the code): the code sees no host file, changes nothing in the
    bundle, writes only its own /tmp, and the check still reports every part; from
    the bundle's own `grader`, and from the staff's, which reads the course first."""
    whole_in_bwrap()
    host = tmp_path / "outside" / "secret.txt"
    host.parent.mkdir()
    host.write_text("not for the student's code")
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    proc = check(bundle, SOLUTION + PEEK.format(host=str(host), bundle=str(bundle / "README.md")),
                 tmp_path, grader=grader)
    assert proc.returncode == 1 and "practice tests: 5/5" not in proc.stdout
    peek = proc.stdout[proc.stdout.index("PEEK"):].split("\n")[0:3]
    seen = " ".join(peek)
    assert "host=ENOENT" in seen and "bundle=EROFS" in seen and "tmp=OPEN" in seen, seen
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before
    # each part reported, none crashed the check; the failed import shown once
    assert proc.stdout.count("0/1 practice tests") == 5
    assert proc.stdout.count("RuntimeError: PEEK") == 1


def imported_outside(proc: subprocess.CompletedProcess) -> set[str]:
    """The modules that `-X importtime` listed: those of the process outside bwrap
    (the one inside is started afresh, without the option)."""
    return {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:")}


def test_the_bundles_grader_enters_its_sandbox_before_reading_the_course(bundle, tmp_path):
    """From the bundle's own `grader`, a check with its file named starts bwrap before it
    imports pydantic (course.yml's reader) or rich: the student does not wait for them
    twice. The staff's `grader`, which reads the course to decide, imports both."""
    whole_in_bwrap()
    timed = [sys.executable, "-X", "importtime", *BUNDLES_GRADER[1:]]
    proc = check(bundle, SOLUTION, tmp_path, grader=timed)
    assert proc.returncode == 0 and "practice tests: 5/5 passed" in proc.stdout, proc.stderr
    outside = imported_outside(proc)
    assert "grader.cli.student" in outside and "grader.sandbox.bwrap" in outside
    assert not {"pydantic", "rich", "grader.config", "torch"} & outside
    staffs = check(bundle, SOLUTION, tmp_path,
                   grader=[sys.executable, "-X", "importtime", *STAFFS_GRADER[1:]])
    assert staffs.returncode == 0, staffs.stderr
    assert {"pydantic", "rich", "grader.config"} <= imported_outside(staffs)


def test_the_bundles_grader_refuses_a_course_with_its_solution(bundle, tmp_path):
    """The bundle's sandbox shares one process between the grader and the student's
    code: a course whose solution is there is checked by the course's own grader."""
    whole_in_bwrap()
    proc = check(bundle, SOLUTION, tmp_path, "--course", str(ROOT / "course.yml"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "holds the lesson's solution" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_bundle_holds_no_graded_case(bundle, ctx13):
    """By content: no graded test file, no graded case's request among the recorded
    results, and no graded test's code in any shipped file."""
    from grader.judge import runner
    from grader.deliver.bundle import RECORDING
    from grader.inside import protocol

    hidden = ROOT / "hidden_tests" / "13_moe"
    graded_files = [f for f in hidden.glob("test_*.py") if not f.name.startswith("test_practice_")]
    shipped = {f.name for f in (bundle / "tests" / "13_moe").iterdir()}
    assert shipped == {"probes.py", "_moe_common.py", "examples.py", "questions.py", RECORDING,
                       *(f"test_practice_{p}.py" for p in ("ffn", "router", "dispatch",
                                                          "aux_loss", "moe"))}
    recorded = protocol.loads((bundle / "tests" / "13_moe" / RECORDING).read_bytes())
    graded_keys = set(runner.grade_solution(ctx13))
    assert recorded["reference"] and not graded_keys & set(recorded["reference"])
    for variant in recorded["variants"].values():
        assert not graded_keys & set(variant)
    assert recorded["combined"]  # what moe compares with, for two mistakes and more
    for combination in recorded["combined"].values():
        assert not graded_keys & set(combination)
    markers = [line for f in graded_files for line in f.read_text().splitlines()
               if line.startswith(("CASES", "def test_", "GRADIENT_CASES", "EVAL_CASES"))]
    for f in bundle.rglob("*.py"):
        text = f.read_text()
        assert not [m for m in markers if m in text], f


def test_bundle_names_no_lms_file_of_the_staff(bundle):
    """course.yml's LMS keys (the Moodle grading worksheet lists every student's email)
    stay with the staff: the bundle's course.yml does not even name them."""
    text = (bundle / "course.yml").read_text(encoding="utf-8")
    assert "moodle_worksheet" not in text and "worksheet" not in text


def test_students_md_samples_are_what_check_prints(bundle, tmp_path):
    """docs/students.md shows, in each language, what `grader check` prints for the
    router without its renormalisation: re-run, it prints exactly that (issue 25 item
    9: the zh sample was the English one's, with an English message in it)."""
    doc = (ROOT / "docs" / "students.md").read_text(encoding="utf-8")
    renorm = ("    if norm_topk_prob:\n        topk_weight = topk_weight / "
              "(topk_weight.sum(dim=-1, keepdim=True) + 1e-20)\n")
    assert renorm in SOLUTION
    for lang, first in (("en", "✓ ffn       1/1 practice tests"), ("zh", "✓ ffn       1/1 练习测试通过")):
        start = doc.index("```\n" + first) + 4
        sample = doc[start:doc.index("```", start)]
        proc = check(bundle, SOLUTION.replace(renorm, ""), tmp_path, "--language", lang)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert proc.stdout == sample, proc.stdout


def test_the_bundle_is_also_a_zip_to_upload_with_its_readme_in_the_courses_language(
        bundle, course):
    """Issue 51: a folder had to be zipped by the TA before Moodle took it, and its
    README was English under `language: zh`."""
    import zipfile

    from grader.deliver.bundle import readme

    files = {p.relative_to(bundle.parent).as_posix() for p in bundle.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    with zipfile.ZipFile(bundle.with_name(bundle.name + ".zip")) as z:
        assert set(z.namelist()) == files
        assert z.read(f"{bundle.name}/README.md").decode() == readme(course, "13")
    zh = course.model_copy(update={"language": "zh"})
    assert readme(zh, "13").startswith("# 第 13 课：检查你的作业")
    assert "13_moe.py" in readme(zh, "13") and "check your work" not in readme(zh, "13")


def test_bundle_carries_the_shapes_question_and_no_model_answer(bundle, tmp_path):
    """`grader check` marks q6 at home; the text questions' rubric notes (model
    answers) stay with the staff."""
    import yaml

    doc = yaml.safe_load((bundle / "course.yml").read_text(encoding="utf-8"))
    assert list(doc["lessons"]["13"]["written"]) == ["q6"]
    for f in bundle.rglob("*"):
        if f.is_file():
            assert b"Model answer" not in f.read_bytes(), f
    answered = SOLUTION + 'ANSWER_Q6 = {"x_flat": "[N, H]", "scores": "[N, K]"}\n'
    proc = check(bundle, answered, tmp_path)
    assert "q6        0.25/1.25" in proc.stdout, proc.stdout + proc.stderr
    assert "scores: dimension 2 of `[N, K]`" in proc.stdout
