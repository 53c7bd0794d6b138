"""Fuzz intake and planning with generated hostile classes (issue 11, item 6).

Every example is a class with one honest student and generated classmates: folder
trees with odd names, links, FIFOs, deep nesting and sparse huge files; Canvas zips;
Gradescope exports; notebooks. The invariant (`hostile.check`) holds on each.

Examples per test: GRADER_FUZZ_EXAMPLES (default 40, CI's share); set it higher
for a longer local run, e.g. `GRADER_FUZZ_EXAMPLES=2000 pytest tests/fuzz`.
"""
from __future__ import annotations

import datetime as dt
import os
import warnings
from unittest import mock

import nbformat
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.intake import submissions as intake
from tests.fuzz import hostile
from tests.fuzz.hostile import EX, HONEST, HONEST_UID, World

EXAMPLES = int(os.environ.get("GRADER_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def run_in_world(build, source=None, honest: str | None = "honest", then=None) -> None:
    """Build a class with `build(world)`, collect it under the small caps, check the
    invariant, then `then(found)` ({id: (path, notes)}) before the world goes."""
    world = World()
    try:
        with mock.patch.multiple(intake, **hostile.CAPS):
            build(world)
            taken = world.collect(source(world) if source else None)
            hostile.check(world, taken, honest)
        if then is not None:
            then({sid: (path, notes) for sid, path, notes in taken.found})
    finally:
        world.close()


@FUZZ
@given(classmates=hostile.classes)
def test_folder_class(classmates):
    def build(world: World) -> None:
        world.honest_folder()
        for name, node in classmates.items():
            world.build(bytes(world.subs) + b"/" + name, node)
    run_in_world(build)


# Canvas: names as Canvas writes them (login, _late, user id, submission id, the
# student's own file name), and entries a hostile archive may hold.
originals = st.one_of(
    st.sampled_from(["13_moe.py", "13_moe.ipynb", "13_moe-1.py", "readme.txt", "a.py"]),
    hostile.names.map(lambda b: b.decode("utf-8", "replace")))
canvas_names = st.builds(
    lambda prefix, login, late, uid, subid, original:
        f"{prefix}{login}{'_late' if late else ''}_{uid}_{subid}_{original}",
    st.sampled_from(["", "", "../", "../../", "/abs/", "sub/", "..\\", "C:/"]),
    st.sampled_from(["mallory", "eve", "名前"]), st.booleans(),
    st.integers(4002, 4006), st.integers(1, 99), originals)
zip_entries = st.lists(st.tuples(
    st.one_of(canvas_names, st.text(min_size=1, max_size=20)),
    st.sampled_from(["file", "file", "file", "link", "dir", "big"]),
    st.one_of(st.binary(max_size=64), st.just(b"x = 1\n"),
              hostile.notebook_texts.map(lambda t: t.encode("utf-8", "surrogatepass")))),
    max_size=8)


@FUZZ
@given(entries=zip_entries, honest_at=st.integers(0, 8), direct=st.booleans(),
       more_zips=st.integers(0, 2))
def test_canvas_zip_class(entries, honest_at, direct, more_zips):
    honest = (f"honest_{HONEST_UID}_1_{EX}", "file", HONEST.encode())
    entries = entries[:honest_at] + [honest] + entries[honest_at:]

    def build(world: World) -> None:
        hostile.canvas_zip(world.root / "class.zip" if direct else world.subs / "class.zip",
                           entries)
        for i in range(more_zips):
            hostile.canvas_zip(world.subs / f"more{i}.zip", entries[::-1])

    source = (lambda world: world.root / "class.zip") if direct else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of duplicate names: meant here
        run_in_world(build, source, HONEST_UID)


# Gradescope: the metadata's strings are the students' (names, sids, emails), and
# a hostile one may be a path, hold a lone surrogate, or not be a string at all.
odd_strings = st.one_of(
    st.sampled_from(["../../../subs/submission_1", "/", "..", ".", "", "a/b", "\udc80x",
                     "=HYPERLINK(1)", "\x1b[2J", "x" * 500]),
    st.text(max_size=20))
sids = st.one_of(odd_strings, st.integers(), hostile.json_value).filter(lambda s: s != "honest")
submitters = st.one_of(
    st.lists(st.fixed_dictionaries({}, optional={
        ":sid": sids, ":email": sids, ":name": odd_strings}), min_size=1, max_size=3),
    hostile.json_value)
created = st.one_of(st.datetimes(timezones=st.just(dt.timezone.utc)), hostile.json_value)
infos = st.one_of(st.fixed_dictionaries({":submitters": submitters},
                                        optional={":created_at": created}), hostile.json_value)
folders = st.one_of(st.sampled_from(["submission_2", "submission_3", "../subs", "/", "..",
                                     ".", "", "a/b", "submission_1/.."]), st.text(max_size=12))


@FUZZ
@given(meta=st.dictionaries(folders, infos, max_size=4), trees=st.lists(
    hostile.student_folders, max_size=3), absolute=st.booleans())
def test_gradescope_class(meta, trees, absolute):
    meta = {k: v for k, v in meta.items() if k != "submission_1"}

    def build(world: World) -> None:
        if absolute:  # a folder key that is an absolute path into the host
            meta[str(world.root / "host")] = {":submitters": [{":sid": "abs"}]}
        meta["submission_1"] = {":submitters": [{":sid": "honest"}]}
        text = yaml.safe_dump(meta, allow_unicode=False)
        hostile.write(world.subs / intake.METADATA, text.encode())
        hostile.write(world.subs / "submission_1" / EX, HONEST.encode())
        plain = [k for k in meta if "/" not in k and "\0" not in k
                 and k not in ("", ".", "..", "submission_1")]
        for key, tree in zip(plain, trees):
            world.build(bytes(world.subs / key), ("dir", tree))

    run_in_world(build)


@FUZZ
@given(data=st.binary(max_size=200))
def test_unreadable_gradescope_metadata_never_raises(data):
    def build(world: World) -> None:
        hostile.write(world.subs / intake.METADATA, data)
        world.honest_folder()

    run_in_world(build, honest=None)


@FUZZ
@given(text=hostile.notebook_texts)
def test_any_notebook_is_converted_or_a_clear_error(text):
    def build(world: World) -> None:
        world.honest_folder()
        hostile.write(world.subs / "mallory/13_moe.ipynb", text.encode("utf-8", "surrogatepass"))

    def then(found: dict) -> None:
        path, notes = found["mallory"]
        if path is None:
            assert notes[0].startswith("13_moe.ipynb is not a readable Jupyter notebook: ")
        else:
            path.read_text(encoding="utf-8")

    run_in_world(build, then=then)


code_lines = st.lists(st.sampled_from(
    ["import math", "x = 1", "y = [i for i in range(3)]", "s = '名前'", "%matplotlib inline",
     "!pip install torch", "files = !ls", "%time z = 2", "w = %env"]), min_size=1, max_size=5)


@FUZZ
@given(cells=st.lists(code_lines, min_size=1, max_size=4))
def test_valid_notebook_keeps_python_and_leaves_out_magics(cells):
    """A notebook Jupyter wrote converts as before nbformat: every Python line kept,
    every magic or shell line left out (and named), and the result compiles."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("\n".join(lines))
                                         for lines in cells])

    def build(world: World) -> None:
        world.honest_folder()
        hostile.write(world.subs / "mallory/13_moe.ipynb", nbformat.writes(nb).encode())

    lines = [ln for cell in cells for ln in cell]
    python = [ln for ln in lines if not ln.lstrip().startswith(("%", "!")) and "= !" not in ln
              and "= %" not in ln]

    def then(found: dict) -> None:
        path, notes = found["mallory"]
        code = path.read_text(encoding="utf-8")
        compile(code, EX, "exec")
        assert all(ln in code.splitlines() for ln in python)
        left_out = [n for n in notes if "IPython magic or shell" in n]
        assert len(left_out) == (len(python) < len(lines)), notes

    run_in_world(build, then=then)
