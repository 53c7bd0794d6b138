"""What a class hands in cannot reach past intake: each attack of issue 11 on the
folders, archives, metadata and notebooks a class submits, run as root like a TA.

Every test builds a class in a temp "world" beside OUT, with an honest classmate, and
checks the attacker's outcome, the classmate (collected with her own file) and the host
(nothing in the world changed but OUT). They run on the intake and planning layer; one
graded run of a hostile class is in tests/fuzz/test_fuzz_intake.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from grader.intake import submissions as intake
from grader.judge import runner
from grader.intake.capped import MAX_SOURCE
from grader.judge.plan import Submission, fingerprint_of, plan
from grader.store import Store

EX = "13_moe.py"
HONEST = "def honest():\n    return 'honest'\n"


def snapshot(root: Path, skip: Path) -> dict[str, str]:
    """Every path under `root` but `skip` (OUT), with what it is: content digest, link
    target or "dir". Links are listed, never followed; no recursion (deep trees)."""
    seen, todo = {}, [str(root)]
    while todo:
        with os.scandir(todo.pop()) as it:
            for e in it:
                if e.path == str(skip):
                    continue
                if e.is_symlink():
                    seen[e.path] = "-> " + os.readlink(e.path)
                elif e.is_dir():
                    seen[e.path] = "dir"
                    todo.append(e.path)
                elif e.is_file():
                    size = e.stat().st_size
                    seen[e.path] = (hashlib.sha256(Path(e.path).read_bytes()).hexdigest()
                                    if size < 1 << 20 else f"{size} bytes")
                else:
                    seen[e.path] = "special"
    return seen


class World:
    """A temp world: the class folder, OUT, and files outside both (the "host")."""

    def __init__(self, root: Path):
        self.root, self.out = root, root / "out"
        self.subs = root / "subs"
        self.secret = write(root / "host/etc/shadow", "root:$6$secrethash:19000:0:99999:7:::\n")
        self.solution = write(root / "host/solutions" / EX, "the reference\n")
        self.before: dict[str, str] = {}

    def honest_folder(self) -> Path:
        return write(self.subs / "honest" / EX, HONEST)

    def collect(self, source: Path | None = None) -> intake.Intake:
        self.before = snapshot(self.root, self.out)
        return intake.collect(source or self.subs, EX, cache=self.out / "intake")

    def unchanged(self) -> bool:
        return snapshot(self.root, self.out) == self.before


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def found(taken: intake.Intake) -> dict:
    return {sid: (path, notes) for sid, path, notes in taken.found}


def graded_source(path: Path | None, notes: list[str] = ()) -> Submission:
    return runner.read(Submission("x", path, notes=list(notes)))


def assert_honest(taken: intake.Intake, sid: str = "honest") -> None:
    path, _ = found(taken)[sid]
    assert graded_source(path).source == HONEST


@pytest.fixture
def world(tmp_path) -> World:
    return World(tmp_path)


def notebook_text(source: object) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
         "execution_count": None}]})


def gradescope(world: World, entries: dict[str, str]) -> Path:
    """An export whose metadata maps folder -> submitter sid; each given folder that
    exists gets its files made by the test."""
    meta = "".join(f"{json.dumps(folder)}:\n  :submitters:\n  - :sid: {json.dumps(sid)}\n"
                   for folder, sid in entries.items())
    write(world.subs / "submission_metadata.yml", meta)
    return world.subs


# Item 1: no name from a class reaches a path unsanitised ------------------------------

def test_gradescope_id_that_is_a_path_overwrites_neither_classmate_nor_solution(world):
    """A submitter id that is a relative or absolute path used to be where intake wrote
    the converted notebook: over a classmate's file, and over solutions/13_moe.py."""
    export = gradescope(world, {
        "submission_1": "honest",
        "submission_2": "../../../subs/submission_1",    # from OUT/intake/notebooks
        "submission_3": str(world.solution.parent),      # an absolute path
    })
    write(export / "submission_1" / EX, HONEST)
    for folder in ("submission_2", "submission_3"):
        write(export / folder / "13_moe.ipynb", notebook_text("print('pwned')\n"))
    taken = world.collect()
    assert world.unchanged(), "intake wrote outside OUT"
    assert_honest(taken)
    for sid, (path, _) in found(taken).items():
        if sid != "honest":
            assert world.out / "intake" in path.parents and "pwned" in path.read_text()


def test_gradescope_folder_that_is_a_path_is_not_read(world):
    """The metadata's folder names are the export's own folders, never a path."""
    outside = write(world.root / "host/elsewhere" / EX, "not yours\n").parent
    export = gradescope(world, {"submission_1": "honest", str(outside): "abs",
                                "../host/elsewhere": "rel"})
    write(export / "submission_1" / EX, HONEST)
    taken = world.collect()
    got = found(taken)
    assert got["abs"][0] is None and got["rel"][0] is None
    assert any("not in the export" in n for n in got["rel"][1])
    assert any(line.startswith("rel: Left out ../host/elsewhere") for line in taken.skipped)
    assert_honest(taken)
    assert world.unchanged()


def test_folder_names_become_distinct_text_ids_that_plan_and_store_accept(world):
    """A non-UTF-8 student folder name aborted planning (its id could not be encoded);
    two such names must not merge into one student either."""
    world.honest_folder()
    for raw in (b"caf\xe9", b"caf\xe8", b"\x1b[2Jclear"):
        write(world.subs / os.fsdecode(raw) / EX, "x = 1\n")
    taken = world.collect()
    ids = [sid for sid, _, _ in taken.found]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert all(sid.encode("utf-8") and "\x1b" not in sid for sid in ids)
    subs = [Submission(sid, path, notes=notes) for sid, path, notes in taken.found]
    assert len(plan(Store(world.out), subs, "v1", force=False)) == 4
    assert_honest(taken)


# Item 3: links, bounds, names, sizes, archives ----------------------------------------

def test_exercise_file_linked_to_the_solution_is_not_graded(world):
    world.honest_folder()
    link = world.subs / "mallory" / EX
    link.parent.mkdir(parents=True)
    link.symlink_to(world.solution)
    taken = world.collect()
    path, notes = found(taken)["mallory"]
    assert path is None and notes == [f"Left out {EX} (links are never followed)."]
    sub = graded_source(path, notes)
    assert sub.source is None and "links are never followed" in sub.problem
    assert f"mallory: Left out {EX} (links are never followed)." in taken.skipped
    assert_honest(taken)


def test_runner_read_never_follows_a_link_to_a_secret(world):
    """Even handed a path that is a link (a race, a caller other than intake),
    `runner.read` refuses it: the secret never reaches the student's feedback."""
    link = world.root / "link.py"
    link.symlink_to(world.secret)
    sub = graded_source(link)
    assert sub.source is None and "link" in sub.problem
    assert "secrethash" not in sub.problem
    assert fingerprint_of(Submission("x", link), "v") == fingerprint_of(Submission("x", None), "v")


def test_exercise_file_linked_to_shadow_shows_nothing_of_it(world):
    world.honest_folder()
    link = world.subs / "mallory" / EX
    link.parent.mkdir(parents=True)
    link.symlink_to(world.secret)
    taken = world.collect()
    path, notes = found(taken)["mallory"]
    sub = graded_source(path, notes)
    assert path is None and sub.source is None
    assert "secrethash" not in " ".join([sub.problem, *notes, *taken.skipped])
    assert_honest(taken)


def test_student_folder_linked_to_a_system_folder_is_not_graded(world):
    world.honest_folder()
    (world.subs / "mallory").symlink_to(world.solution.parent)
    taken = world.collect()
    assert found(taken)["mallory"] == (None, ["Left out the folder mallory "
                                              "(links are never followed)."])
    assert_honest(taken)


def test_student_folder_linked_to_root_neither_aborts_nor_walks(world, monkeypatch):
    world.honest_folder()
    (world.subs / "mallory").symlink_to("/")
    listed: list[str] = []

    def listing(path):
        listed.append(os.path.realpath(path))
        return scandir(path)

    scandir = os.scandir
    world.before = snapshot(world.root, world.out)  # as world.collect, but only intake's
    with monkeypatch.context() as m:                # own listings are recorded
        m.setattr(os, "scandir", listing)
        taken = intake.collect(world.subs, EX, cache=world.out / "intake")
    subs = os.path.realpath(world.subs)
    assert subs in listed, "intake listed no folder: is this still how it walks?"
    assert [p for p in listed if not (p == subs or p.startswith(subs + os.sep))] == []
    assert found(taken)["mallory"][0] is None
    assert_honest(taken)


def test_thousands_of_nested_folders_stop_at_the_depth_cap(world):
    """1,100 nested folders raised RecursionError and aborted the run."""
    world.honest_folder()
    (world.subs / "mallory").mkdir()
    fd = os.open(world.subs / "mallory", os.O_RDONLY)
    for _ in range(1100):  # by descriptor: a path this deep is past pathlib's recursion
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(os.open(EX, os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    try:
        taken = world.collect()
    finally:
        remove_chain(world.subs / "mallory")
    path, notes = found(taken)["mallory"]
    assert path is None
    assert any(f"more than {intake.MAX_DEPTH} folders deep" in n for n in notes)
    assert_honest(taken)


def remove_chain(top: Path) -> None:
    """Remove a d/d/d/... chain one level at a time: shutil.rmtree (and so pytest's
    clean-up of old temp folders) recurses and would fail on it."""
    while (top / "d").exists():
        if (top / "d/d").exists():
            os.rename(top / "d/d", top / "t")
        for f in (top / "d").iterdir():
            f.unlink()
        os.rmdir(top / "d")
        if (top / "t").exists():
            os.rename(top / "t", top / "d")


def test_many_files_stop_at_the_count_cap(world, monkeypatch):
    """A folder of millions of files would hold intake (and its memory) for minutes;
    the cap is lowered here so the test makes 200 files, not 10,000."""
    monkeypatch.setattr(intake, "MAX_ENTRIES", 100)
    world.honest_folder()
    folder = world.subs / "mallory"
    write(folder / "sub" / EX, "past the cap\n")
    for i in range(200):
        (folder / f"f{i:03d}").touch()
    taken = world.collect()
    path, notes = found(taken)["mallory"]
    assert path is None  # "sub" is past the cap, or queued when the cap was reached
    assert len(notes) == 1 and "(only the first 100 entries are looked at)." in notes[0]
    assert_honest(taken)


def test_non_utf8_file_name_in_a_student_folder_reads_as_text(world):
    """Such a name reached the notes as surrogates and killed the worker that saved them."""
    world.honest_folder()
    write(world.subs / "mallory" / os.fsdecode(b"moe\xff\xfe.py"), "x = 1\n")
    taken = world.collect()
    path, notes = found(taken)["mallory"]
    assert graded_source(path).source == "x = 1\n"
    assert notes == [f"Graded moe\ufffd\ufffd.py as {EX}."]
    "".join(notes).encode("utf-8")  # a surrogate would raise here, as in the worker
    assert_honest(taken)


def test_huge_file_is_refused_without_reading_it(world):
    """A 2 GiB 13_moe.py was read whole, twice (fingerprint, then read), before the
    1 MiB check. Sparse here: only what is read costs memory. Intake leaves it out by
    its size, copying none of it, and the student is told why."""
    world.honest_folder()
    huge = world.subs / "mallory" / EX
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as f:
        f.truncate(2 << 30)
    taken = world.collect()
    path, notes = found(taken)["mallory"]
    tracemalloc.start()
    try:
        fingerprint_of(Submission("mallory", path), "v")
        sub = graded_source(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MAX_SOURCE, f"{peak} bytes allocated to refuse the file"
    assert path is None and notes == [f"Left out {EX} ({intake.TOO_LARGE})."]
    sub = graded_source(path, notes)
    assert sub.source is None and sub.problem == f"no file could be graded: {notes[0]}"
    assert_honest(taken)


def test_fifo_named_like_the_exercise_does_not_hang_the_run(world):
    world.honest_folder()
    fifo = world.subs / "mallory" / EX
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    taken = world.collect()
    path, notes = found(taken)["mallory"]
    assert path is None and notes == [f"Left out {EX} (not a regular file)."]
    assert "not a regular file" in graded_source(fifo).problem  # O_NONBLOCK: no hang
    assert_honest(taken)


def canvas_zip(path: Path, entries: dict[str, bytes], links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(zipfile.ZipInfo(name, (2026, 8, 30, 10, 0, 0)), data)
        for name in links:
            info = zipfile.ZipInfo(name, (2026, 8, 30, 10, 0, 0))
            info.external_attr = 0o120777 << 16
            z.writestr(info, str(Path("/etc/shadow")))
    return path


def test_one_oversized_entry_skips_that_entry_not_the_class_archive(world):
    """One student's 257 MiB file refused the whole archive, and nobody was graded."""
    archive = canvas_zip(world.root / "subs.zip", {
        "honest_4001_1_13_moe.py": HONEST.encode()})
    with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo("mallory_4002_2_13_moe.py", (2026, 8, 30, 10, 0, 0))
        with z.open(info, "w", force_zip64=True) as out:
            block = b"#" * (1 << 20)
            for _ in range(257):
                out.write(block)
    taken = world.collect(archive)
    assert_honest(taken, "4001")
    path, notes = found(taken)["4002"]
    assert path is None
    assert notes == [f"Left out mallory_4002_2_13_moe.py ({intake.TOO_LARGE})."]
    assert f"4002: {notes[0]}" in taken.skipped
    assert world.unchanged()


def test_skipped_archive_entries_are_named_for_the_student_and_the_run(world):
    """Traversal, absolute and link entries were dropped without telling anyone."""
    archive = canvas_zip(world.root / "subs.zip", {
        "honest_4001_1_13_moe.py": HONEST.encode(),
        "../mallory_4002_2_13_moe.py": b"slip\n",
        "/abs/mallory_4002_3_13_moe.py": b"abs\n",
        "../../loose.py": b"anyone's\n",
    }, links=("mallory_4002_4_13_moe.py",))
    taken = world.collect(archive)
    path, notes = found(taken)["4002"]
    assert path is None and sorted(notes) == sorted([
        f"Left out ../mallory_4002_2_13_moe.py, /abs/mallory_4002_3_13_moe.py "
        f"({intake.ESCAPES}).",
        f"Left out mallory_4002_4_13_moe.py ({intake.LINK})."])
    assert {f"4002: {n}" for n in notes} | {
        f"Left out subs.zip: ../../loose.py ({intake.ESCAPES})."} == set(taken.skipped)
    assert_honest(taken, "4001")
    assert world.unchanged()


# Item 4: notebooks read with nbformat -------------------------------------------------

BROKEN_NOTEBOOKS = {
    "source null": (notebook_text(None), "None is not valid"),
    "source 5": (notebook_text(5), "5 is not valid"),
    "source [text, 1]": (notebook_text(["x = 1\n", 1]), "is not valid"),
    "a lone surrogate": (notebook_text("s = '\udc80'\n"), "lone surrogate"),
    "JSON 100,000 deep": ('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}", "not JSON"),
}


@pytest.mark.parametrize("case", list(BROKEN_NOTEBOOKS))
def test_broken_notebook_is_that_students_clear_error(world, case):
    """Each of these aborted `grader run` before anyone was graded."""
    text, reason = BROKEN_NOTEBOOKS[case]
    world.honest_folder()
    write(world.subs / "mallory/13_moe.ipynb", text)
    taken = world.collect()
    path, notes = found(taken)["mallory"]
    problem = graded_source(path, notes).problem
    assert path is None and "13_moe.ipynb is not a readable Jupyter notebook: " in problem
    assert reason in problem and problem.startswith("no file could be graded: ")
    problem.encode("utf-8")
    assert any(line.startswith("mallory: 13_moe.ipynb is not a readable") for line in taken.skipped)
    assert_honest(taken)


# Issue 24 item 1: the Gradescope run copies the submission, as root, before intake ----

def gradescope_copy(world: World, build) -> intake.Intake:
    """/autograder/submission made by `build(folder)`, copied as `autograder_zip.run`
    copies it, and collected as `grader run` then collects it."""
    from grader.deliver.autograder_zip import copy_submission

    submission = world.root / "autograder" / "submission"
    submission.mkdir(parents=True)
    build(submission)
    world.honest_folder()
    copy_submission(submission, world.subs / "s1")
    return world.collect()


def root_only(path: Path, text: str) -> Path:
    """A file only its owner may read (root, in the Gradescope run)."""
    write(path, text).chmod(0o600)
    return path


@pytest.mark.parametrize("shape", ["file", "folder", "top"])
def test_gradescope_copy_follows_no_link_to_a_root_only_file(world, shape):
    """On main, `shutil.copytree` followed these links as root: a link to the solution
    scored 10/10 and one to /etc/shadow was graded. Now each link is named, not read,
    whether it is the exercise file, a folder on the way to it, or the whole folder."""
    secret = root_only(world.root / "host/root-only" / EX, "SECRET = 'root only'\n")

    def build(submission: Path) -> None:
        if shape == "file":
            (submission / EX).symlink_to(secret)
        elif shape == "folder":
            (submission / "work").symlink_to(secret.parent)
        else:
            submission.rmdir()
            submission.symlink_to(secret.parent)

    taken = gradescope_copy(world, build)
    path, notes = found(taken)["s1"]
    assert path is None
    named = {"file": EX, "folder": "work", "top": "the folder s1"}[shape]
    assert notes == [f"Left out {named} (links are never followed)."]
    assert f"s1: Left out {named} (links are never followed)." in taken.skipped
    copied = [p for p in (world.subs / "s1").rglob("*")] if shape != "top" else []
    assert all(p.is_symlink() for p in copied), copied
    assert "root only" not in json.dumps(snapshot(world.subs, world.out))
    assert_honest(taken)


def test_gradescope_copy_keeps_files_times_and_names_what_it_cannot_copy(world):
    """Regular files are copied with their times (intake grades the newest); a FIFO and
    a file over intake's size limit reach intake as what they are, and are named."""
    def build(submission: Path) -> None:
        write(submission / "old" / EX, "x = 'old'\n")
        write(submission / EX, "x = 'new'\n")
        os.utime(submission / "old" / EX, (1_000_000, 1_000_000))
        os.mkfifo(submission / "pipe.py")
        with open(submission / "big.py", "wb") as f:
            f.truncate(64 << 20)

    taken = gradescope_copy(world, build)
    path, notes = found(taken)["s1"]
    assert graded_source(path).source == "x = 'new'\n"
    assert os.stat(world.subs / "s1" / "old" / EX).st_mtime == 1_000_000
    assert "s1: Left out pipe.py (not a regular file)." in taken.skipped
    assert os.stat(world.subs / "s1" / "big.py").st_blocks == 0  # sparse: nothing read


@pytest.mark.parametrize("swapped", ["file", "folder"])
def test_a_file_swapped_for_a_link_after_the_walk_is_not_followed(tmp_path, monkeypatch,
                                                                  swapped):
    """The walk saw a plain file (or folder) and chose it; before it is read, someone
    writing in the class's folder puts a link to a file outside in its place. Intake
    reads the chosen file through folders opened one by one without following a link,
    so the link is named and left out, and the outside file is read by no one."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / EX).write_text("SECRET = 'hunter2'\n")
    subs = tmp_path / "subs"
    (subs / "alice" / "src").mkdir(parents=True)
    (subs / "alice" / "src" / EX).write_text("x = 1\n")
    real = intake._choose

    def racing(cands, exercise, due):  # the walk's check is done: now the swap
        best, notes = real(cands, exercise, due)
        if swapped == "file":
            best.path.unlink()
            best.path.symlink_to(outside / EX)
        else:
            best.path.parent.rename(tmp_path / "moved")
            best.path.parent.symlink_to(outside, target_is_directory=True)
        return best, notes

    monkeypatch.setattr(intake, "_choose", racing)
    taken = intake.collect(subs, EX, cache=tmp_path / "cache")
    ((sid, path, notes),) = taken.found
    assert (sid, path) == ("alice", None)
    assert notes == [f"Left out src/{EX} (links are never followed)."]
    assert f"alice: Left out src/{EX} (links are never followed)." in taken.skipped
    copied = [f.read_text() for f in (tmp_path / "cache").rglob("*") if f.is_file()]
    assert not any("hunter2" in text for text in copied)
    monkeypatch.setattr(intake, "_choose", real)  # the control: unswapped, it is read
    (subs / "bob").mkdir()
    (subs / "bob" / EX).write_text("y = 2\n")
    got = {sid: path for sid, path, _ in intake.collect(subs, EX, cache=tmp_path / "c2").found}
    assert got["bob"].read_text() == "y = 2\n"


def test_a_zip_swapped_for_a_link_after_the_listing_is_not_followed(tmp_path, monkeypatch):
    """The same race on a folder of LMS zips: the listing saw a zip, then a link to a
    zip outside took its place. It is named in the run's summary, and not opened."""
    outside = tmp_path / "outside.zip"
    with zipfile.ZipFile(outside, "w") as z:
        z.writestr("mallory_4002_1_13_moe.py", "SECRET = 'hunter2'\n")
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "a.zip", "w") as z:
        z.writestr("ann_4001_1_13_moe.py", HONEST)
    real = intake._lms_zip

    def racing(archive, *args, **kwargs):
        archive.unlink()
        archive.symlink_to(outside)
        return real(archive, *args, **kwargs)

    monkeypatch.setattr(intake, "_lms_zip", racing)
    taken = intake.collect(subs, EX, cache=tmp_path / "cache")
    assert taken.found == [] and taken.skipped == ["Left out a.zip (links are never followed)."]
