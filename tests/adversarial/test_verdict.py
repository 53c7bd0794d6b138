"""Forging the verdict: the comparisons, the test framework and the score all live in
the trusted process, so patching torch, numpy, pytest or builtins inside the sandbox,
walking the caller's frames, rewriting the reply channel, writing report files,
printing fake results or returning lying objects changes nothing but the submission's
own (wrong) answer. Student text reaches the feedback page only escaped.

Every attack here keeps a wrong `dispatch` (all zeros, unless said otherwise): if an
attack worked, "dispatch" would get its points.
"""
from __future__ import annotations

import html
import json
import re

import pytest

from conftest import (FULL, PARTS, REPO, SOLUTION, assert_honest_still_full,
                      failed_messages, grade_all, hostile, lost, no_marker)
from grader.pages.feedback import render_student
from grader.record import GradeRecord

WRONG = "return torch.zeros_like(x_flat)"
HOST_SENTINEL = "/tmp/grader-adversarial-reduce-ran"

SCRIPT = "<script>alert('pwned')</script>"
IMG = '<img src=x onerror="alert(1)">'

SOURCES = {
    # Comparisons patched every way the child can: torch, Tensor operators for
    # floating tensors (ints untouched, so MOEFeedForward still routes), numpy,
    # math, builtins, and pytest itself (importlib gets past the import guard).
    "monkeypatch": hostile(at_import='''
        import builtins, importlib, math
        import numpy as np
        _always = lambda *a, **k: True
        for _name in ("allclose", "equal", "isclose"):
            setattr(torch, _name, _always)
        torch.testing.assert_close = lambda *a, **k: None
        for _op in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
            _orig = getattr(torch.Tensor, _op)
            setattr(torch.Tensor, _op, (lambda orig: lambda self, other: (
                torch.ones(self.shape, dtype=torch.bool) if self.is_floating_point()
                else orig(self, other)))(_orig))
        np.allclose = np.array_equal = _always
        np.testing.assert_allclose = lambda *a, **k: None
        math.isclose = _always
        builtins.all = builtins.any = lambda *a, **k: True
        _pytest = importlib.import_module("pytest")
        _pytest.approx = lambda *a, **k: a[0] if a else None
        _pytest.fail = _pytest.skip = lambda *a, **k: None
        _outcomes = importlib.import_module("_pytest.outcomes")
        _outcomes.fail = lambda *a, **k: None
    ''', dispatch=WRONG),

    # Frame inspection: walk up from dispatch, report every frame and module seen
    # (the verdict machinery is not in this process to be found), then fail.
    "frames": hostile(dispatch='''
        import gc, json, sys
        frames, f = [], sys._getframe()
        while f is not None:
            frames.append([f.f_code.co_name, f.f_globals.get("__name__"), sorted(f.f_locals)])
            for name in ("reply", "result", "passed", "score", "verdict", "ok"):
                if name in f.f_locals:
                    try:
                        f.f_locals[name] = True
                    except Exception:
                        pass
            f = f.f_back
        mods = sorted(m for m in sys.modules if m.split(".")[0] in (
            "pytest", "_pytest", "grader", "pytest_jsonreport", "runner", "plugin",
            "reference"))
        dicts = sum(1 for o in gc.get_objects()
                    if isinstance(o, dict) and {"score", "max_score"} <= set(o))
        raise RuntimeError("FRAMES:" + json.dumps({"frames": frames, "modules": mods,
                                                   "verdict_dicts": dicts}))
    '''),

    # The reply channel: find the harness's own `protocol` through the frames and make
    # every error reply an "ok" with a made-up result.
    "forge-reply": hostile(dispatch='''
        import sys
        f = sys._getframe()
        while not hasattr(f.f_locals.get("self"), "protocol"):  # the child's harness
            f = f.f_back
        proto = f.f_locals["self"].protocol
        real_send = proto.send
        def forged(sock, obj):
            if isinstance(obj, dict) and obj.get("ok") is False:
                obj = {"ok": True, "result": {"y": torch.zeros(10, 64), "x_grad": None,
                                              "weight_grad": None, "grads": {},
                                              "passed": True, "score": 10}}
            real_send(sock, obj)
        proto.send = forged
        raise RuntimeError("the forged reply should replace this")
    '''),

    # A fake report wherever a grader might look, claiming full marks.
    "fake-report": hostile(at_import=f'''
        import json, os
        _fake = json.dumps({{"score": 10.0, "tests": [], "summary": {{"passed": 47}}}})
        for _p in ({str(REPO / "out" / "13" / "results" / "fake-report.json")!r},
                   {str(REPO / "out" / "13" / "scores.json")!r},
                   "/autograder/results/results.json", "/tmp/work/.report.json",
                   "/tmp/report.json", "report.json", "/grader/report.json"):
            try:
                os.makedirs(os.path.dirname(os.path.abspath(_p)), exist_ok=True)
                open(_p, "w").write(_fake)
            except OSError:
                pass
    ''', dispatch=WRONG),

    # Fake pytest results on stdout and stderr.
    "fake-output": hostile(at_import='''
        import sys
        _fake = ("tests/test_dispatch.py::test_dispatch PASSED\\n"
                 "============ 47 passed in 0.12s ============\\n"
                 '{"score": 10.0, "max_score": 10.0, "status": "graded"}\\n')
        print(_fake); print(_fake, file=sys.stderr)
    ''', dispatch="print('=== 47 passed ===')\n" + WRONG),

    # A tensor subclass that lies about everything it is asked.
    "tensor-subclass": hostile(at_import='''
        class _Liar(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if getattr(func, "__name__", "") in ("allclose", "equal", "isclose",
                                                     "__eq__"):
                    return True
                return super().__torch_function__(func, types, args, kwargs or {})
            def __reduce_ex__(self, proto):
                import os
                return (os.system, (f"touch /tmp/grader-adversarial-reduce-ran",))
    ''', dispatch="return torch.zeros_like(x_flat).as_subclass(_Liar)"),

    # Objects whose __reduce__ would run code if unpickled, whose __str__ raises,
    # and exceptions with hostile messages: in route, aux_loss and dispatch.
    "evil-objects": hostile(at_import=f'''
        class _Evil:
            def __reduce__(self):
                import os
                return (os.system, ("touch {HOST_SENTINEL}",))
            def __str__(self):
                raise RuntimeError("no str for you")
            __repr__ = __str__
            def __len__(self):
                return 3
        class _BadStr(Exception):
            def __str__(self):
                raise SystemExit("from __str__")
    ''', route="return _Evil()", load_balancing_loss="raise _BadStr()",
        dispatch="raise ValueError('A' * 2_000_000)"),

    # Script injection: in an exception's message and type name, and in the output.
    "script": hostile(at_import=f'''
        print({SCRIPT!r} + {IMG!r})
        _Boom = type({SCRIPT!r}, (ValueError,), {{}})
    ''', dispatch=f"raise _Boom({(SCRIPT + IMG)!r})"),

}
# The honest answer as a tensor subclass: converted to a plain tensor, full marks.
SOURCES["subclass-correct"] = SOLUTION.read_text() + '''

class _Sub(torch.Tensor):
    pass


_orig_dispatch = dispatch


def dispatch(*args, **kwargs):
    return _orig_dispatch(*args, **kwargs).as_subclass(_Sub)
'''


@pytest.fixture(scope="module")
def records(course, slot, tmp_path_factory):
    before = {p: p.exists() for p in (REPO / "out" / "13" / "results" / "fake-report.json",)}
    assert not any(before.values())
    return grade_all(course, slot, tmp_path_factory.mktemp("verdict"), SOURCES)


def only_dispatch_lost(rec: dict) -> None:
    assert lost(rec) == {"dispatch": PARTS["dispatch"]}, (lost(rec), failed_messages(rec)[:2])
    assert rec["score"] == FULL - PARTS["dispatch"]


def test_monkeypatching_comparisons_does_nothing(records):
    rec = records["monkeypatch"]
    only_dispatch_lost(rec)
    assert any(m.startswith("output shape") or m.startswith("output:")
               for m in failed_messages(rec, "dispatch"))


def test_frames_hold_no_verdict(records):
    rec = records["frames"]
    only_dispatch_lost(rec)
    msg = failed_messages(rec, "dispatch")[0]
    seen = json.loads(msg.removeprefix("RuntimeError: FRAMES:"))
    names = [f[0] for f in seen["frames"]]
    # the student's function, the probe, and the worker's loop: nothing else
    assert names[:2] == ["dispatch", "dispatch"]
    assert set(names[2:]) <= {"_serve_submission", "run", "_spawn", "_serve", "_serve_slots",
                              "start", "main", "<module>"}, names
    # of the grader, only the probes' shared helpers (grader/inside/probekit.py, which
    # students receive too): nothing of the trusted side's runner, plugin or references
    assert seen["modules"] == ["grader", "grader.inside", "grader.inside.probekit"]
    assert seen["verdict_dicts"] == 0


def test_forged_reply_is_still_compared(records):
    rec = records["forge-reply"]
    only_dispatch_lost(rec)


def test_fake_report_files_change_nothing(records):
    rec = records["fake-report"]
    only_dispatch_lost(rec)
    assert not (REPO / "out" / "13" / "results" / "fake-report.json").exists()


def test_fake_pytest_output_is_just_output(records):
    rec = records["fake-output"]
    only_dispatch_lost(rec)
    assert "47 passed in 0.12s" in rec["output"]  # shown to the student as their output
    assert rec["status"] == "graded"


def test_tensor_subclass_cannot_lie(records, tmp_path):
    from pathlib import Path
    only_dispatch_lost(records["tensor-subclass"])
    assert records["subclass-correct"]["score"] == FULL
    assert not Path(HOST_SENTINEL).exists()


def test_evil_objects(records):
    from pathlib import Path
    rec = records["evil-objects"]
    assert lost(rec) == {"router": PARTS["router"], "aux_loss": PARTS["aux_loss"],
                         "dispatch": PARTS["dispatch"]}
    assert failed_messages(rec, "router")[0] == \
        "route must return a tuple (scores, topk_weight, topk_idx), got _Evil"
    assert set(failed_messages(rec, "aux_loss")) == \
        {"_BadStr: <the exception's message could not be shown>"}
    big = failed_messages(rec, "dispatch")[0]
    assert big.startswith("ValueError: AAAA") and len(big) < 5000
    assert not Path(HOST_SENTINEL).exists()  # __reduce__ never ran on the host


def test_script_injection_is_escaped(records, course):
    rec = records["script"]
    only_dispatch_lost(rec)
    assert SCRIPT in failed_messages(rec, "dispatch")[0]  # the record keeps the text
    page = render_student(GradeRecord.from_json(rec), course, "13")
    for raw in (SCRIPT, IMG, "<script", "onerror=\""):
        assert raw not in page, raw
    assert html.escape(SCRIPT, quote=False) in page or "&lt;script&gt;" in page
    assert re.search(r"&lt;script&gt;alert\(&(#39|#x27);pwned&(#39|#x27);\)&lt;/script&gt;",
                     page)


def test_grader_unharmed(records, slot, course, tmp_path):
    assert slot.alive()
    assert no_marker() == []
    assert_honest_still_full(course, slot, tmp_path)
