"""`grader run` keeps the reference's results in the user's cache (grader/judge/kept.py): the
next run of the same lesson loads them and never imports the solution on the trusted
side, and grades to the same bytes; a damaged recording is computed afresh, and an
earlier version's is removed."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the run as the CLI runs it, saying at its exit whether this process (the trusted
# side, not the sandbox) imported what only the solution imports
RUN = ("import atexit, sys\n"
       "atexit.register(lambda: print('SOLUTION IMPORTED' if 'transformers.activations' "
       "in sys.modules else 'SOLUTION NOT IMPORTED', file=sys.stderr))\n"
       "from grader.cli import main\n"
       "main()\n")

pytestmark = pytest.mark.slow


def run(cache: Path, subs: Path, out: Path) -> str:
    done = subprocess.run([sys.executable, "-c", RUN, "run", "--lesson", "13",
                           "--submissions", str(subs), "--out", str(out), "--jobs", "1"],
                          cwd=ROOT, env={**os.environ, "XDG_CACHE_HOME": str(cache)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def outputs(out: Path) -> dict[str, bytes]:
    """scores.json and the pages (a result also holds its run's timing)."""
    return {p.relative_to(out).as_posix(): p.read_bytes().replace(bytes(out), b"OUT")
            for p in [out / "scores.json", *sorted((out / "feedback").iterdir())]}


def test_a_second_run_loads_the_kept_results_and_grades_the_same(tmp_path):
    subs = tmp_path / "class"
    for sid in ("alice", "bob"):  # a correct student and a known mistake
        shutil.copytree(ROOT / "examples" / "13" / sid, subs / sid)
    cache = tmp_path / "cache"
    folder = cache / "minimind-grader" / "graded"
    folder.mkdir(parents=True)
    (folder / "minimind-llm-13-0ld-torch0-grader0.bin").write_bytes(b"an earlier version's")
    (folder / "minimind-llm-12-0ld-torch0-grader0.bin").write_bytes(b"another lesson's")
    first = run(cache, subs, tmp_path / "first")
    assert "SOLUTION IMPORTED" in first
    (kept,) = folder.glob("*-13-*.bin")  # the earlier version's was removed
    assert (folder / "minimind-llm-12-0ld-torch0-grader0.bin").exists()
    second = run(cache, subs, tmp_path / "second")
    assert "SOLUTION NOT IMPORTED" in second, second[-3000:]
    assert outputs(tmp_path / "second") == outputs(tmp_path / "first")
    # damaged: computed afresh, the same bytes again, and kept whole once more
    kept.write_bytes(kept.read_bytes()[:1000])
    run(cache, subs, tmp_path / "third")
    assert outputs(tmp_path / "third") == outputs(tmp_path / "first")
    assert kept.stat().st_size > 1000
