"""Without bubblewrap the grader refuses to run student code unless told to, and when
told to, every score record says it was graded unsandboxed."""
from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from conftest import FULL, SOLUTION, grade_all
from grader.cli import staff as cli
from grader.sandbox import bwrap
from grader.sandbox import slot as slots
from grader.sandbox.slot import claim_uid, open_slot

REASON = "bubblewrap (bwrap) is not installed"


@pytest.fixture
def no_bwrap(monkeypatch):
    monkeypatch.setattr(bwrap, "probe", lambda container=False: bwrap.Support(None, REASON))


def test_refuses_without_sandbox(no_bwrap):
    with pytest.raises(RuntimeError) as err:
        slots.available(False, bwrap.probe())
    msg = str(err.value)
    assert msg.startswith(f"cannot sandbox student code: {REASON}.")
    assert "--unsandboxed" in msg


def test_allowed_explicitly(no_bwrap):
    assert slots.available(True, bwrap.probe()) is False


def test_cli_refuses_plainly(no_bwrap, course, tmp_path):
    subs = tmp_path / "subs" / "alice"
    subs.mkdir(parents=True)
    (subs / "13_moe.py").write_text(SOLUTION.read_text())
    result = CliRunner().invoke(cli.main, [
        "run", "--course", str(course.root / "course.yml"), "--lesson", "13",
        "--submissions", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--jobs", "1"])
    assert result.exit_code != 0
    assert f"cannot sandbox student code: {REASON}" in result.output
    assert not (tmp_path / "out" / "results").exists()  # nothing was graded


def test_an_unchanged_rerun_needs_no_sandbox(no_bwrap, course, tmp_path):
    """Where no sandbox can be had, a run with nothing to grade (the report rebuilt,
    the class unchanged) still completes: only grading is refused."""
    subs = tmp_path / "subs" / "alice"
    subs.mkdir(parents=True)
    (subs / "13_moe.py").write_text(SOLUTION.read_text())
    args = ["run", "--course", str(course.root / "course.yml"), "--lesson", "13",
            "--submissions", str(tmp_path / "subs"), "--out", str(tmp_path / "out"),
            "--jobs", "1"]
    first = CliRunner().invoke(cli.main, [*args, "--unsandboxed"])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli.main, args)
    assert again.exit_code == 0, again.output
    assert "cannot sandbox" not in again.output
    assert (tmp_path / "out" / "scores.json").exists()


def test_unsandboxed_records_say_so(course, tmp_path):
    # only the trusted reference solution is ever run without the sandbox
    lesson = course.lesson("13")
    slot = open_slot(course.path(lesson.probes), sandboxed=False,
                     preload=tuple(lesson.preload))
    try:
        rec = grade_all(course, slot, tmp_path, {"trusted": SOLUTION.read_text()})["trusted"]
    finally:
        slot.close()
    assert rec["sandboxed"] is False
    assert rec["score"] == FULL


def test_two_slots_never_share_a_uid(course):
    """RLIMIT_NPROC counts a uid machine-wide: concurrent runs must not share one."""
    if (reason := bwrap.probe().reason) is not None:
        pytest.skip(reason)
    first, held = claim_uid()
    try:
        second, held2 = claim_uid()
        assert second != first
        os.close(held2)
    finally:
        os.close(held)


def test_a_forked_zygote_grades_alike_and_inherits_no_environment(course, tmp_path,
                                                                  monkeypatch):
    """Without bwrap, one submission's zygote is a fork of the grader (`fork=True`):
    the same scores, and none of the grader's environment or open files reach it."""
    monkeypatch.setenv("GRADER_TEST_SECRET", "s3cret-token")
    lesson = course.lesson("13")
    kept = open(tmp_path / "open-in-the-grader", "w")  # noqa: SIM115 - held open on purpose
    slot = open_slot(course.path(lesson.probes), sandboxed=False,
                     preload=tuple(lesson.preload), fork=True)
    peek = SOLUTION.read_text() + (
        "\nimport os as _os\nraise RuntimeError('ENV ' + ','.join(sorted(_os.environ)) + "
        "' FDS ' + ','.join(_os.readlink(f'/proc/self/fd/{fd}') for fd in "
        "_os.listdir('/proc/self/fd')))\n")
    try:
        assert slot.sandbox.forked
        recs = grade_all(course, slot, tmp_path, {"honest": SOLUTION.read_text(),
                                                  "peek": peek})
    finally:
        slot.close()
        kept.close()
    assert recs["honest"]["score"] == FULL and recs["honest"]["sandbox"] == "none"
    seen = recs["peek"]["problem"] + recs["peek"]["import_traceback"]
    assert "ENV " in seen and "s3cret" not in seen and "GRADER_TEST_SECRET" not in seen
    assert "open-in-the-grader" not in seen, seen
