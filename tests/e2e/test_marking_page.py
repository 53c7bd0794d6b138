"""The marking page (`grader mark --lesson 13`) in a real browser: Playwright's Python
package driving Debian's Chromium (`executable_path`: `playwright install` downloads
browsers, which CI cannot). A TA marks a class of 30 by keyboard; the server is killed
(SIGKILL) half-way and started again, and no mark is lost; two tabs mark side by side,
and a group split in one stays split in both after a reload.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import config
from grader.intake.answers import read_answers
from grader.judge.written import grades_folder, marks, record_answers, rubric_changes

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
START_TIMEOUT_S = 120  # far above a loaded machine's start: a hung server fails, a slow one not
WAIT_MS = 60_000
HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason="Chromium (Debian package `chromium`) is not "
                                       "installed at /usr/bin/chromium")

# 30 students, 12 answers: some differ only in case and spacing (one group), one is hostile
ANSWERS = ["Attention mixes tokens; the FFN works on each token alone.",
           "attention  MIXES tokens;\nthe ffn works on each token alone.",
           "Attention looks at other positions.",
           "The FFN transforms each token.",
           "Both do the same thing.",
           "attention is between tokens, FFN is per token",
           "Attention: communication. FFN: computation.",
           "I don't know.",
           HOSTILE,
           "Attention mixes information across the sequence.",
           "FFN adds nonlinearity per position.",
           "attention mixes tokens"]
CLASS = {f"s{i:02d}": ANSWERS[i % len(ANSWERS)] for i in range(30)}


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def keys_for(answer: str) -> list[str]:
    """What the TA applies, read off the answer shown: item 1 (attention mixes tokens)
    when it speaks of tokens or positions, item 2 (the FFN per token) when of the FFN."""
    a = answer.casefold()
    return (["1"] if ("token" in a or "position" in a) and "attention" in a else []) + \
        (["2"] if "ffn" in a else [])


def expected(answer: str) -> tuple[str, ...]:
    return tuple({"1": "attn_mixes", "2": "ffn_per_token"}[k] for k in keys_for(answer))


@pytest.fixture
def course(tmp_path):
    """A copy of the project's course in tmp_path, with the class's q1 answers recorded
    (as `grader run` records them) in grades/13/ beside it."""
    (tmp_path / "course.yml").write_text((ROOT / "course.yml").read_text(encoding="utf-8"),
                                         encoding="utf-8")
    for d in ("solutions", "exercises", "hidden_tests", "examples", "tests"):
        (tmp_path / d).symlink_to(ROOT / d)
    course = config.load(tmp_path / "course.yml")
    written = course.lesson("13").written
    assert [r.id for r in written["q1"].rubric][:2] == ["attn_mixes", "ffn_per_token"]
    found = {}
    for sid, text in CLASS.items():
        f = tmp_path / "class" / f"{sid}.py"
        f.parent.mkdir(exist_ok=True)
        f.write_text(f"ANSWER_Q1 = {text!r}\n", encoding="utf-8")
        found[sid] = read_answers(f, written)
    record_answers(grades_folder(course.root, "13"), found)
    return course


class Server:
    """`grader mark` as a TA starts it, in its own process: the address it prints."""

    def __init__(self, course_yml: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader.cli", "mark", "--course", str(course_yml),
             "--lesson", "13", "--no-browser"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # (ends when the process does)
            found = re.search(r"marking page: (http://127\.0\.0\.1:\d+/\?token=\S+)", line)
            if found:
                self.url = found.group(1)
                return
        raise AssertionError(f"grader mark printed no address (exit {self.proc.wait(5)})")

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no handler, no clean-up
        self.proc.wait(START_TIMEOUT_S)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's own sandbox refuses to start
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def settled(page) -> None:
    """Every action the page took is done: saved, and the question read again."""
    page.wait_for_selector('body[data-pending="0"]', state="attached", timeout=WAIT_MS)


def open_page(browser_or_context, url: str, problems: list[str]):
    page = browser_or_context.new_page()
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(url + "&q=q1")
    settled(page)
    return page


def mark_shown(page) -> None:
    """Apply the shown group's items by keyboard (0: no points), then go to the next
    unmarked group."""
    for key in keys_for(page.inner_text("#answer")) or ["0"]:
        page.keyboard.press(key)
    page.keyboard.press("n")
    settled(page)


def progress(page) -> tuple[int, int]:
    done, total = re.findall(r"\d+", page.inner_text("#progress"))[:2]
    return int(done), int(total)


def test_a_class_marked_by_keyboard_loses_no_mark_when_the_server_is_killed(course,
                                                                           browser):
    folder = grades_folder(course.root, "13")
    problems: list[str] = []
    groups = len({_norm(a) for a in CLASS.values()})
    assert groups == len(ANSWERS) - 1  # the case-and-spacing pair is one group
    server = Server(course.root / "course.yml")
    try:
        page = open_page(browser, server.url, problems)
        assert progress(page) == (0, 30)
        assert page.inner_text("#position").endswith(f" {groups}")  # group 1 of 11
        assert not page.is_visible("#members")  # names hidden until asked
        page.keyboard.press("h")
        settled(page)
        assert re.fullmatch(r"s\d\d(, s\d\d)*", page.inner_text("#members"))
        page.keyboard.press("h")
        settled(page)
        for _ in range(groups // 2):
            mark_shown(page)
        before = marks(folder)
        assert 0 < len(before) < 30 and progress(page)[0] == len(before)
        assert not problems, problems
        server.kill()
        server = Server(course.root / "course.yml")  # a new token: the TA opens its address
        page.goto(server.url + "&q=q1")
        settled(page)
        problems.clear()  # (the page's reads while no server ran were refused: rightly)
        assert progress(page)[0] == len(before), "a mark made before the kill was lost"
        page.keyboard.press("n")  # the next unmarked group
        settled(page)
        while progress(page)[0] < 30:
            mark_shown(page)
        got = marks(folder)
        assert {k: m.rubric for k, m in got.items()} == \
            {(sid, "q1"): expected(text) for sid, text in CLASS.items()}
        assert all(got[k] == m for k, m in before.items())
        hostile = [sid for sid, text in CLASS.items() if text == HOSTILE]
        assert all(got[(sid, "q1")].points == 0 for sid in hostile)  # marked 0 by key
        assert not problems, problems  # no script ran from an answer, no CSP violation
    finally:
        server.kill()


def test_two_tabs_lose_nothing_and_see_each_others_marks(course, browser):
    folder = grades_folder(course.root, "13")
    problems: list[str] = []
    server = Server(course.root / "course.yml")
    try:
        context = browser.new_context()
        one, two = open_page(context, server.url, problems), open_page(context, server.url,
                                                                       problems)
        two.keyboard.press("j")  # the second group: the tabs mark different answers
        settled(two)
        first, second = one.inner_text("#answer"), two.inner_text("#answer")
        assert _norm(first) != _norm(second)
        one.keyboard.press("1")
        two.keyboard.press("2")
        settled(one)
        settled(two)
        got = marks(folder)
        assert {sid for sid, _ in got} == \
            {sid for sid, text in CLASS.items() if _norm(text) in (_norm(first),
                                                                   _norm(second))}
        assert all(m.rubric == (("attn_mixes",) if _norm(CLASS[sid]) == _norm(first)
                                else ("ffn_per_token",)) for (sid, _), m in got.items())
        one.reload()
        settled(one)
        assert progress(one) == progress(two) == (len(got), 30)
        # the same group in both tabs: the mark saved last wins, the first is kept above it
        two.keyboard.press("k")
        settled(two)
        two.keyboard.press("2")
        settled(two)
        rows = [json.loads(x) for x in
                (folder / "written.jsonl").read_text(encoding="utf-8").splitlines()]
        sid = next(s for s, text in CLASS.items() if _norm(text) == _norm(first))
        mine = [r["rubric"] for r in rows if r["student_id"] == sid]
        assert mine == [["attn_mixes"], ["attn_mixes", "ffn_per_token"]]
        assert marks(folder)[(sid, "q1")].rubric == ("attn_mixes", "ffn_per_token")
        # a rubric item's points changed in one tab: every mark applying it is worth them
        one.reload()
        settled(one)
        assert one.inner_text("#value").startswith("2 / 2")
        one.click("summary")
        one.fill('#points input[data-item="attn_mixes"]', "0.5")
        one.keyboard.press("Tab")  # (the change is sent when the box is left)
        settled(one)
        assert rubric_changes(folder) == {("q1", "attn_mixes"): 0.5}
        assert one.inner_text("#value").startswith("1.5 / 2")
        # a split is saved beside the marks: it holds on reload, and in the other tab
        total = int(two.inner_text("#position").split()[-1])
        size = int(re.findall(r"\d+", two.inner_text("#count"))[0])  # the group shown
        two.keyboard.press("s")
        settled(two)
        for tab in (one, two):
            tab.reload()
            settled(tab)
            assert int(tab.inner_text("#position").split()[-1]) == total + size - 1
        assert len((folder / "splits.jsonl").read_text(encoding="utf-8").splitlines()) == size
        assert not problems, problems
    finally:
        server.kill()
