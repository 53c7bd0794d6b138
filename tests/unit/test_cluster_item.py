"""What the Dask path ships of a submission is read as the local path reads it
(capped.read_source): a link is never followed (a student's 13_moe.py linked to a secret
ships nothing of it, and says why), a huge file ships no byte, and the worker's record
states the same problem, word for word, as a local run's."""
from __future__ import annotations

import os

from grader.judge import runner
from grader.run.cluster import _item
from grader.intake.capped import MAX_SOURCE
from grader.judge.plan import Submission


def on_worker(item: tuple) -> Submission:
    """The worker's submission for an item, read as the worker reads it."""
    sid, data, fp, notes, name, problem = item
    assert data is None or problem == ""
    return runner.read(Submission(sid, None, notes=notes, fingerprint=fp, name=name,
                                  problem=problem))


def test_a_link_ships_nothing_and_says_why(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the TA's token")
    link = tmp_path / "13_moe.py"
    link.symlink_to(secret)
    item = _item(Submission("ann", link, fingerprint="f"))
    assert item[:4] == ("ann", None, "f", [])
    assert item[5] == "the file could not be read: it is a link, and links are never followed"
    assert on_worker(item).problem == runner.read(Submission("ann", link)).problem


def test_a_huge_file_ships_nothing_and_the_worker_names_its_size(tmp_path):
    big = tmp_path / "13_moe.py"
    with open(big, "wb") as f:
        f.truncate(64 * MAX_SOURCE)
    item = _item(Submission("bob", big))
    assert item[1] is None
    local = runner.read(Submission("bob", big)).problem
    assert on_worker(item).problem == local == (
        f"the file is {64 * MAX_SOURCE} bytes, over the {MAX_SOURCE}-byte limit")


def test_a_plain_file_ships_whole_and_a_missing_one_nothing(tmp_path):
    plain = tmp_path / "13_moe.py"
    plain.write_text("x = 1\n")
    assert _item(Submission("cy", plain))[1] == b"x = 1\n"
    missing = _item(Submission("dee", tmp_path / "absent.py"))
    assert missing[1:] == (None, "", [], "", "no file was submitted")
    assert on_worker(missing).problem == "no file was submitted"
    os.mkfifo(tmp_path / "fifo.py")  # never blocks the run
    assert _item(Submission("eve", tmp_path / "fifo.py"))[5] == (
        "the file could not be read: it is not a regular file")
