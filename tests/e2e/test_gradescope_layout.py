"""The Gradescope autograder zip runs in Gradescope's folder layout, laid out locally;
Canvas zips and notebooks are graded like plain files."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from grader.deliver import autograder_zip
from grader.sandbox import bwrap
from tests.conftest import outside_bwrap

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "13_moe.py"
STUB = REPO / "exercises" / "13_moe.py"
GRADER_ARGS = ["--unsandboxed"] if bwrap.probe().reason else []

pytestmark = pytest.mark.slow


def as_notebook(source: str) -> str:
    """The solution as a notebook: one cell per top-level block, plus IPython lines."""
    blocks = source.split("\n\n\n")
    cells = [["%matplotlib inline\n", "!pip install torch\n"]] + \
        [b.splitlines(keepends=True) for b in blocks]
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": c} for c in cells]})


def gradescope_layout(zip_path: Path, tmp_path: Path, files: dict[str, str]) -> Path:
    """The zip (the suite's, tests/conftest.py) laid out as Gradescope lays it out."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        assert "setup.sh" in names and "run_autograder" in names
        assert all(z.getinfo(n).external_attr >> 16 & 0o111 for n in ("setup.sh", "run_autograder"))
        assert z.read("setup.sh").decode() == autograder_zip.setup_script(REPO)
        z.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    for name, text in files.items():
        (root / "submission").mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text, encoding="utf-8")
    (root / "submission_metadata.json").write_text(json.dumps(
        {"users": [{"email": "ava@u.edu", "id": 1, "name": "Ava", "sid": "s123"}]}))
    return root


def run_autograder(root: Path) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable,
           "GRADER_ARGS": " ".join(GRADER_ARGS)}
    done = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def check_results(res: dict) -> None:
    assert isinstance(res["score"], (int, float)) and isinstance(res["tests"], list)
    for t in res["tests"]:
        # a check question awaiting a TA is neither (issue 55): it says so instead
        if "status" in t or "written" not in t["tags"]:
            assert t["status"] in {"passed", "failed"}
        else:
            assert t["output"] == "awaiting a TA"
        assert {"score", "max_score", "name", "number", "output", "tags",
                "visibility"} <= set(t)
        assert t["score"] <= t["max_score"]


@pytest.mark.parametrize("name, text", [
    ("13_moe.py", SOLUTION.read_text()),
    ("13_moe.ipynb", as_notebook(SOLUTION.read_text())),
], ids=["py", "ipynb"])
def test_autograder_grades_the_solution_in_full(autograder_zip13, tmp_path, name, text):
    res = run_autograder(gradescope_layout(autograder_zip13, tmp_path, {name: text}))
    check_results(res)
    assert res["score"] == pytest.approx(10.0)  # the solution answers no check question
    assert all(t["status"] == "passed" for t in res["tests"] if "written" not in t["tags"])
    if name.endswith(".ipynb"):
        assert "Left out 2 IPython" in res["output"]


def test_autograder_marks_the_shapes_question_and_says_the_text_ones_await_a_ta(
        autograder_zip13, tmp_path):
    answers = ('\nANSWER_Q1 = """Attention mixes tokens; the FFN works per token."""\n'
               'ANSWER_Q6 = {"x_flat": "[B*S, H]", "scores": "(N, E)", "topk_idx": "[N, K]",'
               ' "topk_weight": "[N, top_k]", "y": "[B, S, H]"}\n')
    res = run_autograder(gradescope_layout(autograder_zip13, tmp_path,
                                           {"13_moe.py": SOLUTION.read_text() + answers}))
    check_results(res)
    written = {t["tags"][1]: t for t in res["tests"] if "written" in t["tags"]}
    assert sorted(written) == [f"q{i}" for i in range(1, 9)]
    assert written["q6"]["status"] == "passed" and written["q6"]["score"] == 1.25
    assert "status" not in written["q1"] and written["q1"]["output"] == "awaiting a TA"
    assert written["q2"]["status"] == "failed"  # no answer
    assert res["score"] == pytest.approx(10.0 + 1.25)
    with zipfile.ZipFile(autograder_zip13) as z:  # the rubric's notes are model answers
        assert "Model answer" not in z.read("course.yml").decode()


def test_autograder_grades_the_stub_at_zero(autograder_zip13, tmp_path):
    res = run_autograder(gradescope_layout(autograder_zip13, tmp_path,
                                           {"13_moe.py": STUB.read_text()}))
    check_results(res)
    assert res["score"] == 0 and any(t["status"] == "failed" for t in res["tests"])


@pytest.mark.parametrize("via", ["file", "folder"])
def test_autograder_grades_no_link_to_the_solution_or_a_root_only_file(
        autograder_zip13, tmp_path, via):
    """Issue 24: a submission that was only `13_moe.py -> <source>/solutions/13_moe.py`
    scored 10/10, the run copying it as root through the link (so a link to /etc/shadow
    was read too). Now it scores 0 and the student is told why; a link to a file only
    root may read (holding the solution) and a link to a folder on the way to the
    exercise are not read either."""
    root = gradescope_layout(autograder_zip13, tmp_path, {})
    hidden = tmp_path / "root-only"
    hidden.mkdir(mode=0o700)
    (hidden / "13_moe.py").write_text(SOLUTION.read_text() + "\nROOT_ONLY = 1\n")
    (hidden / "13_moe.py").chmod(0o600)
    (root / "submission").mkdir()
    if via == "file":
        (root / "submission" / "13_moe.py").symlink_to(
            root / "source" / "solutions" / "13_moe.py")
        named = "13_moe.py"
    else:
        (root / "submission" / "work").symlink_to(hidden)
        named = "work"
    res = run_autograder(root)
    assert res["score"] == 0, res
    assert f"Left out {named} (links are never followed)." in res["output"], res["output"]
    assert "ROOT_ONLY" not in json.dumps(res)


# One wrong FFN line no known mistake names (tests/e2e/test_composite_cost.py's)
FFN = "        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))\n"
UNLISTED_FFN = "        return self.down_proj(self.act_fn(self.gate_proj(x)) + self.up_proj(x))\n"


def _by_part(res: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for t in res["tests"]:
        if "written" not in t["tags"]:
            found.setdefault(t["tags"][0], []).append(t)
    return found


def _lost(tests: list[dict]) -> float:
    return sum(t["max_score"] - t["score"] for t in tests)


def test_autograder_charges_an_unlisted_mistake_in_a_part_moe_calls_once(
        autograder_zip13, tmp_path):
    """Issue 54 on Gradescope: the zip's run answers moe's stand-in round with the
    solution the zip carries (loaded on the trusted side after the template forked),
    so the FFN's mistake costs the FFN's points only, and the output says why. Before,
    the run took no round and moe lost points too."""
    from grader.pages.feedback import STRINGS
    from grader.text.shown import clean

    source = SOLUTION.read_text()
    assert source.count(FFN) == 1
    res = run_autograder(gradescope_layout(autograder_zip13, tmp_path,
                                           {"13_moe.py": source.replace(FFN, UNLISTED_FFN)}))
    check_results(res)
    parts = _by_part(res)
    assert _lost(parts["ffn"]) > 0
    assert all(t["status"] == "passed" for t in parts["moe"]), parts["moe"]
    assert res["score"] == pytest.approx(10.0 - _lost(parts["ffn"]))
    for lang in ("en",):  # the export's language (course.yml's)
        t = STRINGS[lang]
        said = t["stand_in_excused"].format(parts="ffn", them=t["composite_them_one"])
        assert str(clean(said)).replace("'", "&#39;") in res["output"], res["output"][-3000:]


# Lesson 13b (the stage assembly): every graded request answers the pieces' stand-ins
ASSEMBLY = REPO / "solutions" / "13b_assembly.py"
ASSEMBLY_FULL = {"self_attn": 4.0, "block": 3.0, "model": 3.0, "own": 1.0}


def _assembly(*mistakes: str) -> str:
    """The 13b solution carrying some of its known mistakes."""
    text = ASSEMBLY.read_text(encoding="utf-8")
    found = yaml.safe_load((REPO / "hidden_tests" / "13b_assembly" / "mistakes.yml")
                           .read_text(encoding="utf-8"))
    for m in (m for m in found if m["id"] in mistakes):
        for edit in m["edits"]:
            assert text.count(edit["old"]) == 1
            text = text.replace(edit["old"], edit["new"])
    return text


ASSEMBLY_CASES = {"solution": (), "post-norm": ("post_norm",),
                  "rope-on-v-and-aux-averaged": ("rope_on_v", "aux_averaged")}


@pytest.fixture(scope="module")
def assembly_by_grader_run(tmp_path_factory) -> dict[str, dict[str, float]]:
    """`grader run --lesson 13b` on the same files, as a class whose students have no
    earlier lesson's file: each student's part scores."""
    top = tmp_path_factory.mktemp("run13b")
    for sid, mistakes in ASSEMBLY_CASES.items():
        (top / "subs" / sid).mkdir(parents=True)
        (top / "subs" / sid / "13b_assembly.py").write_text(_assembly(*mistakes), "utf-8")
    grader = Path(sys.executable).parent / "grader"
    done = subprocess.run([str(grader), "run", "--lesson", "13b", "--submissions",
                           str(top / "subs"), "--out", str(top / "out"), *GRADER_ARGS],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert (top / "out" / "scores.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return {sid: {p: r["score"] for p, r in json.loads(
        (top / "out" / "results" / f"{sid}.json").read_text())["parts"].items()}
        for sid in ASSEMBLY_CASES}


@pytest.mark.parametrize("case, lost", [
    ("solution", set()), ("post-norm", {"block"}),
    ("rope-on-v-and-aux-averaged", {"self_attn", "model"})])
def test_autograder_grades_the_assembly_lesson_as_grader_run_does(
        autograder_zip13b, assembly_by_grader_run, tmp_path, case, lost):
    """Issue 57's zip: the solution gets full marks, each wiring mistake costs its own
    part, and every part scores as `grader run` scores it. No earlier lesson's file is
    in a Gradescope run: the own-code part stands in for every piece and says so.
    Before, the zip's course.yml named lessons it did not hold (the run ended with no
    results.json), and it held no earlier solution to answer the stand-ins with."""
    res = run_autograder(gradescope_layout(autograder_zip13b, tmp_path, {
        "13b_assembly.py": _assembly(*ASSEMBLY_CASES[case])}))
    check_results(res)
    scores = {part: sum(t["score"] for t in tests) for part, tests in _by_part(res).items()}
    assert scores == assembly_by_grader_run[case], res["output"][-3000:]
    assert {p for p, v in ASSEMBLY_FULL.items() if scores[p] < v} == lost
    assert "no file of yours for lesson 11 was found" in res["output"]
    with zipfile.ZipFile(autograder_zip13b) as z:  # what answers the stand-ins
        names = set(z.namelist())
        shipped = yaml.safe_load(z.read("course.yml"))["lessons"]
    assert {f"solutions/{f}" for f in ("10_rmsnorm.py", "11_attention.py", "12_rope.py",
                                       "13_moe.py", "13b_assembly.py")} <= names
    assert not any(n.startswith("exercises/1") and "13b" not in n for n in names)
    assert all(set(shipped[k]) <= set(autograder_zip.EARLIER_KEYS)
               for k in ("10", "11", "12", "13"))


def test_canvas_zip_is_graded_like_plain_files(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "submissions.zip", "w") as z:
        z.writestr("alvarezava_4001_77001_13_moe.py", SOLUTION.read_text())
        z.writestr("brownbob_late_4002_77002_13_moe.ipynb", as_notebook(SOLUTION.read_text()))
        z.writestr("chencarl_4003_77003_13_moe.py", STUB.read_text())
    out = tmp_path / "out"
    grader = Path(sys.executable).parent / "grader"
    done = subprocess.run([str(grader), "run", "--lesson", "13", "--submissions", str(subs),
                           "--out", str(out), *GRADER_ARGS], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert (out / "scores.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    scores = {s["student_id"]: s for s in json.loads((out / "scores.json").read_text())
              ["students"]}
    assert scores["4001"]["score"] == scores["4002"]["score"] == pytest.approx(10.0)
    assert scores["4003"]["score"] == 0


# ---- Gradescope's container, as far as it can be had here --------------------------
# Gradescope runs setup.sh once as root, then run_autograder as root in a Docker
# container whose default profile refuses new namespaces, with 768 MB of memory.
# Here: setup.sh with apt-get and the venv stubbed (this machine has no network to
# spare; the user creation runs for real), then run_autograder without CAP_SYS_ADMIN
# (capsh), in a memory cgroup capped at 768 MB where the machine has one.
GS_MEMORY_MB = 768
GS_USER = "minimind-student"
PARTS_ROUTER = 2.0  # the router part's points (course.yml)
RENORM = ("topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)",
          "topk_weight = topk_weight")
PEEK = '''
import errno as _errno, os as _os
def _peek(path):
    try:
        open(path, "rb").read(1)
        return "READ"
    except OSError as exc:
        return _errno.errorcode.get(exc.errno, "?")
def _net():
    import socket
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        return "OPEN"
    except OSError as exc:
        return _errno.errorcode.get(exc.errno, "?")
raise RuntimeError("PEEK " + " ".join(f"{{n}}={{_peek(p)}}" for n, p in (
    ("solution", {solution!r}), ("tests", {tests!r}), ("results", {results!r})))
    + " net=" + _net())
'''
FAKE_PYTHON = '''#!/bin/sh
# "python -m venv DIR": a venv whose pip does nothing (the test's own venv grades)
mkdir -p "$3/bin"
printf '#!/bin/sh\\nexit 0\\n' > "$3/bin/pip"
chmod +x "$3/bin/pip"
'''


def container_reason() -> str | None:
    if os.geteuid() != 0:
        return "the Gradescope-like run needs root, as Gradescope has"
    missing = [t for t in ("capsh", "useradd", "userdel") if not shutil.which(t)]
    return f"missing {', '.join(missing)}" if missing else None


@pytest.fixture(scope="module")
def gradescope_setup(autograder_zip13, tmp_path_factory):
    """setup.sh run once (stubbed installs; the submission's user made for real)."""
    if reason := container_reason():
        pytest.skip(reason)
    stubs = tmp_path_factory.mktemp("stubs")
    (stubs / "apt-get").write_text("#!/bin/sh\nexit 0\n")
    (stubs / "python").write_text(FAKE_PYTHON)
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    root = gradescope_layout(autograder_zip13, tmp_path_factory.mktemp("gs"), {})
    existed = subprocess.run(["id", "-u", GS_USER], capture_output=True).returncode == 0
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "SETUP_PYTHON": str(stubs / "python"),
           "PATH": f"{stubs}:{os.environ['PATH']}"}
    done = subprocess.run([str(root / "source" / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    try:
        yield root / "source"
    finally:
        if not existed:
            subprocess.run(["userdel", GS_USER], check=False)


@pytest.fixture
def gs_root():
    """/autograder's stand-in, reachable by any uid as /autograder is (pytest's own
    temporary folders are root's alone, which would hide the grader's files anyway)."""
    top = Path(tempfile.mkdtemp(prefix="gradescope-"))
    top.chmod(0o755)
    yield top / "autograder"
    shutil.rmtree(top)


NO_USERNS = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'adversarial' / 'no_userns.py'}"


def gradescope_run(root: Path, source: Path, text: str, cap_mb: int = GS_MEMORY_MB,
                   submission_mb: int | None = None, succeeds: bool = True,
                   no_userns: bool = False, exercise: str = "13_moe.py"
                   ) -> tuple[dict, str, float, int]:
    """run_autograder on one submission as Gradescope would: results, output, seconds,
    peak memory in bytes (0 where no memory cgroup could be made). `submission_mb`
    sets the course's per-submission memory limit; `no_userns`: in a container that
    refuses a user namespace too (tests/adversarial/no_userns.py), so without one."""
    from grader.sandbox import cgroup

    shutil.copytree(source, root / "source", symlinks=True)
    if submission_mb is not None:
        course_yml = root / "source" / "course.yml"
        doc = yaml.safe_load(course_yml.read_text())
        doc.setdefault("defaults", {}).setdefault("limits", {})["memory_mb"] = submission_mb
        course_yml.write_text(yaml.safe_dump(doc, sort_keys=False))
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "submission" / exercise).write_text(text, encoding="utf-8")
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"sid": "s1"}]}))
    group, _ = cgroup.create()
    enter = ""
    if group is not None:
        v1 = (group / "memory.limit_in_bytes").exists()
        (group / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(
            str(cap_mb << 20))
        enter = f"echo $$ > {group / 'cgroup.procs'}; "
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    env.pop("GRADER_ARGS", None)
    started = time.monotonic()
    try:
        with outside_bwrap(shared=True):  # (tests/conftest.py)
            done = subprocess.run(
                ["capsh", "--drop=cap_sys_admin", "--", "-c",
                 enter + f"exec {NO_USERNS if no_userns else ''} {root}/run_autograder"],
                env=env, capture_output=True, text=True, timeout=600)
        seconds = time.monotonic() - started
        peak = 0
        if group is not None:
            peak = int((group / ("memory.max_usage_in_bytes" if v1 else "memory.peak"))
                       .read_text())
    finally:
        if group is not None:
            cgroup.remove(group)
    output = done.stdout + done.stderr
    if not succeeds:
        assert done.returncode != 0 and not (root / "results" / "results.json").exists()
        return {}, output, seconds, peak
    assert done.returncode == 0, output[-4000:]
    return json.loads((root / "results" / "results.json").read_text()), output, seconds, peak


def report(label: str, seconds: float, peak: int) -> None:
    memory = f"{peak / 2**20:.0f} MiB peak" if peak else "peak memory not measured"
    print(f"\ngradescope-like run, {label}: {seconds:.1f} s, {memory}")


def test_container_mode_grades_the_solution_in_full(gradescope_setup, gs_root):
    res, output, seconds, peak = gradescope_run(gs_root, gradescope_setup,
                                                SOLUTION.read_text())
    report("solution", seconds, peak)
    check_results(res)
    assert res["score"] == pytest.approx(10.0), res
    assert "container mode" in output and "WITHOUT the sandbox" not in output, output[-3000:]
    assert 0 < peak <= GS_MEMORY_MB << 20 or not peak


def test_container_mode_costs_a_known_mistake_its_part(gradescope_setup, gs_root):
    wrong = SOLUTION.read_text().replace(*RENORM)
    assert wrong != SOLUTION.read_text()
    res, _, seconds, peak = gradescope_run(gs_root, gradescope_setup, wrong)
    report("known mistake", seconds, peak)
    failed = [t["name"] for t in res["tests"]
              if t.get("status") == "failed" and "written" not in t["tags"]]
    assert failed and all("router" in name.lower() for name in failed), failed
    assert 10.0 - PARTS_ROUTER <= res["score"] < 10.0, res
    # the line of divergence and the smallest example, read from the zip's recording
    # (the solution is not imported in the container: peak within its memory)
    from grader.pages.feedback import STRINGS
    line = next(n for n, text in enumerate(wrong.splitlines(), start=1)
                if text.strip() == RENORM[1])
    assert STRINGS["en"]["where_head"] in res["output"], res["output"][-3000:]
    assert f"Line {line} <code>{RENORM[1]}</code>" in res["output"], res["output"][-3000:]
    assert STRINGS["en"]["smallest_head"] in res["output"]
    # the example's results first (yours, then the reference's), then its code
    assert "<pre># yours gives:" in res["output"] and "m.route(x_flat" in res["output"]


@pytest.mark.parametrize("no_userns", [False, True], ids=["userns", "no-userns"])
def test_container_mode_keeps_the_graders_files_from_the_submission(gradescope_setup,
                                                                     gs_root, no_userns):
    root = gs_root
    peek = PEEK.format(solution=str(root / "source" / "solutions" / "13_moe.py"),
                       tests=str(root / "source" / "hidden_tests" / "13_moe" / "test_moe.py"),
                       results=str(root / "results"))
    res, _, _, _ = gradescope_run(root, gradescope_setup, SOLUTION.read_text() + peek,
                                  no_userns=no_userns)
    assert res["score"] == 0
    # in bwrap (a user namespace of the grader's) they are not there; without, closed
    closed = "EACCES" if no_userns else "ENOENT"
    assert f"PEEK solution={closed} tests={closed} results=" in res["output"], \
        res["output"][-2000:]
    # (results/ is made after grading: ENOENT while the submission runs)
    assert "net=EPERM" in res["output"], res["output"][-2000:]
    assert "READ" not in res["output"]


@pytest.fixture(scope="module")
def gradescope_source13b(gradescope_setup, autograder_zip13b, tmp_path_factory) -> Path:
    """Lesson 13b's zip unpacked as setup.sh leaves it (`gradescope_setup` made the
    submission's user)."""
    source = tmp_path_factory.mktemp("gs13b") / "source"
    with zipfile.ZipFile(autograder_zip13b) as z:
        z.extractall(source)
    for name in ("setup.sh", "run_autograder"):
        (source / name).chmod(0o755)
    return source


@pytest.mark.parametrize("no_userns", [False, True], ids=["userns", "no-userns"])
def test_container_mode_keeps_the_earlier_lessons_solutions_from_an_assembly(
        gradescope_source13b, gs_root, no_userns):
    """The 13b zip carries lessons 10-13's solutions, which the grading process loads
    to answer the stand-ins: the submission reaches none of them, nor the stand-ins'
    own file, while its stand-in calls are answered."""
    root = gs_root
    peek = PEEK.format(solution=str(root / "source" / "solutions" / "10_rmsnorm.py"),
                       tests=str(root / "source" / "hidden_tests" / "13b_assembly"
                                 / "stand_ins.py"),
                       results=str(root / "results"))
    res, _, _, _ = gradescope_run(root, gradescope_source13b, ASSEMBLY.read_text() + peek,
                                  no_userns=no_userns, exercise="13b_assembly.py")
    assert res["score"] == 0
    closed = "EACCES" if no_userns else "ENOENT"
    assert f"PEEK solution={closed} tests={closed} results=" in res["output"], \
        res["output"][-2000:]
    assert "READ" not in res["output"]
    res, _, _, _ = gradescope_run(root.parent / "again", gradescope_source13b,
                                  ASSEMBLY.read_text(), no_userns=no_userns,
                                  exercise="13b_assembly.py")
    assert res["score"] == pytest.approx(sum(ASSEMBLY_FULL.values())), res["output"][-2000:]


def test_container_mode_a_full_machine_is_not_the_students_fault(gradescope_setup, gs_root):
    """A submission under its own memory limit, in a container too small for the grader
    and that limit together: the kernel kills the submission, and the grader says the
    machine ran out (no results.json: Gradescope flags the run for staff), instead of
    telling the student they exceeded a limit they kept to."""
    from grader.sandbox import cgroup

    group, _ = cgroup.create()
    if group is None:
        pytest.skip("no memory cgroup to make the container small with")
    cgroup.remove(group)
    # Gradescope's own container (768 MiB), a course limit of 768 MiB and a submission
    # holding 600 of it: the grader's own processes (about 350 MiB since the template
    # preloads transformers, docs/lms.md) and 600 MiB do not fit, whichever way either
    # shrinks by 150 MiB; the grader alone does
    hungry = SOLUTION.read_text() + "\nimport torch as _t\n_HOLD = _t.ones(600 * 2**20 // 4)\n"
    _, output, _, _ = gradescope_run(gs_root, gradescope_setup, hungry, cap_mb=GS_MEMORY_MB,
                                     submission_mb=768, succeeds=False)
    said = " ".join(output.split())  # rich wraps lines at the terminal's width
    assert "ran out of memory while the submission stayed under its 768 MiB" in said, \
        output[-3000:]
    assert "exceeded the 768 MiB" not in said
