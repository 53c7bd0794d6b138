"""`grader run`'s written step: answers recorded beside course.yml, the written map in
scores.json with its points in the total, TAs' marks never changed, a mark on a changed
answer stale, and the page's section escaped and kept up to date."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader import config
from grader.intake.answers import read_answers
from grader.judge.written import BEGIN, Mark, append_jsonl, apply_to_class, grades_folder
from grader.pages.feedback import templates
from grader.store import Store, dump, encode

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def course(tmp_path):
    """The project's course, read from a copy of course.yml in tmp_path (so grades/
    lands there)."""
    (tmp_path / "course.yml").write_text((ROOT / "course.yml").read_text(encoding="utf-8"),
                                         encoding="utf-8")
    for d in ("solutions", "exercises", "hidden_tests", "examples", "tests"):
        (tmp_path / d).symlink_to(ROOT / d)
    return config.load(tmp_path / "course.yml")


def entry(sid: str, score: float = 4.0) -> bytes:
    return encode(dump({"student_id": sid, "score": score, "max_score": 10.0,
                        "status": "graded"})[:-1])


def run(course, tmp_path, files: dict[str, str]) -> dict[str, dict]:
    paths = {}
    for sid, text in files.items():
        f = tmp_path / "class" / sid / "13_moe.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
        paths[sid] = f
    store = Store(tmp_path / "out")
    for sid in files:
        store.feedback_path(sid).parent.mkdir(parents=True, exist_ok=True)
        store.feedback_path(sid).write_text("<main>\n<p>code</p>\n</main>", encoding="utf-8")
    out = [json.loads(e) for e in apply_to_class(course, "13", paths,
                                                  [entry(s) for s in files], store, "en",
                                                  templates())]
    return {d["student_id"]: d for d in out}


SHAPES = 'ANSWER_Q6 = {"x_flat": "[N, H]", "scores": "[N, E]", "topk_idx": "[N, K]", ' \
         '"topk_weight": "[N, K]", "y": "[B, S, H]"}\n'


def test_written_points_join_the_total_and_each_question_has_a_status(course, tmp_path):
    got = run(course, tmp_path, {"a": 'ANSWER_Q1 = "attention mixes tokens"\n' + SHAPES,
                                 "b": ""})
    a, b = got["a"], got["b"]
    assert a["written"]["q6"] == {"score": 1.25, "max_score": 1.25, "status": "auto"}
    assert a["written"]["q1"] == {"score": 0.0, "max_score": 2.0, "status": "awaiting"}
    assert a["written"]["q2"]["status"] == "no_answer"
    assert a["score"] == 4.0 + 1.25 and a["max_score"] == 10.0 + 13.75
    assert {e["status"] for e in b["written"].values()} == {"no_answer"}
    folder = grades_folder(course.root, "13")
    assert (folder / "answers.jsonl").is_file() and not (folder / "written.jsonl").exists()
    assert not (tmp_path / "out" / "grades").exists()


def test_a_mark_counts_on_its_answer_and_goes_stale_when_the_answer_changes(course,
                                                                           tmp_path):
    first = 'ANSWER_Q1 = "attention mixes tokens; the FFN works per token"\n'
    h = read_answers(_write(tmp_path, first), course.lesson("13").written)["q1"].digest
    folder = grades_folder(course.root, "13")
    append_jsonl(folder / "written.jsonl", [Mark("a", "q1", h, rubric=("attn_mixes",),
                                                 comment="say more on the FFN").to_json()])
    before = (folder / "written.jsonl").read_bytes()
    got = run(course, tmp_path, {"a": first})["a"]
    assert got["written"]["q1"] == {"score": 1.0, "max_score": 2.0, "status": "marked"}
    assert got["score"] == 5.0
    page = (tmp_path / "out" / "feedback" / "a.html").read_text(encoding="utf-8")
    assert "say more on the FFN" in page and "✓ 1 — Attention moves information" in page
    assert "Model answer" not in page  # rubric notes are the TAs'
    got = run(course, tmp_path, {"a": first + 'ANSWER_Q1 = "changed"\n'})["a"]
    assert got["written"]["q1"] == {"score": 0.0, "max_score": 2.0, "status": "stale"}
    assert (folder / "written.jsonl").read_bytes() == before  # a run never changes a mark
    page = (tmp_path / "out" / "feedback" / "a.html").read_text(encoding="utf-8")
    assert "awaiting a TA" in page and page.count(BEGIN) == 1


def _write(tmp_path, text: str) -> Path:
    f = tmp_path / "probe.py"
    f.write_text(text, encoding="utf-8")
    return f


def test_the_page_escapes_answers_and_says_a_long_one_was_cut(course, tmp_path):
    hostile = '<script>alert(1)</script>' + "x" * 25_000
    run(course, tmp_path, {"h": f"ANSWER_Q1 = {hostile!r}\n" + SHAPES.replace("[N, E]", "[N, K]")})
    page = (tmp_path / "out" / "feedback" / "h.html").read_text(encoding="utf-8")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)" in page
    assert "only the first 20000 were kept" in page and "x" * 20_001 not in page
    assert "One row per token" in page or "one column per expert" in page


def test_the_page_in_chinese_says_awaiting_a_ta(course, tmp_path):
    paths = {"z": _write(tmp_path, 'ANSWER_Q1 = "见上"\n')}
    store = Store(tmp_path / "out")
    store.feedback_path("z").parent.mkdir(parents=True)
    store.feedback_path("z").write_text("<main></main>", encoding="utf-8")
    list(apply_to_class(course, "13", paths, [entry("z")], store, "zh", templates()))
    assert "等待助教批改" in store.feedback_path("z").read_text(encoding="utf-8")


def test_the_sample_class_answers_all_eight_in_varied_forms():
    written = config.load(ROOT / "course.yml").lesson("13").written
    given = {}
    for f in sorted((ROOT / "examples/13").glob("*/13_moe.*")):
        answers = read_answers(f, written)
        given[f.parent.name] = {q for q, a in answers.items() if a.given}
    assert given["alice"] == set(written) and given["ivan"] == set(written)
    assert given["dave"] == set()  # the stub, unchanged
    assert all(q in set().union(*given.values()) for q in written)


def test_every_export_carries_scores_jsons_total_written_part_included(tmp_path):
    """Gradescope names each question, nbgrader gets its cells (manual_score for a TA's
    mark), LTI stays PendingManual while a question awaits a TA, every total is
    scores.json's."""
    import csv

    from tests.unit.test_export import export, make_course, record

    base = make_course()
    lesson = base.lesson("13").model_copy(update={
        "written": config.load(ROOT / "course.yml").lesson("13").written})
    course = base.model_copy(update={"lessons": {"13": lesson}, "root": tmp_path})
    texts = {"alice": 'ANSWER_Q1 = "mixes tokens"\nANSWER_Q2 = "SwiGLU"\n' + SHAPES,
             "zed": SHAPES.replace("[N, E]", "[N, K]")}
    paths = {sid: _write(tmp_path / sid, t) for sid, t in texts.items()
             if (tmp_path / sid).mkdir() is None}
    h = read_answers(paths["alice"], lesson.written)["q1"].digest
    append_jsonl(grades_folder(tmp_path, "13") / "written.jsonl",
                 [Mark("alice", "q1", h, points=1.5).to_json()])
    records = [record("alice", "graded", [True, True, False, True, True]),
               record("zed", "graded", [True] * 5)]
    students = [json.loads(e) for e in apply_to_class(
        course, "13", paths, [encode(dump(r)[:-1]) for r in records], Store(tmp_path / "o"),
        "en", templates())]
    doc = {"lesson": "13", "max_score": 5.0 + 13.75, "course": "minimind-test",
           "version": "v", "students": students}
    want = {s["student_id"]: s["score"] for s in students}
    assert want == {"alice": 4.0 + 1.5 + 1.25, "zed": 5.0 + 1.0}
    out = tmp_path / "export"
    export(course, "13", doc, out, ["gradescope", "canvas", "moodle", "lti"])
    for sid, total in want.items():
        gs = json.loads((out / "gradescope" / f"{sid}.json").read_text(encoding="utf-8"))
        assert gs["score"] == total == sum(t["score"] for t in gs["tests"])
        assert any(t["name"].startswith("Check question q6") for t in gs["tests"])
    canvas = list(csv.reader(opened_text(out / "canvas.csv")))
    assert sorted(float(r[5]) for r in canvas[2:] if r[5]) == sorted(want.values())
    lti = {o["userId"]: o for o in map(json.loads, (out / "lti_scores.jsonl").read_text(
        encoding="utf-8").splitlines())}
    assert {o["scoreGiven"] for o in lti.values()} == set(want.values())
    api = pytest.importorskip("nbgrader.api")
    (db,) = [p for p in export(course, "13", doc, tmp_path, ["nbgrader"]) if p.suffix == ".db"]
    with api.Gradebook(f"sqlite:///{db}", course_id=course.course) as gb:
        for sid, total in want.items():
            sub = gb.find_submission("lesson_13", sid)
            assert sub.score == total and sub.max_score == 5.0 + 13.75
        q1 = gb.find_grade("written_q1", "13_moe", "lesson_13", "alice")
        assert q1.manual_score == 1.5 and not q1.needs_manual_grade
        assert gb.find_grade("written_q2", "13_moe", "lesson_13", "alice").needs_manual_grade
    # alice's q2 awaits a TA; zed answered only the shapes question
    assert [lti[s]["gradingProgress"] for s in ("4001", "zed")] == ["PendingManual",
                                                                    "FullyGraded"]


def opened_text(path: Path):
    import io

    return io.StringIO(path.read_text(encoding="utf-8"))


def test_the_class_report_has_each_questions_marks_and_rubric_use(course, tmp_path):
    from grader.judge.tally import Tally
    from grader.judge.written import report_rows
    from grader.pages.report import render_report

    texts = {"a": 'ANSWER_Q1 = "attention mixes tokens"\n' + SHAPES,
             "b": 'ANSWER_Q1 = "the FFN is per token"\n',
             "c": 'ANSWER_Q1 = "both"\n', "d": ""}
    folder = grades_folder(course.root, "13")
    written = course.lesson("13").written
    for sid in texts:
        (tmp_path / sid).mkdir()
    hashes = {sid: read_answers(_write(tmp_path / sid, t), written)["q1"].digest
              for sid, t in texts.items()}
    append_jsonl(folder / "written.jsonl", [
        Mark("a", "q1", hashes["a"], rubric=("attn_mixes",)).to_json(),
        Mark("b", "q1", hashes["b"], rubric=("attn_mixes", "ffn_per_token")).to_json(),
        Mark("c", "q1", "an-earlier-answer", rubric=("ffn_per_token",)).to_json()])
    got = run(course, tmp_path, texts)
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({"students": list(got.values())}), encoding="utf-8")
    rows = {r["id"]: r for r in report_rows(written, folder, scores)}
    q1 = rows["q1"]
    assert q1["statuses"] == {"marked": 2, "stale": 1, "no_answer": 1}
    assert [(d["score"], d["n"]) for d in q1["distribution"]] == [(1.0, 1), (2.0, 1)]
    assert {r["id"]: r["used"] for r in q1["rubric"]} == {"attn_mixes": 2,
                                                          "ffn_per_token": 1}  # c's is stale
    assert rows["q6"]["statuses"] == {"auto": 1, "no_answer": 3}
    assert [(d["score"], d["n"]) for d in rows["q6"]["distribution"]] == [(1.25, 1)]
    page = render_report(Tally(), course, "13", "en", None, None, (), (), list(rows.values()))
    assert 'id="written-q1"' in page and "awaiting a TA" not in page.split("written-q1")[1][:200]
    assert "stale" in page and "ffn_per_token" in page
