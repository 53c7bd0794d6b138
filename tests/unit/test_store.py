"""The output folder: safe names, atomic writes, fingerprints."""
import json

from grader.record import Diagnosis, GradeRecord, PartRecord, TestRecord, Timing
from grader.store import Spool, Store, dump, encode, fingerprint, safe_name, scores_entry


def test_safe_name_keeps_plain_ids_and_fixes_odd_ones():
    assert safe_name("alice") == "alice"
    odd = [safe_name(s) for s in ("../etc/passwd", "<script>", ".hidden", "a/b", "a_b")]
    assert all("/" not in n and not n.startswith(".") for n in odd)
    assert len(set(odd)) == len(odd)


def test_fingerprint_depends_on_content_and_version():
    assert fingerprint(b"x", "v1") != fingerprint(b"y", "v1") != fingerprint(b"x", "v2")
    assert fingerprint(None, "v1") != fingerprint(b"", "v1")


def record(student_id: str, score: float, fp: str, **more) -> GradeRecord:
    fields = {"status": "graded", "parts": {}, "tests": [], **more}
    return GradeRecord(student_id=student_id, lesson="13", score=score, max_score=10.0,
                       fingerprint=fp, **fields)


def test_save_then_current_then_scores(tmp_path):
    store = Store(tmp_path)
    store.save(record("bob", 1.0, "f1", timing=Timing(elapsed_s=0.3),
                      raw_log={"tests": []}), "<html></html>")
    assert store.is_current("bob", "f1") and not store.is_current("bob", "f2")
    assert store.load("bob").timing == Timing(elapsed_s=0.3)
    stored = json.loads(store.result_path("bob").read_text())
    assert stored["timing"] == {"elapsed_s": 0.3, "cpu_s": 0.0} and "raw_log" not in stored
    assert json.loads((tmp_path / "raw" / "bob.json").read_text()) == {"tests": []}
    store.write_scores("13", "c", "v", 10.0, [scores_entry(store.load("bob"))])
    doc = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert [s["student_id"] for s in doc["students"]] == ["bob"]
    assert "timing" not in doc["students"][0] and "raw_log" not in doc["students"][0]
    assert not list(tmp_path.rglob(".tmp-*"))


def test_scores_json_is_streamed_as_dump_would_write_the_whole_class(tmp_path):
    """The streamed file is, byte for byte, `dump` of the class's document (what it was
    when it was built in memory), odd text included; an empty class too."""
    odd = record("Zoë \u202e", 2.5, "f", name="李雷", problem="lone \udc80 surrogate",
                 status="import_error")
    records = [odd, record("ann", 10.0, "g"), record("bob", 0.0, "h", status="missing")]
    for students in (records, []):
        chosen = sorted(students, key=lambda r: r.student_id)
        Store(tmp_path).write_scores("13", '"students": [] c', "v", 10.0,
                                     [scores_entry(r) for r in chosen])
        doc = {"lesson": "13", "course": '"students": [] c', "version": "v",
               "max_score": 10.0,
               "students": [{**r.score_json(), "page": Store.page_of(r.student_id)}
                            for r in chosen]}
        assert (tmp_path / "scores.json").read_bytes() == encode(dump(doc))


def test_the_spool_gives_entries_back_in_the_order_asked_and_leaves_no_file(tmp_path):
    with Spool(tmp_path / "out") as spool:
        for sid in ("cy", "ann", "bob"):
            spool.add(sid, f"<{sid}>".encode())
        assert "ann" in spool and "nobody" not in spool
        assert list(spool.entries(["ann", "bob", "nobody", "cy"])) == [b"<ann>", b"<bob>", b"<cy>"]
        assert list((tmp_path / "out").iterdir()) == []  # an unnamed file: nothing to clean


def test_the_raw_log_leaves_out_what_the_result_holds(tmp_path):
    meta = {"name": "t", "part": "ffn", "case": [["H", 4]], "checks": [{"heatmap": [[1.0]]}],
            "pictures": [{"got": [1]}], "error": None, "composite": False, "failed": True,
            "diagnosis": {"matches": ["m"]}}
    raw = {"summary": {"failed": 1}, "tests": [{"nodeid": "test_ffn.py::t", "outcome": "failed",
                                                "metadata": meta}]}
    Store(tmp_path).save(record("ann", 0.0, "f", raw_log=raw), "<p>")
    written = json.loads((tmp_path / "raw" / "ann.json").read_text())
    assert written == {"summary": {"failed": 1}, "tests": [
        {"nodeid": "test_ffn.py::t", "outcome": "failed",
         "metadata": {"failed": True, "diagnosis": {"matches": ["m"]}}}]}
    assert raw["tests"][0]["metadata"] is meta and "checks" in meta  # the record's is kept


def test_a_record_reads_back_as_it_was_written(tmp_path):
    """results/<id>.json is the record's one JSON form: written, read, written again,
    byte for byte, with every nested record typed on the way."""
    test = TestRecord(name="t[1]", part="ffn", practice=False, outcome="failed",
                      message="differs", max_abs_diff=0.5, checks=[{"name": "out"}],
                      diagnosis=Diagnosis("m", {"en": "title"}, {"en": "hint"}),
                      max_score=2.0)
    rec = record("ann", 0.0, "f", tests=[test], notes=["a note"], status="timeout",
                 parts={"ffn": PartRecord(0.0, 2.0, 0, 1, test.diagnosis)})
    store = Store(tmp_path)
    store.save(rec, "<p>")
    again = store.load("ann")
    assert again.to_json() == rec.to_json() and again.tests[0].diagnosis.id == "m"
    assert again.parts["ffn"].diagnosis.hint == {"en": "hint"}
    Store(tmp_path / "b").save(again, "<p>")
    assert (tmp_path / "b" / "results" / "ann.json").read_bytes() == \
        store.result_path("ann").read_bytes()


def test_torn_result_is_regraded(tmp_path):
    store = Store(tmp_path)
    store.result_path("eve").parent.mkdir(parents=True)
    store.result_path("eve").write_text('{"student_id": "ev')
    assert store.load("eve") is None and not store.is_current("eve", "x")


def test_load_sees_a_result_replaced_on_disk(tmp_path):
    """A result rewritten (by a worker process, atomically) is what the next load
    reads, and a caller's edits of a loaded record never reach another load."""
    store = Store(tmp_path)
    store.save(record("s", 1.0, "a"), "<p>")
    first = store.load("s")
    first.score = 99.0
    assert store.load("s").score == 1.0
    Store(tmp_path).save(record("s", 2.0, "b"), "<p>")
    assert store.load("s").score == 2.0 and store.is_current("s", "b")


def test_only_the_store_names_the_files_of_out():
    """OUT's layout has one home: no other module of the grader, nor a script (the
    benchmark reads OUT too), spells the name of one of its files (they ask
    a Store for the path)."""
    import ast
    from pathlib import Path

    import grader

    names = {"scores.json", "report.html", "similarity.html"}
    root = Path(grader.__file__).parent.parent
    sources = [*(root / "grader").rglob("*.py"), *(root / "scripts").glob("*.py")]
    spelled = sorted(
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sources if path.name != "store.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in names)
    assert spelled == []
    store = Store(Path("OUT"))
    assert {p.name for p in (store.scores_path, store.report_path, store.similarity_path)} \
        == names


def test_a_page_in_another_language_is_a_new_page():
    """The language is part of what decides a regrade: a class is never left with pages
    in two languages (issue 51)."""
    from grader.judge.plan import Submission, fingerprint_of

    sub = Submission("ann", None, notes=["nothing handed in"])
    zh = Submission("ann", None, notes=["nothing handed in"], language="zh")
    assert fingerprint_of(sub, "v") != fingerprint_of(zh, "v")
    assert fingerprint_of(zh, "v") == fingerprint_of(
        Submission("ann", None, notes=["nothing handed in"], language="zh"), "v")


def test_the_recorded_language_is_read_back_and_a_damaged_file_records_none(tmp_path):
    store = Store(tmp_path)
    store.write_scores("13", "c", "v", 10.0, [], language="zh")
    assert store.language() == "zh"
    store.scores_path.write_text("{not json", encoding="utf-8")
    assert store.language() == ""
