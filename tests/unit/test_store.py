"""The output folder: safe names, atomic writes, fingerprints."""
from grader.store import Store, fingerprint, safe_name


def test_safe_name_keeps_plain_ids_and_fixes_odd_ones():
    assert safe_name("alice") == "alice"
    odd = [safe_name(s) for s in ("../etc/passwd", "<script>", ".hidden", "a/b", "a_b")]
    assert all("/" not in n and not n.startswith(".") for n in odd)
    assert len(set(odd)) == len(odd)


def test_fingerprint_depends_on_content_and_version():
    assert fingerprint(b"x", "v1") != fingerprint(b"y", "v1") != fingerprint(b"x", "v2")
    assert fingerprint(None, "v1") != fingerprint(b"", "v1")


def test_save_then_current_then_scores(tmp_path):
    store = Store(tmp_path)
    record = {"student_id": "bob", "score": 1.0, "fingerprint": "f1", "elapsed_s": 0.3,
              "raw_report": {"tests": []}}
    store.save(record, "<html></html>")
    assert store.is_current("bob", "f1") and not store.is_current("bob", "f2")
    assert store.load("bob")["timing"] == {"elapsed_s": 0.3}
    doc = store.scores("13", "c", "v", 10.0, ["bob", "nobody"])
    assert [s["student_id"] for s in doc["students"]] == ["bob"]
    assert "timing" not in doc["students"][0] and "raw_report" not in doc["students"][0]
    assert not list(tmp_path.rglob(".tmp-*"))


def test_torn_result_is_regraded(tmp_path):
    store = Store(tmp_path)
    store.result_path("eve").parent.mkdir(parents=True)
    store.result_path("eve").write_text('{"student_id": "ev')
    assert store.load("eve") is None and not store.is_current("eve", "x")


def test_load_sees_a_result_replaced_on_disk(tmp_path):
    """Loads are cached by file identity: a result rewritten (by a worker process,
    atomically) is read again, and a caller's edits never reach the cache."""
    store = Store(tmp_path)
    store.save({"student_id": "s", "score": 1.0, "fingerprint": "a"}, "<p>")
    first = store.load("s")
    first["score"] = 99.0
    assert store.load("s")["score"] == 1.0
    Store(tmp_path).save({"student_id": "s", "score": 2.0, "fingerprint": "b"}, "<p>")
    assert store.load("s")["score"] == 2.0 and store.is_current("s", "b")
