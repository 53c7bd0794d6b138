"""The feedback pages in a real browser: headless Chromium loads them with no console
errors (no CSP violation, no blocked load, no script) and a screenshot is kept.

Chromium is driven over `--remote-debugging-pipe` (the DevTools protocol on fds 3/4),
which reports console and log entries with their level and takes full-page shots.
Screenshots go to $TEST_ARTIFACTS (default: the test's tmp dir).
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from grader import config
from grader.pages import feedback, report
from grader.run import similarity
from grader.record import Diagnosis, GradeRecord
from grader.text.shown import NON_FINITE
from grader.judge.tally import Tally

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_TIMEOUT_S = 300  # far above a loaded machine (20 s failed at load 7): a hung browser fails, a slow one not
HOSTILE = "<script>console.error('pwned')</script><img src=x onerror=alert(1)>"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason="headless Chromium (Debian package `chromium`) "
                                       "is not installed at /usr/bin/chromium")


class Browser:
    """One Chromium process talking the DevTools protocol over a pair of pipes."""

    def __init__(self, profile: Path):
        to_chrome_r, self._out = os.pipe()
        self._in, from_chrome_w = os.pipe()

        def wire_fds() -> None:  # Chromium reads commands on fd 3, answers on fd 4
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)  # dup2 onto itself would keep close-on-exec
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "--hide-scrollbars", "--window-size=1100,900"],
            preexec_fn=wire_fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.deadline = time.monotonic() + BROWSER_TIMEOUT_S
        self.events: list[dict] = []
        self._buf, self._next_id = b"", 0

    def send(self, method: str, session: str | None = None, **params) -> dict:
        """Send one command and wait for its answer, keeping the events seen meanwhile."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        while True:
            event = self._read()
            self.events.append(event)
            if event.get("method") == method:
                return event

    def _read(self) -> dict:
        while b"\0" not in self._buf:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(f"Chromium gave no answer within {BROWSER_TIMEOUT_S} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium exited")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)


def load_and_shoot(html_file: Path, png: Path, profile: Path) -> list[str]:
    """Open the file, save a full-page PNG, return every console or log problem seen."""
    browser = Browser(profile)
    try:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session)
        browser.send("Page.navigate", session, url=html_file.as_uri())
        browser.wait_for("Page.loadEventFired")
        size = browser.send("Page.getLayoutMetrics", session)["cssContentSize"]
        shot = browser.send("Page.captureScreenshot", session, format="png",
                            captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": size["width"],
                                  "height": size["height"], "scale": 1})
        png.write_bytes(base64.b64decode(shot["data"]))
        browser.send("Runtime.evaluate", session, expression="1")  # flush pending events
    finally:
        browser.close()
    return _problems(browser.events)


def _problems(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled":
            out.append(f"console.{p.get('type')}: {p.get('args')}")
        elif e.get("method") == "Runtime.exceptionThrown":
            out.append(f"exception: {p.get('exceptionDetails')}")
        elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            out.append(f"{p['entry']['source']} {p['entry']['level']}: {p['entry']['text']}")
    return out


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("TEST_ARTIFACTS") or tmp_path / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def course() -> config.Course:
    return config.load(ROOT / "course.yml")


def _failing_record(course: config.Course, student_id: str) -> GradeRecord:
    """A realistic graded record: a diagnosed router bug, an FFN mismatch, a crash."""
    lesson = course.lesson("13")
    tests, parts = [], {}
    for part in lesson.parts:
        tests += [{"name": f"test_{part}[float32-{i}]", "part": part, "outcome": "passed",
                   "score": 0.5, "max_score": 0.5, "message": "", "error": None,
                   "diagnosis": None, "duration_s": 0.02,
                   "checks": [{"name": "output", "passed": True, "max_abs_diff": 2e-7}]}
                  for i in range(3)]
    heat = [[(1e-6 if (i + j) % 5 else 0.0) + (0.02 * (j % 8) / 8 if i % 4 == 1 else 0.0)
             for j in range(32)] for i in range(16)]
    heat[3][7] = NON_FINITE
    tests += [
        {"name": "test_route[2-True-float32-1]", "part": "router", "outcome": "failed",
         "score": 0.0, "max_score": 0.5, "message": "topk_weight: differs", "error": None,
         "duration_s": 0.03,
         "diagnosis": {"id": "no_renorm",
                       "title": {"en": "top-k weights are not renormalised",
                                 "zh": "top-k 权重没有重新归一化"},
                       "hint": {"en": "With norm_topk_prob the K weights of a token must sum "
                                      "to 1: see section 1.5 (#l13-principle) " + HOSTILE,
                                "zh": "norm_topk_prob 为 True 时每个 token 的 K 个权重之和为 1："
                                      "见 1.5 节（#l13-principle）"}},
         "checks": [{"name": "scores", "passed": True, "max_abs_diff": 1e-8},
                    {"name": "topk_weight", "passed": False, "message": "differs by 0.412 "
                     "(allowed 1e-05 + 0.0001·|ref|) " + HOSTILE,
                     "max_abs_diff": 0.41234, "max_rel_diff": 0.7012, "atol": 1e-5, "rtol": 1e-4,
                     "where": [5, 1], "got_value": 0.2988, "ref_value": 0.7101,
                     "got_shape": [16, 2], "ref_shape": [16, 2], "got_dtype": "float32",
                     "ref_dtype": "float32", "heatmap": [[0.41, 0.41], [0.2, 0.2], [0.0, 0.3]]}]},
        {"name": "test_output[float32-0]", "part": "ffn", "outcome": "failed", "score": 0.0,
         "max_score": 0.5, "message": "output: differs", "error": None, "duration_s": 0.04,
         "diagnosis": {"id": None},
         "checks": [{"name": "output", "passed": False, "message": "differs by 0.02",
                     "max_abs_diff": 0.0199, "max_rel_diff": 12.5, "atol": 1e-5, "rtol": 1e-4,
                     "where": [1, 5, 23], "got_value": -0.1134, "ref_value": -0.0935,
                     "got_shape": [2, 8, 64], "ref_shape": [2, 8, 64], "got_dtype": "float32",
                     "ref_dtype": "float32", "heatmap": heat}]},
    ]
    crash = {"kind": "exception", "message": "IndexError: index 4 is out of bounds " + HOSTILE,
             "traceback": 'Traceback (most recent call last):\n  File "13_moe.py", line 58, '
                          "in dispatch\n    y[idx] += expert(x[idx])\nIndexError: index 4 is "
                          "out of bounds " + HOSTILE, "type": "IndexError"}
    tests += [{"name": f"test_dispatch_k2[{i}]", "part": "dispatch", "outcome": "failed",
               "score": 0.0, "max_score": 0.5, "message": crash["message"], "error": crash,
               "diagnosis": None, "duration_s": 0.01, "checks": []} for i in range(3)]
    for part in lesson.parts:
        own = [t for t in tests if t["part"] == part]
        parts[part] = {"score": sum(t["score"] for t in own), "tests": len(own),
                       "max_score": lesson.parts[part].points,
                       "passed": sum(t["outcome"] == "passed" for t in own)}
    return GradeRecord.from_json({
        "student_id": student_id, "lesson": "13", "sandboxed": False,
        "score": sum(p["score"] for p in parts.values()),
        "max_score": lesson.max_score, "status": "graded", "problem": "",
        "import_traceback": "", "timing": {"cpu_s": 3.2, "elapsed_s": 4.5},
        "output": "step 1 \x1b[31mloss\x1b[0m 0.25\n" + HOSTILE + "\n" + "debug line\n" * 5,
        "parts": parts, "tests": tests})


def _class(course: config.Course) -> list[GradeRecord]:
    records = [_failing_record(course, f"student{i:02d}") for i in range(10)]
    scores = [10, 9.5, 8, 7.5, 7.5, 6, 5, 3, 10, 9]
    for i, (r, score) in enumerate(zip(records, scores, strict=True)):
        r.score, r.timing.elapsed_s = score, 3.0 + i * 1.7
    records[1].tests[-5].diagnosis = Diagnosis("gelu", "GELU instead of SiLU", "see 1.2")
    missing = _failing_record(course, HOSTILE)
    missing.status, missing.score, missing.timing.elapsed_s = "import_error", 0.0, 120.0
    missing.problem = "SyntaxError: invalid syntax (13_moe.py, line 3)"
    return records + [missing]


def _check_page(html: str, name: str, tmp_path: Path, artifacts: Path) -> Path:
    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    png = artifacts / f"{name}.png"
    problems = load_and_shoot(page, png, tmp_path / f"profile-{name}")
    assert problems == [], f"{name}: the browser reported {problems}"
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000, f"{name}: no real screenshot"
    return png


@pytest.mark.parametrize("language", ["en", "zh"])
def test_student_page_in_chromium(course, tmp_path, artifacts, language):
    html = feedback.render_student(_failing_record(course, HOSTILE), course, "13", language)
    _check_page(html, f"student-{language}", tmp_path, artifacts)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_what_the_results_show_in_chromium(course, tmp_path, artifacts, language):
    """A part's contrast rule and a check's structure claim, on a real page."""
    record = _failing_record(course, "findings")
    dispatch = [t for t in record.tests if t.part == "dispatch"]
    for i, test in enumerate(dispatch):  # the passing ones have K = 1, the failing K >= 2
        test.case = [["test", "test_dispatch"], ["K", 1 if test.passed else 2 + i % 2]]
    failing = [t for t in dispatch if not t.passed]
    failing[0].error = None
    failing[0].checks = [{
        "name": "output", "passed": False, "message": "differs by 1.4", "max_abs_diff": 1.4,
        "atol": 1e-5, "rtol": 1e-4, "structure": {
            "kind": "rows", "rows": [0, 2], "count": 2, "total": 10,
            "shared": [{"field": "expert", "op": "has", "value": 3}]}}]
    html = feedback.render_student(record, course, "13", language)
    assert html.count("K ≥ 2") == 1 and 'class="fact"' in html
    _check_page(html, f"findings-{language}", tmp_path, artifacts)


def test_class_report_in_chromium(course, tmp_path, artifacts):
    _check_page(report.render_report(Tally.of(_class(course)), course, "13",
                                     similarity="similarity.html"),
                "report", tmp_path, artifacts)


def test_similarity_report_in_chromium(course, tmp_path, artifacts):
    """The pairs side by side, one of them a hostile student's copy of alice."""
    from grader.run.similarity import THRESHOLD, compare, read_text

    alice, _ = read_text(ROOT / "examples" / "13" / "alice" / "13_moe.py")
    texts = {"alice": alice, HOSTILE: alice + f"\n# {HOSTILE}\n",
             "planted": read_text(ROOT / "tests" / "fixtures" / "similarity" / "planted.py")[0]}
    found = compare(texts, read_text(ROOT / "exercises" / "13_moe.py")[0])
    assert len(found.pairs) == 3
    _check_page(similarity.render_similarity(found, len(texts), THRESHOLD, course, "13")[0],
                "similarity", tmp_path, artifacts)


def test_the_browser_check_sees_errors(tmp_path):
    """The check is not vacuous: a page whose script and image break its CSP is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                    "content=\"default-src 'none'\"></head><body><script>console.error(1)"
                    '</script><img src="http://example.invalid/x.png"></body></html>')
    problems = load_and_shoot(page, tmp_path / "bad.png", tmp_path / "profile")
    assert any("Content Security Policy" in p for p in problems), problems
