"""Issue 51, "zh complete": a zh page, the class report and `grader check --language zh`
hold no English. Each page is opened in headless Chromium (Debian's `chromium`, as
test_browser.py uses it) and its DOM, as Chromium built it (`--dump-dom`: the markup
parsed, entities decoded), has its text (scripts, styles, <code> and <pre> left out)
scanned for Latin words of three letters or more, less what is code or a name: the
student's id and name, file names, identifiers, numbers and the lesson's own terms."""
from __future__ import annotations

import html
import io
import os
import re
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from grader.judge.tally import Tally
from grader.pages import feedback, report
from grader.text.strings import Said
from grader.run.practice_output import WORDS, outcome, print_outcome
from tests.conftest import grade_sources
from tests.e2e.test_browser import BROWSER_TIMEOUT_S, CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = ("bob", "carol", "dave", "frank", "grace", "heidi")
# The terms the lesson itself uses, in either language's text.
TERMS = {"FFN", "MoE", "SwiGLU", "RoPE", "top", "dtype", "float32", "float64", "Python",
         "PyTorch", "SiLU", "Linear", "softmax", "int64", "NaN", "inf", "MiniMind", "HTML",
         "JSON", "CSV", "Moodle", "Gradescope", "Canvas", "GPU", "CPU", "token",
         "numpy", "torch", "transformers"}  # the last three: the packages a file may import
_PYTHON_SAID = re.compile(r"\b[A-Z]\w*(?:Error|Exception): [^：\n]*")  # Python's words
_TEST_ID = re.compile(r"\btest_\w+\[[^\]\n]*\]")
_HIDDEN = re.compile(r"<(script|style|code|pre|svg|title)\b.*?</\1>", re.S | re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z_]{2,}")


def latin(text: str, names: set[str]) -> list[str]:
    """The Latin words of three letters or more in `text` that are no identifier (with
    `_`, `.`, `[`, `(` or a digit beside it, or camel case), file name or listed name."""
    found = []
    text = _TEST_ID.sub(" ", text)  # a test's id: a name, as pytest gives it
    text = _PYTHON_SAID.sub(" ", text)
    for m in _WORD.finditer(text):
        word, before, after = m.group(), text[m.start() - 1:m.start()], text[m.end():m.end() + 1]
        if before in "._[(`'\"/-" and before or after in "._[(`'\"/-0123456789=" and after \
                or "_" in word or word in TERMS or word.lower() in names \
                or re.search(r"[a-z][A-Z]", word) or word.isupper() and len(word) <= 4:
            continue
        found.append(word)
    return found


_ASCII_MARK = re.compile(r"[\u4e00-\u9fff][:;,?!]|[:;,?!]\s*[\u4e00-\u9fff]")


def english(text: str, names: set[str]) -> list[str]:
    """The Latin words left (`latin`), and each ASCII colon, semicolon, comma or mark
    beside a Chinese character, which Chinese text writes full-width."""
    return latin(text, names) + [m.group() for m in _ASCII_MARK.finditer(text)]


def shown_text(page: str) -> str:
    """A page as its reader sees it: no tags, scripts, styles or code."""
    return html.unescape(re.sub(r"<[^>]+>", " ", _HIDDEN.sub(" ", page)))


def chromium_dom(page: str, folder: Path) -> str:
    """The page's DOM as headless Chromium built it from the file (`--dump-dom`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "page.html"
    path.write_text(page, encoding="utf-8")
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         f"--user-data-dir={folder / 'profile'}", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "<body" in done.stdout, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory) -> dict:
    sources = {sid: (ROOT / "examples" / "13" / sid / "13_moe.py").read_text()
               for sid in STUDENTS}
    from grader.judge import runner

    graded = grade_sources(ctx13, slot13, tmp_path_factory, sources)
    runner.grade_many(ctx13, [runner.Submission("erin", None)], slot13,  # handed nothing in
                      lambda r: graded.__setitem__(r.student_id, r))
    assert graded["erin"].status == "missing"
    return graded


def python_said(record) -> list[str]:
    """What Python or the student's code said, shown as they said it: the problem's
    message, tracebacks, what the code printed."""
    found = feedback.syntax_error(record.problem)
    python = not isinstance(record.problem, Said)  # a Said is the grader's own sentence
    return [record.problem if python else "", *(found["message"] for found in [found] if found),
            record.import_traceback, record.output,
            *(x.error.get("traceback") or "" for x in record.tests if x.error)]


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                    reason="headless Chromium (Debian package `chromium`) is not installed")
def test_zh_outputs_hold_no_english(graded, course, tmp_path):
    left = {}
    names = set(graded) | {"moe", "ffn", "router", "dispatch", "block", "aux_loss"}
    for sid, record in graded.items():
        page = shown_text(chromium_dom(feedback.render_student(record, course, "13", "zh"),
                                       tmp_path / sid))
        for said in python_said(record):
            page = page.replace(said.strip(), " ") if said.strip() else page
        left[f"page {sid}"] = english(page, names)
        out = io.StringIO()
        print_outcome(record, outcome(record, course, "13", record.notes, "zh"), course,
                      "13", Console(file=out, width=300, highlight=False))
        text = re.sub(r"^ {6}.*$", "", out.getvalue(), flags=re.M)  # code and tracebacks
        text = re.sub(r"`[^`\n]*`", " ", text)  # code, quoted
        printed = WORDS["zh"]["printed"]
        if printed in text:  # what the student's code printed, up to the count
            text = text[:text.index(printed)] + text[text.rindex("\n", 0, len(text) - 1):]
        for said in python_said(record):
            for line in said.splitlines():
                text = text.replace(line.strip(), " ") if line.strip() else text
        left[f"check {sid}"] = english(text, names)
    page = shown_text(chromium_dom(report.render_report(Tally.of(list(graded.values())),
                                                        course, "13", "zh"),
                                   tmp_path / "report"))
    for said in (s for record in graded.values() for s in python_said(record)):
        page = page.replace(said.strip(), " ") if said.strip() else page
    left["report"] = english(page, names)
    left = {k: sorted(set(v)) for k, v in left.items() if v}
    assert not left, left
