"""grader.run.practice_run's steps that need no sandbox: which course and lesson a check is for,
and the versions `--watch` receives inside a bundle's sandbox."""
import io
import threading
from pathlib import Path

import pytest

from grader.run import practice_run

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




class _Touched:
    """A context whose every use is noted: a warm-up that runs touches it."""

    def __init__(self):
        self.touched = []

    def __getattr__(self, name):
        self.touched.append(name)
        raise AttributeError(name)


def test_ctrl_c_while_the_warm_up_starts_is_no_error_and_a_late_start_does_nothing(
        monkeypatch):
    """A watch stopped by Ctrl-C inside `Thread.start` joined a thread never started
    and ended as a grader bug (exit 70; 2 of 12 runs of test_check_watch, four at a
    time). Its stop is now no error, and the thread, should it start after the stop,
    touches nothing `remember` is about to read."""
    from grader.run.practice_run import Warming

    ctx = _Touched()
    warming = Warming(ctx)
    real_start = threading.Thread.start

    def interrupted(thread):
        raise KeyboardInterrupt  # Ctrl-C before the thread is launched

    monkeypatch.setattr(threading.Thread, "start", interrupted)
    with pytest.raises(KeyboardInterrupt):
        warming.start()
    warming.stop()  # raised RuntimeError: cannot join thread before it is started
    real_start(warming._thread)  # the launch comes late, after the stop
    warming._thread.join()
    assert ctx.touched == [] and not warming.done.is_set()


def test_a_warm_up_stopped_after_it_ran_is_joined(monkeypatch):
    """Without Ctrl-C: the thread runs, and `stop` waits for it."""
    from grader.run import practice_run

    ran = threading.Event()
    monkeypatch.setattr(practice_run, "_warm", lambda ctx, stop, done: ran.set())
    warming = practice_run.Warming(_Touched())
    warming.start()
    warming.stop()
    assert ran.is_set() and not warming._thread.is_alive()


def test_a_ctrl_c_dropped_in_a_finalizer_still_ends_the_watch(tmp_path):
    """Python drops a KeyboardInterrupt raised inside a finalizer (`__del__`): a watch
    went on polling after Ctrl-C (test_check_watch hung once in a suite run). The poll
    raises the noted Ctrl-C again, and the handler before it is back afterwards."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    if before is not signal.default_int_handler:
        pytest.skip("Ctrl-C is not Python's here (a run started in the background)")
    file = tmp_path / "13_moe.py"
    file.write_text("x = 1\n")
    versions = practice_run.saves(file, poll=0.01)
    assert next(versions) == file
    try:
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
    except KeyboardInterrupt:
        pass  # what Python does with it in a finalizer: printed, dropped
    file.write_text("x = 2\n")  # a save after it: the watch must not check it
    with pytest.raises(KeyboardInterrupt):
        next(versions)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_checks_steps_are_one_list_each_with_its_result(tmp_path):
    """`STEPS` is every aspect of a check, each kept under its name; the shapes
    question's marks are in the outcome whoever runs the steps (the CLI printed them
    from marks of its own, which `grader.api.check_file` lacked)."""
    from types import SimpleNamespace

    from grader import config
    from grader.record import GradeRecord

    assert [s.name for s in practice_run.STEPS] == [
        "read", "practice tests", "outcome", "shapes question"]
    course = config.load(ROOT / "course.yml")
    ctx = SimpleNamespace(course=course, key="13", lesson=course.lesson("13"))
    file = tmp_path / "13_moe.py"
    file.write_text('ANSWER_Q6 = {"x_flat": "[N, H]", "scores": "[N, E]", "topk_idx": '
                    '"[N, K]", "topk_weight": "[N, K]", "y": "[N, N]"}\n')
    given = []

    def grade(sub):
        given.append(sub)
        return GradeRecord(student_id="you", lesson="13", status="graded", score=0,
                           max_score=0, parts={}, tests=[])

    checking = practice_run.Checking(ctx, file, file.name, tmp_path / "loaded.py", grade)
    practiced = practice_run.run_steps(checking, practice_run.STEPS).practiced()
    assert given == [checking.results["read"]] and given[0].path.read_text() == \
        file.read_text()
    assert practiced.record is checking.results["practice tests"]
    marks = practiced.outcome["written"]
    assert marks is checking.results["shapes question"] and list(marks) == ["q6"]
    fields = marks["q6"]["fields"]
    assert [f for f, m in fields.items() if not m["ok"]] == ["y"]
    assert practiced.status == 1  # no practice test passed: the marks change no status
