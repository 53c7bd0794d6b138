"""The smallest failing example on the page and in `grader check` (issue 26): a known
mistake graded in the sandbox gets, for its failing part, a snippet that run next to
the mistaken file prints the numbers the page shows as the student's (lesson 13, and
one mistake of each of lessons 10, 11 and 12)."""
from __future__ import annotations

import html
import io
import re
import subprocess
import sys

import pytest
import yaml
from rich.console import Console

from grader.run import practice_output
from grader.pages import feedback
from grader.judge import runner, smallest
from grader.judge.context import LessonContext
from tests.conftest import ROOT, open_slot


@pytest.fixture(scope="module")
def graded(ctx13, slot13, tmp_path_factory):
    refs = ctx13.refs
    mistake = next(v.mistake for v in refs.variants if v.mistake.id == "aux_missing_e")
    folder = tmp_path_factory.mktemp("smallest")
    path = folder / "13_moe.py"
    path.write_text(mistake.apply(refs.source))
    out = {}
    runner.grade_many(ctx13, [runner.Submission("s", path)], slot13,
                      lambda r: out.__setitem__("r", r))
    return out["r"], folder


def test_the_failing_part_gets_a_snippet_that_runs(graded):
    record, folder = graded
    assert set(record.examples) == {p for p, v in record.parts.items() if v.passed < v.tests}, \
        record.parts
    assert "aux_loss" in record.examples
    text = record.examples["aux_loss"]
    (folder / "snippet.py").write_text(text)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=folder, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    yours = [line for line in text.splitlines() if line.startswith("#   aux = ")][0]  # yours first
    value = yours.removeprefix("#   aux = torch.tensor(").split(",")[0]
    assert value in done.stdout, (value, done.stdout)


def test_page_and_check_show_it(graded, course):
    record, _ = graded
    for lang in ("en", "zh"):
        page = feedback.render_student(record, course, "13", lang)
        assert feedback.STRINGS[lang]["smallest_head"] in page
        assert "m.load_balancing_loss(scores, topk_idx" in page
    report = practice_output.outcome(record, course, "13", [])
    sink = io.StringIO()
    practice_output.print_outcome(record, report, course, "13", Console(file=sink, width=300))
    assert "smallest failing example" in sink.getvalue()
    assert "m.load_balancing_loss(scores, topk_idx" in sink.getvalue()
    assert smallest.SEED  # fresh seeds, named in one place


# lesson -> (its file, a known mistake, the output whose line the snippet's comments show)
OTHERS = {"10": ("10_rmsnorm.py", "no_weight", "y"),
          "11": ("11_attention.py", "past_masked", "scores"),
          "12": ("12_rope.py", "start_from_heads_axis", "cos")}


@pytest.mark.parametrize("key", list(OTHERS))
def test_other_lessons_show_a_snippet_that_runs(course, tmp_path, key):
    """Graded in the sandbox like lesson 13: the failing part gets a snippet, and run
    next to the mistaken file it prints the student's numbers the page shows."""
    name, mistake_id, output = OTHERS[key]
    ctx = LessonContext(course, key)
    mistake = next(v.mistake for v in ctx.refs.variants if v.mistake.id == mistake_id)
    path = tmp_path / name
    path.write_text(mistake.apply(ctx.refs.source))
    out = {}
    slot = open_slot(course, key)
    try:
        runner.grade_many(ctx, [runner.Submission("s", path)], slot,
                          lambda r: out.__setitem__("r", r))
    finally:
        slot.close()
    record = out["r"]
    assert set(record.examples) == {mistake.part}, record.parts
    text = record.examples[mistake.part]
    (tmp_path / "snippet.py").write_text(text)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    yours = [line for line in text.splitlines() if line.startswith(f"#   {output} = ")][0]  # yours first
    shown = yours.removeprefix(f"#   {output} = torch.tensor(").lstrip("[").split(",")[0]
    # the comments write each float as Python does (shortest), print with 17 decimals:
    # the same float64 value
    tensor = next(line for line in done.stdout.splitlines() if line.startswith("tensor("))
    printed = tensor.removeprefix("tensor(").lstrip("[").split(",")[0]
    assert float(printed) == float(shown), (shown, done.stdout)
    page = feedback.render_student(record, course, key, "en")
    assert feedback.STRINGS["en"]["smallest_head"] in page


# Issue 54: mistakes of lesson 13's divergence corpus whose example has no output to
# show but a gradient (hand-23, `.detach()` on the loss's scores; hand-21, on dispatch's
# weight), or needs two tokens and K >= 2 (hand-26, weights taken slot by slot, tokens
# in order): id -> (its part, a line the comments show as yours, a line of its code)
NEW_KINDS = {"hand-23": ("aux_loss", "#   scores.grad = None", "print(scores.grad)"),
             "hand-21": ("dispatch", "#   topk_weight.grad = None", "print(topk_weight.grad)"),
             "hand-26": ("dispatch", "#   y = torch.tensor([[", "topk_idx = torch.tensor([[")}


def _taken_from_page(page: str, head: str) -> str:
    """The example's text as the page shows it: the <pre> after its heading."""
    after = page[page.index(html.escape(head, quote=False)):]
    return html.unescape(re.search(r"<pre>(.*?)</pre>", after, re.S).group(1))


@pytest.mark.parametrize("mistake_id", list(NEW_KINDS))
def test_gradient_and_k_2_examples_taken_from_the_page_run(ctx13, slot13, course, tmp_path,
                                                            mistake_id):
    """Graded in the sandbox: the failing part's example, taken from the page in each
    language, runs next to the mistaken file and prints what its comments say is
    yours; its results come first and its comments are in the page's language."""
    part, yours, line = NEW_KINDS[mistake_id]
    entries = yaml.safe_load((ROOT / "tests" / "fixtures" / "divergence" / "13.yml")
                             .read_text(encoding="utf-8"))
    entry = next(e for e in entries if e["id"] == mistake_id)
    lines = ctx13.refs.source.splitlines()
    assert lines[entry["line"] - 1] == entry["old"]
    lines[entry["line"] - 1] = entry["new"]
    (tmp_path / "13_moe.py").write_text("\n".join(lines) + "\n")
    out = {}
    runner.grade_many(ctx13, [runner.Submission("s", tmp_path / "13_moe.py")], slot13,
                      lambda r: out.__setitem__("r", r))
    record = out["r"]
    assert part in record.examples, record.parts
    for lang in ("en", "zh"):
        t = feedback.STRINGS[lang]
        text = _taken_from_page(feedback.render_student(record, course, "13", lang),
                                t["smallest_head"])
        assert text.startswith(t["ex_yours_gives"]) and yours in text and line in text
        other = feedback.STRINGS["zh" if lang == "en" else "en"]
        assert not any(other[k] in text for k in ("ex_yours_gives", "ex_reference_gives",
                                                  "ex_digits", "ex_backward", "ex_tanh"))
        (tmp_path / "snippet.py").write_text(text, encoding="utf-8")
        done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        if yours.endswith("grad = None"):  # the results, then the gradient cut: none
            assert done.stdout.splitlines()[-1] == "None", done.stdout
            assert t["ex_backward"] in text
        else:  # yours, as the comments show it: K = 2, the first value
            assert re.search(r"topk_idx = torch.tensor\(\[\[\d, \d", text), text
            shown = next(ln for ln in text.splitlines() if ln.startswith("#   y = "))
            assert _first_number(done.stdout) == _first_number(shown), (shown, done.stdout)


def _first_number(text: str) -> float:
    """The first float written in `text` (the comments write it as Python does, print
    with 17 decimals: the same float64 value)."""
    return float(re.search(r"-?\d+\.\d+(?:e-?\d+)?", text).group(0))
