"""What the Dask path ships of a submission is read as the local path reads it: a link
is never followed (a student's 13_moe.py linked to a secret ships nothing of it, and
says why), and a huge file costs at most MAX_SOURCE+1 bytes (the worker then says it
is over the limit)."""
from __future__ import annotations

import os

from grader import runner
from grader.cluster import _item
from grader.plan import MAX_SOURCE, Submission


def test_a_link_ships_nothing_and_says_why(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the TA's token")
    link = tmp_path / "13_moe.py"
    link.symlink_to(secret)
    sid, data, fp, notes, _ = _item(Submission("ann", link, fingerprint="f"))
    assert (sid, data, fp) == ("ann", None, "f")
    assert notes == ["the file could not be read: it is a link, and links are never followed"]
    # the worker's record then names it, as a local run would
    sub = runner.read(Submission("ann", None, notes=notes))
    assert "link" in sub.problem and "token" not in sub.problem


def test_a_huge_file_ships_one_byte_over_the_limit(tmp_path):
    big = tmp_path / "13_moe.py"
    with open(big, "wb") as f:
        f.truncate(64 * MAX_SOURCE)
    _, data, _, notes, _ = _item(Submission("bob", big))
    assert len(data) == MAX_SOURCE + 1 and notes == []
    on_worker = tmp_path / "worker.py"
    on_worker.write_bytes(data)
    assert "over the" in runner.read(Submission("bob", on_worker)).problem


def test_a_plain_file_ships_whole_and_a_missing_one_nothing(tmp_path):
    plain = tmp_path / "13_moe.py"
    plain.write_text("x = 1\n")
    assert _item(Submission("cy", plain))[1] == b"x = 1\n"
    assert _item(Submission("dee", tmp_path / "absent.py"))[1:] == (None, "", [], "")
    os.mkfifo(tmp_path / "fifo.py")  # never blocks the run
    assert _item(Submission("eve", tmp_path / "fifo.py"))[3] == [
        "the file could not be read: it is not a regular file"]
