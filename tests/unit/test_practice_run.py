"""grader.practice_run's steps that need no sandbox: which course and lesson a check is for,
and the versions `--watch` receives inside a bundle's sandbox."""
import io
from pathlib import Path

import pytest

from grader import practice_run

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_file_is_named_before_a_lesson_is_guessed(tmp_path):
    with pytest.raises(practice_run.WrongInput, match="^no such file: nope.py$"):
        practice_run.lesson_for(ROOT / "course.yml", None, Path("nope.py"))
    with pytest.raises(practice_run.WrongInput, match="not a file"):
        practice_run.lesson_for(ROOT / "course.yml", None, tmp_path)


def test_the_lesson_is_the_one_whose_exercise_has_the_files_name(tmp_path):
    mine = tmp_path / "13_moe.py"
    mine.write_text("")
    course, key = practice_run.lesson_for(ROOT / "course.yml", None, mine)
    assert key == "13" and course.root == ROOT
    other = tmp_path / "notes.py"
    other.write_text("")
    with pytest.raises(practice_run.WrongInput, match="which lesson"):
        practice_run.lesson_for(ROOT / "course.yml", None, other)


def test_the_course_file_from_another_folder_is_the_one_beside_the_grader(tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)  # a student's work folder: no course.yml
    assert practice_run.course_file(None) == ROOT / "course.yml"
    assert practice_run.course_file("elsewhere.yml") == Path("elsewhere.yml")
    (tmp_path / "course.yml").write_text("")
    assert practice_run.course_file(None) == Path("course.yml")


def test_watch_inside_a_sandbox_receives_each_version_until_the_pipe_closes(tmp_path):
    versions = [b"x = 1\n", b"", "y = '\u00e9'\n".encode()]
    pipe = io.BytesIO(b"".join(b"%d\n" % len(v) + v for v in versions))
    dest = tmp_path / "13_moe.py"
    got = [path.read_bytes() for path in practice_run.received(pipe, dest)]
    assert got == versions


def test_no_course_file_says_where_to_run_it(tmp_path):
    with pytest.raises(practice_run.WrongInput, match="give --course PATH"):
        practice_run.lesson_for(tmp_path / "course.yml", None, None)



def test_ctrl_c_in_a_deferred_block_comes_after_it():
    """A watch makes and starts its warm-up thread with Ctrl-C held back: stopped
    between the two, it joined a thread never started and ended as a grader bug (exit
    70; seen under load in test_check_watch)."""
    import os
    import signal

    from grader.practice_run import sigint_deferred

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("the block's end")
        reached.append("after the block")  # not reached: Ctrl-C comes first
    assert reached == ["the block's end"]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
