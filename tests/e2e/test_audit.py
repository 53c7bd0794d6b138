"""`grader audit`: each operator makes the mutation it names, and a small sample of
mutants runs through the real class-grading path, where a deliberately weakened test
folder lets a known mutant survive (so the audit can fail)."""
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from grader.lesson import equivalents
from grader.lesson.mutants import generate, sample, solution_lines
from grader.lesson.operators import OPERATORS
from grader.author.audit.report import STATUSES
from grader.author.audit.run import operator_names
from grader.sandbox import bwrap

ROOT = Path(__file__).resolve().parents[2]
GRADER = [sys.executable, "-m", "grader.cli"]
SANDBOX = ["--unsandboxed"] if bwrap.probe().reason else []
RMS_SOLUTION = ROOT / "solutions" / "10_rmsnorm.py"


def marked(body: str, before: str = "") -> str:
    """A solution file: `body` inside a function, between the solution markers."""
    return (f"import torch\nimport torch.nn.functional as F\n{before}\n"
            "def f(x, y, k):\n    ### BEGIN SOLUTION\n"
            f"{textwrap.indent(textwrap.dedent(body).strip(), '    ')}\n"
            "    ### END SOLUTION\n")


def changed(body: str, operator: str) -> set[str]:
    """The new text of the changed lines, one entry per mutant."""
    source = marked(body)
    return {" ".join(line[2:] for line in m.change(source).splitlines()
                     if line.startswith("+")) for m in generate(source, [operator]).mutants}


@pytest.mark.parametrize("operator,body,expected", [
    ("arith", "return x + y", {"return x - y", "return x * y"}),
    ("arith", "return k - x * y", {"return k + x * y", "return k - x / y",
                                   "return k - (x + y)"}),  # precedence kept
    ("compare", "return x == y", {"return x != y"}),
    ("compare", "return x < y", {"return x <= y", "return x > y"}),
    ("constant", "return x + 3", {"return x + 4", "return x + 2"}),
    ("constant", "return x * 0", {"return x * 1"}),
    ("constant", "return x * 0.5", {"return x * 5.0", "return x * 0.05"}),
    ("statement", "y = x + 1\nreturn y", {"pass"}),
    ("boolean", "if k:\n    x = -x\nreturn x", {"if not k:"}),
    ("boolean", "return x and y", {"return x or y"}),
    ("boolean", "return g(x, flag=True)", {"return g(x, flag=False)"}),
    ("dim", "return x.mean(-1, keepdim=True)",
     {"return x.mean(0, keepdim=True)", "return x.mean(1, keepdim=True)",
      "return x.mean(-1, keepdim=False)"}),
    ("dim", "return torch.cat([x, y], 0)", {"return torch.cat([x, y], -1)",
                                           "return torch.cat([x, y], 1)"}),
    ("dim", "return F.softmax(x, dim=-1)", {"return F.softmax(x, dim=0)",
                                           "return F.softmax(x, dim=1)"}),
    ("activation", "return F.softmax(x, dim=-1)", {"return F.sigmoid(x)",
                                                  "return F.log_softmax(x, dim=-1)"}),
    ("activation", "return x.sigmoid()", {"return x.softmax(dim=-1)",
                                         "return x.log_softmax(dim=-1)"}),
    ("topk", "return torch.topk(x, k=k, dim=-1)",
     {"return torch.topk(x, k=k + 1, dim=-1)", "return torch.topk(x, k=k - 1, dim=-1)",
      "return torch.topk(x, k=1, dim=-1)"}),
    ("topk", "return x.topk(2)", {"return x.topk(3)", "return x.topk(1)"}),
    ("reduction", "return x.sum(0)", {"return x.mean(0)"}),
    ("reduction", "return torch.mean(x)", {"return torch.sum(x)"}),
    ("accumulation", "y.index_add_(0, k, x)", {"y.index_copy_(0, k, x)"}),
    ("accumulation", "y.index_copy_(0, k, x)", {"y.index_add_(0, k, x)"}),
    ("transpose", "return x.T @ y", {"return x @ y", "return x.T.T @ y", "return x.T @ y.T"}),
    ("transpose", "return x.transpose(0, 1)", {"return x"}),
    ("transpose", "return x.view(-1)", {"return x.T.view(-1)"}),
    ("dtype", "z = x.to(y.dtype)\nreturn z", {"z = x", "return z.float()",
                                             "return z.double()", "return z.half()"}),
    ("dtype", "return x.float()", {"return x", "return x.float().double()",
                                   "return x.float().half()"}),
    ("drop_term", "return x * y + 1", {"return x * y", "return 1", "return x + 1",
                                       "return y + 1"}),
    ("drop_term", "return x - y", {"return x"}),
    ("renorm", "return x / (x.sum() + 1e-20)", {"return x"}),
])
def test_operator_makes_its_mutation(operator, body, expected):
    assert changed(body, operator) == expected


def test_only_code_inside_the_markers_is_mutated():
    source = marked("return x + y", before="SCALE = 2 + 3\n")
    mutants = generate(source).mutants
    (begin, end), = solution_lines(source)
    assert mutants and all(begin < m.line < end for m in mutants)
    assert all("SCALE = 2 + 3" in m.source for m in mutants)


def test_ids_are_stable_and_name_operator_line_column_index():
    source = RMS_SOLUTION.read_text()
    first, again = generate(source).mutants, generate(source).mutants
    assert [m.id for m in first] == [m.id for m in again]
    assert len({m.id for m in first}) == len(first)
    for m in first:
        assert m.id == f"{m.operator}-{m.line}.{m.col}-{m.id.rsplit('-', 1)[1]}"
        assert m.operator in OPERATORS and m.source != source


def test_mutants_that_do_not_compile_are_counted_not_kept():
    body = """
    total = 0
    def add():
        nonlocal total
        total += 1
    add()
    return total
    """
    made = generate(marked(body), ["statement"])
    assert made.uncompilable == 1  # without `total = 0`, `nonlocal total` binds nothing
    assert all("total = 0" in m.source for m in made.mutants)


def test_sample_is_deterministic_and_in_source_order():
    mutants = generate(RMS_SOLUTION.read_text()).mutants
    picked = sample(mutants, 7)
    assert picked == sample(mutants, 7) and len(picked) == 7
    assert [m for m in mutants if m in picked] == picked
    assert sample(mutants, None) == mutants


@pytest.mark.parametrize("text,problem", [
    ("- id: dim-1.0-0\n", "reason"),
    ("- {id: dim-1.0-0, reason: same bits}\n- {id: dim-1.0-0, reason: again}\n", "twice"),
    ("id: dim-1.0-0\n", "list"),
])
def test_equivalents_file_is_checked(tmp_path, text, problem):
    (tmp_path / equivalents.FILE).write_text(text)
    with pytest.raises(ValueError, match=problem):
        equivalents.load(tmp_path)


def test_operators_are_named_or_refused():
    assert operator_names(None) == list(OPERATORS)
    assert operator_names("dim, topk") == ["dim", "topk"]
    with pytest.raises(ValueError, match="unknown operator"):
        operator_names("dim,softmax")


def audit(lesson: str, out: Path, *extra: str) -> tuple[int, dict]:
    proc = subprocess.run([*GRADER, "audit", "--lesson", lesson, "--out", str(out),
                           "--jobs", "2", *SANDBOX, *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert (out / "audit.json").exists(), proc.stderr[-3000:] + proc.stdout[-3000:]
    return proc.returncode, json.loads((out / "audit.json").read_text())


@pytest.mark.parametrize("lesson", ["10", "13"])
def test_sample_through_the_class_grader_adds_up(lesson, tmp_path):
    code, doc = audit(lesson, tmp_path, "--sample", "12", "--min-kill", "0")
    assert code == 0
    assert doc["graded"] == len(doc["mutants"]) == 12 <= doc["generated"]
    assert sum(doc["counts"].values()) == 12
    for status in STATUSES:
        assert sum(c[status] for c in doc["per_operator"].values()) == doc["counts"][status]
        assert doc["counts"][status] == sum(m["status"] == status for m in doc["mutants"])
    judged = doc["counts"]["killed"] + doc["counts"]["stale"] + doc["counts"]["survived"]
    assert doc["kill_rate"] == pytest.approx(
        (doc["counts"]["killed"] + doc["counts"]["stale"]) / judged if judged else 1.0, abs=1e-4)
    for m in doc["mutants"]:
        assert (m["score"] < m["max_score"]) == (m["status"] in ("killed", "stale"))
    # the rates are the mutants graded over the times measured (not a speed asserted):
    # the grading is part of the whole command
    seconds, rates = doc["seconds"], doc["mutants_per_minute"]
    assert seconds["total"] >= seconds["grading"] > 0
    for rate, shown in ((rates["grading"], seconds["grading"]),
                        (rates["with_startup"], seconds["total"])):
        # seconds are shown to 0.01 s, the rate to 0.1 from the unrounded seconds:
        # a grading of 0.36 s may have been 0.3647 s (a rate of 1974.3, not 2000)
        assert 60 * 12 / (shown + 0.005) - 0.05 <= rate <= 60 * 12 / (shown - 0.005) + 0.05


def weakened_course(tmp: Path) -> Path:
    """Lesson 10 with a test that checks only the output's shape, and an equivalents
    file that lists one mutant that survives it and one that is killed."""
    data = yaml.safe_load((ROOT / "course.yml").read_text())
    lesson = data["lessons"]["10"]
    for key in ("solution", "stub"):
        lesson[key] = str(ROOT / lesson[key])
    lesson["tests"] = "weak"
    for key in ("submissions", "out"):
        lesson.pop(key, None)
    for key in ("roster", "nbgrader_db"):
        data.pop(key, None)
    data["lessons"] = {"10": lesson}
    (tmp / "course.yml").write_text(yaml.safe_dump(data))
    weak = tmp / "weak"
    shutil.copytree(ROOT / "hidden_tests" / "10_rmsnorm", weak)
    for test in weak.glob("test_*.py"):
        test.unlink()
    (weak / "test_norm.py").write_text(textwrap.dedent('''
        import torch

        def test_output(student, reference, check):
            g = torch.Generator().manual_seed(0)
            args = dict(dim=16, eps=1e-5, weight=torch.rand(16, generator=g) + 0.5,
                        x=torch.randn(2, 3, 16, generator=g), gy=torch.randn(2, 3, 16))
            got, ref = student.call("rmsnorm", **args), reference.call("rmsnorm", **args)
            check.shape("output shape", got["y"], tuple(ref["y"].shape))
        '''))
    return tmp / "course.yml"


def test_weakened_tests_let_a_known_mutant_survive(tmp_path):
    mutants = {m.change(RMS_SOLUTION.read_text()): m.id
               for m in generate(RMS_SOLUTION.read_text(), ["reduction", "dim"]).mutants}
    to_sum = next(i for c, i in mutants.items() if ".sum(-1, keepdim=True)" in c)
    flat = next(i for c, i in mutants.items() if "keepdim=False" in c)
    over_batch = next(i for c, i in mutants.items() if ".mean(0, keepdim=True)" in c)
    course = weakened_course(tmp_path)
    (tmp_path / "weak" / "equivalent_mutants.yml").write_text(yaml.safe_dump(
        [{"id": over_batch, "reason": "listed for the test"},
         {"id": flat, "reason": "wrongly listed: its shape is wrong"}]))

    code, doc = audit("10", tmp_path / "weak-out", "--course", str(course),
                      "--operators", "reduction,dim")
    status = {m["id"]: m for m in doc["mutants"]}
    assert code == 1 and doc["kill_rate"] < 0.95
    assert status[to_sum]["status"] == "survived"
    assert status[to_sum]["passed_checks"] == ["output shape"]
    assert "-        normed = xf * torch.rsqrt(xf.pow(2).mean(" in status[to_sum]["diff"]
    assert status[over_batch]["status"] == "equivalent"
    assert status[flat]["status"] == "stale"

    code, doc = audit("10", tmp_path / "real-out", "--operators", "reduction")
    assert code == 0
    assert {m["id"]: m["status"] for m in doc["mutants"]}[to_sum] == "killed"
