"""The Dask executor grades a folder like the local pool: a local cluster of worker
processes, a correct submission, a known bug, a missing file and one that does not
import; the same scores, and the output folder written by the client alone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

distributed = pytest.importorskip(
    "distributed", reason="dask distributed is not installed (pip install '.[cluster]')")

from grader.run import cluster, pool  # noqa: E402 - after importorskip
from grader.judge import runner  # noqa: E402 - after importorskip
from grader.judge.context import LessonContext  # noqa: E402 - after importorskip
from grader.judge.plan import Summary, plan  # noqa: E402 - after importorskip
from grader.store import Store  # noqa: E402 - after importorskip
from grader.sandbox import bwrap  # noqa: E402 - after importorskip

REPO = Path(__file__).resolve().parents[2]
SOLUTION = (REPO / "solutions" / "13_moe.py").read_text(encoding="utf-8")
SANDBOXED = bwrap.probe().reason is None

pytestmark = pytest.mark.slow


def make_class(root: Path) -> list[runner.Submission]:
    buggy = SOLUTION.replace("scores = F.softmax(gate(x_flat), dim=-1)",
                             "scores = F.softmax(gate(x_flat), dim=0)")
    assert buggy != SOLUTION
    files = {"ada": SOLUTION, "bob": buggy, "cy": SOLUTION + "\n# cy's copy\n",
             "dee": "import torch\nraise ValueError('oops')\n"}
    subs = []
    for sid, text in files.items():
        (root / sid).mkdir(parents=True)
        (root / sid / "13_moe.py").write_text(text, encoding="utf-8")
        subs.append(runner.Submission(sid, root / sid / "13_moe.py"))
    (root / "eve").mkdir()
    subs.append(runner.Submission("eve", None))  # nothing submitted
    return subs


def scores(out: Path) -> dict:
    return {p.stem: (rec["score"], rec["status"],
                     {k: v["score"] for k, v in rec["parts"].items()})
            for p in sorted((out / "results").glob("*.json"))
            for rec in [json.loads(p.read_text(encoding="utf-8"))]}


def outcomes(out: Path, sid: str) -> dict:
    """What a student got, test by test (the float noise of max_abs_diff aside: the
    cluster's reference runs single-threaded, the local pool's parent may not)."""
    rec = json.loads((out / "results" / f"{sid}.json").read_text(encoding="utf-8"))
    return {"status": rec["status"], "problem": rec["problem"], "score": rec["score"],
            "parts": {k: (v["score"], v["passed"], (v["diagnosis"] or {}).get("id"))
                      for k, v in rec["parts"].items()},
            "tests": [(t["name"], t["outcome"], t["score"], (t["diagnosis"] or {}).get("id"))
                      for t in rec["tests"]]}


@pytest.fixture(scope="module")
def dask_client():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as lc, \
            distributed.Client(lc) as client:
        yield client


def test_cluster_grades_like_the_pool(course, tmp_path, dask_client):
    subs = make_class(tmp_path / "subs")
    version = course.version("13")
    local, entries = Summary(), {"local": [], "dask": []}
    pool.grade_class(LessonContext(course, "13"), plan(Store(tmp_path / "local"), make_class(tmp_path / "subs2"),
                                        version, False),
                     tmp_path / "local", 2, SANDBOXED, "en", local,
                     collect=entries["local"].append)
    assert not local.worker_failures
    summary = Summary()
    cluster.grade_class(LessonContext(course, "13"), plan(Store(tmp_path / "dask"), subs, version, False),
                        tmp_path / "dask", 2, SANDBOXED, "en", summary, scheduler=dask_client,
                        collect=entries["dask"].append)
    assert not summary.worker_failures, summary.worker_failures
    # each student's entry reached the parent (the client), the same from both paths
    lines = {k: sorted((e.line.student_id, e.line.score, e.line.status, e.line.parts)
                       for e in v) for k, v in entries.items()}
    assert lines["dask"] == lines["local"] and len(lines["dask"]) == 5
    assert summary.graded == 5 and summary.errors == 2
    got, want = scores(tmp_path / "dask"), scores(tmp_path / "local")
    assert got == want
    assert got["ada"][0] == got["cy"][0] == course.lesson("13").max_score
    assert got["bob"][0] < got["ada"][0] and got["bob"][2]["router"] < 2
    assert got["dee"][1] == "import_error" and got["eve"][1] == "missing"
    # test by test the same outcome, points, diagnosis and problem as the pool
    for sid in ("ada", "bob", "dee", "eve"):
        assert outcomes(tmp_path / "dask", sid) == outcomes(tmp_path / "local", sid)

    # a rerun has nothing left to grade
    assert plan(Store(tmp_path / "dask"), subs, version, False) == []


def test_workers_without_the_course_files_get_a_copy(course, tmp_path, dask_client):
    """A worker that does not have the course (another machine) grades from the copy
    the client sends: force that by giving the workers a course rooted elsewhere."""
    subs = make_class(tmp_path / "subs")[:2]
    version = course.version("13")
    bundle = cluster.course_bundle(course, "13")
    cluster.prepare(dask_client)
    elsewhere = course.model_copy(update={"root": tmp_path / "no-such-checkout"})
    items = [cluster._item(s) for s in subs]
    records = dask_client.submit(cluster.grade_batch, bundle, elsewhere, "13", version,
                                 SANDBOXED, items, pure=False).result()
    by_id = {r.student_id: r for r, _ in records}
    assert by_id["ada"].score == course.lesson("13").max_score
    assert by_id["bob"].parts["router"].score < 2
