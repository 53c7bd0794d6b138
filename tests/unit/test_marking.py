"""The marking page's server (grader/deliver/marking.py), without a browser: only its
token and its own address reach it, a mark is refused on an answer that changed since
the page showed it, identical answers group and a differently marked member leaves its
group, stale marks are shown, a rubric item's new points reach every mark using it,
and an append after a torn line is kept."""
from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from grader import config
from grader.deliver import marking
from grader.intake.answers import read_answers
from grader.judge.written import (Mark, append_jsonl, as_marked, grades_folder,
                                  graded_written, marks, record_answers)

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"


@pytest.fixture
def course(tmp_path):
    (tmp_path / "course.yml").write_text((ROOT / "course.yml").read_text(encoding="utf-8"),
                                         encoding="utf-8")
    for d in ("solutions", "exercises", "hidden_tests", "examples", "tests"):
        (tmp_path / d).symlink_to(ROOT / d)
    return config.load(tmp_path / "course.yml")


def answer(course, tmp_path, answers: dict[str, str]) -> None:
    """Record these q1 answers as `grader run` does."""
    written, found = course.lesson("13").written, {}
    for sid, text in answers.items():
        f = tmp_path / "class" / f"{sid}.py"
        f.parent.mkdir(exist_ok=True)
        f.write_text(f"ANSWER_Q1 = {text!r}\n", encoding="utf-8")
        found[sid] = read_answers(f, written)
    record_answers(grades_folder(course.root, "13"), found)


def view(course) -> dict:
    return marking.question_view(course.root, "13", course.lesson("13"), "q1")


def post_mark(course, students: dict[str, str], **mark) -> int:
    return marking.save_mark(course.root, "13", course.lesson("13"),
                             {"question": "q1", "students": students, **mark}, "ta")


@pytest.fixture
def server(course, tmp_path):
    answer(course, tmp_path, {"a": HOSTILE})
    srv, url = marking.serve(course, "13", "en")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv, url
    srv.shutdown()
    srv.server_close()


def request(url: str, path: str, host: str | None = None, method: str = "GET",
            body: bytes | None = None, kind: str = "application/json"):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        headers = {"Host": host or parts.netloc, "Content-Type": kind}
        conn.request(method, path, body=body, headers=headers)
        res = conn.getresponse()
        return res.status, dict(res.getheaders()), res.read()
    finally:
        conn.close()


def test_only_the_token_and_the_servers_own_address_reach_it(server):
    srv, url = server
    token = url.split("token=", 1)[1]
    assert srv.server_address[0] == "127.0.0.1"
    assert request(url, "/")[0] == 403
    assert request(url, "/?token=" + "x" * len(token))[0] == 403
    assert request(url, f"/api/question?token={token}&q=q1", host="evil.example")[0] == 403
    status, headers, body = request(url, f"/?token={token}&q=q1")
    assert status == 200 and "script-src 'nonce-" in headers["Content-Security-Policy"]
    assert b"onerror" not in body  # answers travel as JSON, never inside the page
    status, headers, body = request(url, f"/api/question?token={token}&q=q1")
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["groups"][0]["answer"] == HOSTILE
    bad = request(url, f"/api/mark?token={token}", method="POST", body=b"x=1",
                  kind="application/x-www-form-urlencoded")  # what another site's form sends
    assert bad[0] == 400


def test_identical_answers_group_and_a_member_marked_apart_leaves(course, tmp_path):
    answer(course, tmp_path, {"a": "Attention MIXES  tokens", "b": "attention mixes\ntokens",
                              "c": "the FFN is per token"})
    groups = view(course)["groups"]
    assert sorted(len(g["members"]) for g in groups) == [1, 2]
    assert view(course)["groups"] == groups  # the same order on every load
    pair = next(g for g in groups if len(g["members"]) == 2)
    hashes = {m["student_id"]: m["hash"] for m in pair["members"]}
    assert post_mark(course, hashes, rubric=["attn_mixes"]) == 2  # one mark, the group
    assert view(course)["marked"] == 2
    post_mark(course, {"b": hashes["b"]}, rubric=["attn_mixes", "ffn_per_token"])  # split
    assert sorted(len(g["members"]) for g in view(course)["groups"]) == [1, 1, 1]


def post_split(course, students: dict[str, str]) -> int:
    return marking.save_split(course.root, "13", course.lesson("13"),
                              {"question": "q1", "students": students}, "ta")


def test_a_split_is_saved_for_every_load_until_the_answer_changes(course, tmp_path):
    """Issue 55: an unmarked split joined its group again on reload (it lived in the
    page). Every view reads grades/ afresh, as a reload, a restart or a second TA does."""
    answer(course, tmp_path, {"a": "Attention mixes tokens", "b": "attention mixes tokens",
                              "c": "ATTENTION  mixes tokens"})
    (group,) = view(course)["groups"]
    hashes = {m["student_id"]: m["hash"] for m in group["members"]}
    assert post_split(course, {"b": hashes["b"]}) == 1
    apart = view(course)["groups"]
    assert sorted(sorted(m["student_id"] for m in g["members"]) for g in apart) == \
        [["a", "c"], ["b"]]
    assert view(course)["groups"] == apart  # the same on every load
    answer(course, tmp_path, {"b": "attention mixes  TOKENS "})  # a new answer: no split
    (group,) = view(course)["groups"]
    hashes = {m["student_id"]: m["hash"] for m in group["members"]}
    assert set(hashes) == {"a", "b", "c"}
    post_split(course, {"b": hashes["b"]})
    post_mark(course, {"a": hashes["a"], "c": hashes["c"]}, rubric=["attn_mixes"])
    post_mark(course, {"b": hashes["b"]}, rubric=["attn_mixes"])  # the same mark: still apart
    assert sorted(len(g["members"]) for g in view(course)["groups"]) == [1, 2]
    with pytest.raises(marking.Refused) as refused:  # split on an answer changed since
        post_split(course, {"c": "0" * 64})
    assert refused.value.status == 409


def test_a_split_posted_to_the_server_lands_beside_the_marks(server, course):
    _, url = server
    token = url.split("token=", 1)[1]
    _, _, body = request(url, f"/api/question?token={token}&q=q1")
    (member,) = json.loads(body)["groups"][0]["members"]
    doc = json.dumps({"question": "q1", "students": {"a": member["hash"]}}).encode()
    status, _, body = request(url, f"/api/split?token={token}", method="POST", body=doc)
    assert status == 200 and json.loads(body) == {"saved": 1}
    assert request(url, f"/api/split?token={token}", method="POST",
                   body=json.dumps({"question": "q9", "students": {}}).encode())[0] == 400
    saved = grades_folder(course.root, "13") / "splits.jsonl"
    (row,) = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    assert (row["student_id"], row["question"], row["hash"]) == ("a", "q1", member["hash"])


def test_a_mark_on_an_answer_changed_since_the_page_showed_it_is_refused(course, tmp_path):
    answer(course, tmp_path, {"a": "first answer"})
    shown = view(course)["groups"][0]["members"][0]["hash"]
    post_mark(course, {"a": shown}, rubric=["attn_mixes"])
    answer(course, tmp_path, {"a": "second answer"})
    with pytest.raises(marking.Refused) as refused:
        post_mark(course, {"a": shown}, rubric=["ffn_per_token"])
    assert refused.value.status == 409
    (group,) = view(course)["groups"]
    assert group["stale"] and not group["marked"] and group["mark"]["value"] == 1.0
    assert view(course)["marked"] == 0


@pytest.mark.parametrize("bad", [{"rubric": ["nope"]}, {"adjust": 0.001}, {"points": 3},
                                 {"adjust": "1"}, {"comment": "x" * 6000}])
def test_a_bad_mark_is_refused_and_nothing_written(course, tmp_path, bad):
    answer(course, tmp_path, {"a": "an answer"})
    h = view(course)["groups"][0]["members"][0]["hash"]
    with pytest.raises(marking.Refused):
        post_mark(course, {"a": h}, **bad)
    assert not (grades_folder(course.root, "13") / "written.jsonl").exists()


def test_a_rubric_items_new_points_reach_every_mark_that_uses_it(course, tmp_path):
    answer(course, tmp_path, {"a": "one", "b": "two"})
    hashes = {m["student_id"]: m["hash"] for g in view(course)["groups"]
              for m in g["members"]}
    post_mark(course, hashes, rubric=["attn_mixes"])
    marking.save_rubric_points(course.root, "13", course.lesson("13"),
                               {"question": "q1", "item": "attn_mixes", "points": 0.5}, "ta")
    folder = grades_folder(course.root, "13")
    questions = as_marked(course.lesson("13").written, folder)
    got = {sid: graded_written(questions, {}, {"q1": m}, "en")["q1"]
           for (sid, _), m in marks(folder).items()}
    assert {sid: m["score"] for sid, m in got.items()} == {"a": 0.0, "b": 0.0}  # no answer
    assert all(m.value(questions["q1"]) == 0.5 for m in marks(folder).values())
    assert course.lesson("13").written["q1"].rubric[0].points == 1.0  # course.yml unchanged
    rubric = {r["id"]: r for r in view(course)["rubric"]}
    assert rubric["attn_mixes"]["points"] == 0.5 and rubric["attn_mixes"]["course_points"] == 1
    with pytest.raises(marking.Refused):
        marking.save_rubric_points(course.root, "13", course.lesson("13"),
                                   {"question": "q1", "item": "attn_mixes", "points": 9}, "ta")


def test_an_adjustment_alone_is_a_mark(course):
    q = course.lesson("13").written["q1"]
    m = Mark("a", "q1", "h", adjust=0.5)
    assert m.counts and m.value(q) == 0.5
    assert not Mark("a", "q1", "h", comment="only words").counts


def test_a_mark_appended_after_a_torn_line_is_kept(tmp_path):
    path = tmp_path / "written.jsonl"
    row = Mark("a", "q1", "h", rubric=("attn_mixes",)).to_json()
    path.write_text(json.dumps(row) + "\n" + '{"student_id": "b", "ques', encoding="utf-8")
    append_jsonl(path, [Mark("c", "q1", "h", rubric=("ffn_per_token",)).to_json()])
    assert set(marks(tmp_path)) == {("a", "q1"), ("c", "q1")}


def test_the_page_in_chinese(course, tmp_path):
    answer(course, tmp_path, {"a": "见上"})
    state = marking.Marking(course, "13", "t", "zh", "ta")
    page = state.page("q1", "nonce")
    assert "<title>批改" in page and "Attention 与 FFN 的分工" in page
    assert '<script nonce="nonce">' in page and "见上" not in page
