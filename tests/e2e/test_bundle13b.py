"""Lesson 13b's student bundle (issue 57): `grader check` at home runs the student's
assembly on their own lessons 10-13 files beside it, each first checked with its own
lesson's practice tests, names a piece that fails there or is missing, and the bundle
holds no solution, graded test or stand-in of any of those lessons."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# the `grader` a student bundle installs (its pyproject.toml's script)
BUNDLES_GRADER = [sys.executable, "-c", "from grader.cli.student import student; student()"]
EARLIER = {"10": "10_rmsnorm.py", "11": "11_attention.py", "12": "12_rope.py",
           "13": "13_moe.py"}
FOLDERS = {"10": "10_rmsnorm", "11": "11_attention", "12": "12_rope", "13": "13_moe",
           "13b": "13b_assembly"}
ASSEMBLY = "13b_assembly.py"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundle(student_bundle) -> Path:
    """Lesson 13b's bundle, built once for the suite (tests/conftest.py)."""
    return student_bundle("13b")


def _solution(name: str) -> str:
    return re.sub(r"^ *### (BEGIN|END) SOLUTION\n", "", (ROOT / "solutions" / name)
                  .read_text(encoding="utf-8"), flags=re.M)


def _mistaken(key: str, mistake: str) -> tuple[str, dict]:
    """Lesson `key`'s solution carrying one of its known mistakes, and that mistake."""
    found = yaml.safe_load((ROOT / "hidden_tests" / FOLDERS[key] / "mistakes.yml")
                           .read_text("utf-8"))
    entry = next(m for m in found if m["id"] == mistake)
    text = _solution(EARLIER.get(key, ASSEMBLY))
    for edit in entry["edits"]:
        assert edit["old"] in text
        text = text.replace(edit["old"], edit["new"])
    return text, entry


def _files(**changed: str | None) -> dict[str, str]:
    """The 13b solution with lessons 10-13's solutions beside it, as a student's own
    files; `changed`: file stem (`l12`, `assembly`) -> its text, or None for no file."""
    files = {ASSEMBLY: _solution(ASSEMBLY), **{n: _solution(n) for n in EARLIER.values()}}
    for stem, text in changed.items():
        name = ASSEMBLY if stem == "assembly" else EARLIER[stem.removeprefix("l")]
        if text is None:
            del files[name]
        else:
            files[name] = text
    return files


def check(bundle: Path, work: Path, files: dict[str, str],
          *options: str) -> subprocess.CompletedProcess:
    """The bundle's `grader check 13b_assembly.py`, as a student who installed it runs
    it: in a fresh work folder of their own holding their files (no course.yml)."""
    work.mkdir()
    for name, text in files.items():
        (work / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(bundle)}
    return subprocess.run([*BUNDLES_GRADER, "check", *options, str(work / ASSEMBLY)],
                          cwd=work, env=env, capture_output=True, text=True, timeout=900)


def _parts(stdout: str) -> dict[str, str]:
    """Each 13b part's line: its mark and count."""
    return {m.group(2): m.group(1) for m in
            re.finditer(r"^([✓✗]) (self_attn|block|model|own) +(\S+)", stdout, re.M)}


def test_bundle_holds_no_solution_nor_graded_test(bundle):
    names = {p.name for p in bundle.rglob("*")}
    assert not names & {"mistakes.yml", "stand_ins.py", "equivalent_mutants.yml"}
    assert not (bundle / "solutions").exists() and not (bundle / "hidden_tests").exists()
    graded = [p for p in bundle.rglob("test_*.py") if not p.name.startswith("test_practice_")]
    assert not graded, graded
    course = yaml.safe_load((bundle / "course.yml").read_text(encoding="utf-8"))
    assert sorted(course["lessons"]) == ["10", "11", "12", "13", "13b"]
    assert all("solution" not in entry for entry in course["lessons"].values())
    # only 13b's stub where the student works: no earlier stub where their files go
    assert {p.name for p in bundle.glob("*.py")} == {ASSEMBLY, "install.py"}
    # no line of any of the five solutions that its stub does not hold (nor the lessons'
    # probes, whose stand-ins have the reference's layout by design: its __init__ lines)
    secret = set()
    probes = "".join(p.read_text(encoding="utf-8")
                     for p in (ROOT / "hidden_tests").glob("*/probes.py"))
    for key in FOLDERS:
        name = EARLIER.get(key, ASSEMBLY)
        stub = (ROOT / "exercises" / name).read_text(encoding="utf-8") + probes
        solution = (ROOT / "solutions" / name).read_text(encoding="utf-8")
        for body in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", solution, re.S):
            secret |= {line.strip() for line in body.splitlines()
                       if len(line.strip()) >= 30 and line.strip() not in stub}
    assert len(secret) > 20
    for f in bundle.rglob("*"):
        if f.is_file() and f.suffix in (".py", ".yml", ".md", ".bin"):
            data = f.read_bytes()
            assert not [s for s in secret if s.encode() in data], f


def test_bundle_holds_no_graded_case_of_13b(bundle, course):
    """By content, as lesson 13's bundle is held (test_bundle.py): each lesson's folder
    ships its practice tests and helpers only, and 13b's recording holds no graded
    case's request."""
    from grader.deliver.bundle import RECORDING, shipped
    from grader.inside import protocol
    from grader.judge import runner
    from grader.judge.context import LessonContext

    for key, folder in FOLDERS.items():
        stub = {EARLIER[key]} if key in EARLIER else set()  # an earlier lesson's, kept here
        assert ({f.name for f in (bundle / "tests" / folder).iterdir()}
                == {f.name for f in shipped(ROOT / "hidden_tests" / folder)} | {RECORDING}
                | stub)
    recorded = protocol.loads((bundle / "tests" / "13b_assembly" / RECORDING).read_bytes())
    graded = set(runner.grade_solution(LessonContext(course, "13b")))
    assert graded and recorded["reference"] and not graded & set(recorded["reference"])
    for variant in recorded["variants"].values():
        assert not graded & set(variant)


def test_check_at_home_passes_the_solution_on_the_solutions(bundle, tmp_path):
    proc = check(bundle, tmp_path / "work", _files())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "practice tests: 3/3 passed" in proc.stdout, proc.stdout
    for key, name in EARLIER.items():
        assert re.search(rf"✓ lesson {key} {name}: .*practice tests (\d+)/\1 passed",
                         proc.stdout), proc.stdout


def test_a_wiring_mistake_fails_and_is_named(bundle, tmp_path):
    wrong, mistake = _mistaken("13b", "post_norm")
    proc = check(bundle, tmp_path / "work", _files(assembly=wrong))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    parts = _parts(proc.stdout)
    assert parts["self_attn"] == "✓" and parts["block"] == "✗", proc.stdout
    block = proc.stdout[proc.stdout.index("✗ block"):proc.stdout.index(" model ")]
    assert f"likely mistake: {mistake['title']}" in block, proc.stdout
    # every own file passes its own lesson: nothing there to blame
    assert not re.search(r"✗ lesson", proc.stdout), proc.stdout
    # no example, question or trace asks the stand-ins nothing answers here
    assert "stand-ins" not in proc.stdout and "smallest failing example" not in proc.stdout


def test_a_wrong_lesson_12_file_is_named_as_the_lesson_12_piece(bundle, tmp_path):
    wrong, mistake = _mistaken("12", "rotate_half_sign")
    proc = check(bundle, tmp_path / "work", _files(l12=wrong))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "lesson 12 " in x)
    assert line.lstrip().startswith("✗") and "12_rope.py fails its practice tests" in line
    assert "apply_rotary_pos_emb come from" in line and "not for your wiring" in line
    assert "precompute_freqs_cis" not in line, line
    assert mistake["title"] in proc.stdout
    assert re.search(r"✓ lesson 11 ", proc.stdout), proc.stdout
    assert _parts(proc.stdout)["self_attn"] == "✗"  # it runs on the wrong RoPE


def test_a_missing_or_broken_earlier_file_is_named_in_english_and_chinese(bundle, tmp_path):
    proc = check(bundle, tmp_path / "en", _files(l13=None))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("lesson 13: no 13_moe.py beside your file, so FeedForward, MOEFeedForward "
            "cannot run") in proc.stdout, proc.stdout
    assert "FeedForward comes from your lesson 13 file, and none was found" in proc.stdout
    assert _parts(proc.stdout)["self_attn"] == "✓"  # it needs no lesson 13 piece
    files = _files(l13=None, l11="raise RuntimeError('not yet')\n" + _solution(EARLIER["11"]))
    proc = check(bundle, tmp_path / "zh", files, "--language", "zh")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "第 13 课：你的文件旁边没有 13_moe.py" in proc.stdout, proc.stdout
    assert "第 11 课 11_attention.py 的练习测试在" in proc.stdout
    assert "RuntimeError" in proc.stdout[proc.stdout.index("✗ 第 11 课"):]
    assert "your lesson 11 file raised RuntimeError as it was imported" in proc.stdout
    proc = check(bundle, tmp_path / "json", files, "--json")
    earlier = {e["lesson"]: e for e in json.loads(proc.stdout)["earlier"]}
    assert not earlier["13"]["found"] and earlier["13"]["pieces"] == ["FeedForward",
                                                                      "MOEFeedForward"]
    assert earlier["11"]["found"] and earlier["11"]["failing"] and earlier["11"]["problem"]
    assert earlier["10"]["found"] and not earlier["10"]["failing"]
