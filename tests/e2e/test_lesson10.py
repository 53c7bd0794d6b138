"""The second lesson (RMSNorm) proves the harness is lesson-agnostic: it is only
course.yml entries, a solution with markers, probes, hidden tests and mistakes. Its
contract (solution full, stub zero, mistakes named) is tests/e2e/test_contract.py."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_grader_package_names_no_lesson():
    """Nothing under grader/ knows lesson 13's parts or API."""
    words = re.compile(r"\b(13_moe|MOEFeedForward|FeedForward|route|dispatch|"
                       r"load_balancing_loss|aux_loss|RMSNorm)\b")
    for path in (ROOT / "grader").rglob("*.py"):
        code = path.read_text(encoding="utf-8")
        hits = [line for line in code.splitlines()
                if words.search(line) and "e.g." not in line]
        assert not hits, (path, hits)


def test_probes_import_the_probekit_of_the_grader_that_runs(tmp_path):
    """A lesson's probes `from grader.inside.probekit import ...` inside the sandbox. With the
    grader taken from another checkout (PYTHONPATH, as a student bundle or a second
    clone is run), the sandbox must import that grader's probekit, not the one this
    interpreter's editable install points at (which the sandbox does not hold)."""
    import os
    import shutil
    import subprocess
    import sys

    other = tmp_path / "other-checkout"
    shutil.copytree(ROOT / "grader", other / "grader",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", other / "templates")
    subs = tmp_path / "subs" / "ann"
    subs.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "10_rmsnorm.py", subs / "10_rmsnorm.py")
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "run", "--lesson", "10", "--unsandboxed",
         "--course", str(ROOT / "course.yml"),
         "--submissions", str(subs.parent), "--out", str(tmp_path / "out")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(other)}, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import json

    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    (ann,) = scores["students"]
    assert ann["score"] == ann["max_score"], ann
