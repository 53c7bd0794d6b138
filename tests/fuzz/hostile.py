"""Hostile classes for the fuzz suite: Hypothesis strategies for what students hand in
(folder trees with odd names, links, FIFOs, deep nesting, sparse huge files; Canvas
zips; Gradescope metadata; notebooks), a temp world to build them in, and the checks
every example must pass.

A world is a temp folder holding the class (`subs/`), OUT (`out/`) and a stand-in for
the host (`host/`: a secret and a solution, each with a marker that must never reach a
graded source, a note or the summary). Every class has one honest student.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from hypothesis import strategies as st

from grader.intake import submissions as intake
from grader.judge import runner
from grader.judge.plan import Submission, plan
from grader.store import Store

EX = "13_moe.py"
HONEST = "def honest():\n    return 'the honest one'\n"
SECRET = "root:SECRET-MARKER-51c0de:19000:0:99999:7:::\n"
SOLUTION = "SOLUTION-MARKER-7f3a = 'the reference'\n"
MARKERS = ("SECRET-MARKER-51c0de", "SOLUTION-MARKER-7f3a")
HONEST_UID = "4001"

# Small caps, so that every example can cross them cheaply (the real caps are crossed
# by tests/adversarial/test_intake_attacks.py).
CAPS = {"MAX_DEPTH": 5, "MAX_ENTRIES": 60, "MAX_FILE": 64 * 1024, "MAX_UNZIPPED": 160 * 1024}
OUT_CAP = 4 * 1024 * 1024  # OUT/intake after one example: unpacked entries, notebooks

SPECIAL_NAMES = [b"13_moe.py", b"13_moe.ipynb", b"13_moe (2).py", b"13_moe-1.py", b"moe.py",
                 b"__MACOSX", b".hidden", b"\xff\xfe.py", b"caf\xe9", b"\x1b[2Jx.py", b"\n.py",
                 b"-rf", b"=HYPERLINK(1)", "名前.py".encode(), b"x" * 255, b"..."]


def _safe_component(raw: bytes) -> bytes:
    raw = raw.replace(b"/", b"_").replace(b"\0", b"_")[:255]
    return raw if raw not in (b"", b".", b"..") else b"_" + raw


names = st.one_of(st.sampled_from(SPECIAL_NAMES), st.binary(min_size=1, max_size=24)) \
    .map(_safe_component)
student_names = names.filter(lambda n: n != b"honest")

LINK_TARGETS = ["solution", "secret", "/", "host", "honest", ".", "..", "dangling", "self"]

MAGIC_LINES = ["%matplotlib inline", "!pip install torch", "files = !ls", "%%bash",
               "%%time", "%time y = 1", "%%writefile x.py"]
PYTHON_LINES = ["import math", "x = 1", "def f(a):", "    return a", "class A:", "    pass",
                "y = [i for i in range(3)]", "s = '名前'"]

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                      st.floats(allow_nan=False, allow_infinity=False))
json_value = st.recursive(json_leaf, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)), max_leaves=8)
cell_source = st.one_of(
    st.lists(st.sampled_from(PYTHON_LINES + MAGIC_LINES), max_size=5).map("\n".join),
    st.lists(st.sampled_from(PYTHON_LINES + MAGIC_LINES).map(lambda s: s + "\n"), max_size=4),
    st.text(max_size=60), json_value, st.just("s = '\udc80'\n"), st.just(["x = 1\n", 1]))
cells = st.fixed_dictionaries(
    {"cell_type": st.sampled_from(["code", "code", "markdown", "raw", "other"]),
     "metadata": st.one_of(st.just({}), json_value), "source": cell_source},
    optional={"outputs": st.one_of(st.just([]), json_value),
              "execution_count": st.one_of(st.none(), st.integers(0, 9)),
              "id": st.text(max_size=10)})
notebook_objects = st.fixed_dictionaries(
    {"nbformat": st.sampled_from([4, 4, 4, 3, 5, "4", None]),
     "nbformat_minor": st.sampled_from([0, 4, 5, 99]),
     "metadata": st.one_of(st.just({}), json_value),
     "cells": st.lists(cells, max_size=4)})
notebook_texts = st.one_of(
    notebook_objects.map(json.dumps),
    st.integers(1, 30_000).map(lambda n: '{"cells": ' + "[" * n + "]" * n + "}"),
    st.sampled_from(['5', '[]', 'null', '"text"', '{not json', '\ufeff{}']),
    st.text(max_size=80))

leaves = st.one_of(
    st.tuples(st.just("file"), st.one_of(st.just(b"x = 1\n"), st.binary(max_size=120))),
    st.tuples(st.just("notebook"), notebook_texts),
    st.tuples(st.just("huge"), st.integers(CAPS["MAX_FILE"] + 1, 3 << 30)),
    st.tuples(st.just("link"), st.sampled_from(LINK_TARGETS)),
    st.tuples(st.just("fifo"), st.none()),
    st.tuples(st.just("deep"), st.integers(1, 3 * CAPS["MAX_DEPTH"])),
)
trees = st.recursive(leaves, lambda children: st.tuples(
    st.just("dir"), st.dictionaries(names, children, max_size=4)), max_leaves=10)
student_folders = st.dictionaries(names, trees, max_size=5)
classes = st.dictionaries(student_names, st.one_of(
    student_folders.map(lambda tree: ("dir", tree)),
    st.tuples(st.just("link"), st.sampled_from(LINK_TARGETS))), max_size=5)


class World:
    """A temp folder with the class, OUT and a stand-in host; removed by `close`."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="grader-fuzz-"))
        self.subs, self.out = self.root / "subs", self.root / "out"
        self.secret = write(self.root / "host/etc/shadow", SECRET.encode())
        self.solution = write(self.root / "host/solutions" / EX, SOLUTION.encode())
        self.subs.mkdir()
        self.before: dict[str, str] = {}

    def close(self) -> None:
        shutil.rmtree(self.root)

    def target(self, key: str, here: bytes) -> bytes:
        return {"solution": bytes(self.solution), "secret": bytes(self.secret), "/": b"/",
                "host": bytes(self.root / "host"), "honest": bytes(self.subs / "honest" / EX),
                ".": b".", "..": b"..", "dangling": b"nowhere/at/all",
                "self": os.path.basename(here)}[key]

    def build(self, at: bytes, node: tuple) -> None:
        """Make `node` at path `at` (bytes: names need not be UTF-8)."""
        kind, arg = node
        if kind == "dir":
            os.mkdir(at)
            for name, child in arg.items():
                self.build(at + b"/" + name, child)
        elif kind == "file":
            Path(os.fsdecode(at)).write_bytes(arg)
        elif kind == "notebook":
            Path(os.fsdecode(at)).write_bytes(arg.encode("utf-8", "surrogatepass"))
        elif kind == "huge":
            with open(at, "wb") as f:
                f.truncate(arg)
        elif kind == "link":
            os.symlink(self.target(arg, at), at)
        elif kind == "fifo":
            os.mkfifo(at)
        elif kind == "deep":
            chain = at + b"/d" * arg
            os.makedirs(chain)
            write(Path(os.fsdecode(chain)) / EX, b"deep = 1\n")

    def honest_folder(self) -> None:
        write(self.subs / "honest" / EX, HONEST.encode())

    def freeze(self) -> None:
        self.before = snapshot(self.root, self.out)

    def collect(self, source: Path | None = None) -> intake.Intake:
        self.freeze()
        return intake.collect(source or self.subs, EX, cache=self.out / "intake")


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def snapshot(root: Path, skip: Path) -> dict[str, str]:
    """Every path under `root` but `skip` (OUT) and what it is; links listed, not followed."""
    seen, todo = {}, [str(root)]
    while todo:
        with os.scandir(todo.pop()) as it:
            for e in it:
                if e.path == str(skip):
                    continue
                st_ = e.stat(follow_symlinks=False)
                if e.is_symlink():
                    seen[e.path] = "-> " + os.readlink(e.path)
                elif e.is_dir(follow_symlinks=False):
                    seen[e.path] = "dir"
                    todo.append(e.path)
                elif e.is_file(follow_symlinks=False) and st_.st_size < 1 << 20:
                    seen[e.path] = hashlib.sha256(Path(e.path).read_bytes()).hexdigest()
                else:
                    seen[e.path] = f"{st_.st_mode:o} {st_.st_size}"
    return seen


def size_of(folder: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size
               for d, _, files in os.walk(folder) for f in files)


def canvas_zip(path: Path, entries: list[tuple[str, str, bytes]]) -> Path:
    """A zip of (name, kind, data): kind "file", "link" (a symlink entry), "dir", or
    "big" (one byte over the per-entry cap, whatever `data`)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, kind, data in entries:
            info = zipfile.ZipInfo(name + ("/" if kind == "dir" else ""), (2026, 8, 30, 10, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            if kind == "link":
                info.external_attr = 0o120777 << 16
            data = b"0" * (intake.MAX_FILE + 1) if kind == "big" else data
            z.writestr(info, b"" if kind == "dir" else data)
    return path


def check(world: World, taken: intake.Intake, honest: str | None) -> None:
    """The invariant: the honest student is collected with her own file; nothing outside
    OUT changed; no path a link leads to was collected; no marker of the host reached a
    source, a note or the summary; planning and reading never raise; OUT stays small."""
    assert snapshot(world.root, world.out) == world.before, "intake wrote outside OUT"
    assert size_of(world.out) < OUT_CAP
    ids = [sid for sid, _, _ in taken.found]
    assert len(ids) == len(set(ids)), "two students share an id"
    subs = [Submission(sid, path, notes=notes) for sid, path, notes in taken.found]
    for sub in subs:
        sub.student_id.encode("utf-8")
        for note in sub.notes:
            note.encode("utf-8")
        if sub.path is not None:
            assert_reached_without_links(world, sub.path)
    plan(Store(world.out), subs, "fuzz", force=False)
    texts = list(taken.skipped)
    for sub in subs:
        sub = runner.read(sub)
        assert sub.source is not None or sub.problem
        texts += [sub.source or "", sub.problem, *sub.notes]
    assert not [t for t in texts for m in MARKERS if m in t], "the host leaked"
    if honest is not None:
        got = {sub.student_id: sub for sub in subs}
        assert honest in got, f"the honest student is missing: {ids}"
        assert runner.read(Submission(honest, got[honest].path)).source == HONEST


def assert_reached_without_links(world: World, path: Path) -> None:
    """Collected files are regular files under the class, reached through no link,
    or files intake itself wrote under OUT/intake."""
    where = world.out / "intake" if world.out / "intake" in path.parents else world.subs
    assert where in path.parents, f"{path} is outside the class and OUT"
    assert os.path.realpath(path) == str(path), f"{path} is reached through a link"
