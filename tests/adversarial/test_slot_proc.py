"""Nothing a child writes of its slot outlives it, whatever the kernel.

A slot is pid 1 of its children's pid namespace. Rootless, a child is the slot's own
uid outside, so on a kernel without Landlock it could write the slot's
/proc/1/oom_score_adj (1000: the OOM killer's first pick for the rest of the run) and
its autogroup's nice (19), and the next student in that slot read both back. The
attacker tries both; the next student reads what it can of the slot. Older kernels are
tried on this one by capping the run's Landlock ABI (GRADER_LANDLOCK_ABI)."""
from __future__ import annotations

import json
import re

import pytest

import modes
from conftest import SOLUTION, failed_messages, hostile

WRITE = '''
import json as _j
_done = {}
for _path, _text in (("/proc/1/oom_score_adj", "1000"), ("/proc/1/autogroup", "19")):
    try:
        with open(_path, "w") as _f:
            _f.write(_text)
        _done[_path] = "written"
    except OSError as _e:
        _done[_path] = type(_e).__name__
raise RuntimeError("WROTE " + _j.dumps(_done) + " END")
'''
READ = '''
import json as _j
_seen = {}
for _path in ("/proc/1/oom_score_adj", "/proc/1/autogroup", "/proc/1/cmdline"):
    try:
        with open(_path, "rb") as _f:
            _seen[_path] = _f.read().decode(errors="replace").replace("\\0", " ").strip()
    except OSError as _e:
        _seen[_path] = type(_e).__name__
raise RuntimeError("SEEN " + _j.dumps(_seen) + " END")
'''


def _said(record: dict, word: str) -> dict:
    """What the attack's code reported in its first failed test."""
    for message in failed_messages(record, "router"):
        if found := re.search(word + r" (\{.*?\}) END", message):
            return json.loads(found.group(1))
    raise AssertionError(f"no {word} in {failed_messages(record)[:2]}")


@pytest.mark.parametrize(("mode", "abi"), modes.SLOT_CASES)
def test_a_child_leaves_nothing_in_its_slot(mode, abi):
    records, said = modes.grade_once(mode, abi, {"a-writer": hostile(route=WRITE),
                                                 "b-reader": hostile(route=READ),
                                                 "c-honest": SOLUTION.read_text()})
    wrote, seen = (_said(records[sid], word) for sid, word in (("a-writer", "WROTE"),
                                                                ("b-reader", "SEEN")))
    print(f"\n{mode}/{abi}: wrote {wrote}, then seen {seen}")
    assert "written" not in wrote.values(), (wrote, said)
    # the next student sees no slot at all, or one as it was
    oom = seen["/proc/1/oom_score_adj"]
    assert oom in ("FileNotFoundError", "PermissionError") or int(oom) < 1000, seen
    group = seen["/proc/1/autogroup"]
    assert not re.search(r"nice 19", group), seen
    assert records["c-honest"]["score"] == 10.0, records["c-honest"]["problem"]
