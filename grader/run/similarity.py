"""Which submissions of a class are alike: copydetect's winnowing over every pair,
within a budget of time and bytes.

Each file is tokenised (pygments) with names and strings filtered out, so renaming
variables changes nothing; its k-grams are hashed and winnowed into fingerprints, which
do not depend on where a function sits, so reordering changes nothing either. The
stub's fingerprints are boilerplate: what every student was handed never counts. A
pair's similarity is the larger of its two shares (the part of each file's tokens that
matches the other), so a copy pasted into a longer file still shows.

Those tokens keep only the shape of each statement (`V=V+V`), which unrelated files can
share: files of random assignments under different names match at 97-98%. So a pair is
similar only if it also shares KEPT characters of code with names kept (the same
winnowing over the code without whitespace and comments, the stub's again boilerplate).
Copying shares names too: the library's calls and attributes (`torch.topk`, `.view(`)
survive renaming; the random files share none.

copydetect hashes k-grams with Python's hash(), salted per process, so which
fingerprints winnowing keeps, and a share, may differ by a point from run to run.

Student code is read here as text only (capped like every read of it on the trusted
side, and to the budget's `file_kb`), never imported or run.
"""
from __future__ import annotations

import io
import time
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import Environment
from markupsafe import escape

from grader.config import Budget, Course
from grader.intake.capped import MAX_SOURCE, read_capped
from grader.pages.feedback import STRINGS, course_title, language_of, lesson_title, templates
from grader.text.shown import clean

if TYPE_CHECKING:
    from copydetect import CodeFingerprint

NOISE = 25          # copydetect's default noise threshold: k-grams of 25 tokens
GUARANTEE = 30      # a match this long is always found: window = 30 - 25 + 1
THRESHOLD = 0.5     # pairs above this share are reported
KEPT = 100          # characters of code with names kept that a similar pair shares at least
CONTEXT = 3         # lines shown around each matched region
MATCHED = 200       # lines shown of one matched region, its first and last half (a
                    # solution is ~100 lines; a fingerprint frequent in one file can
                    # mark most of it, e.g. one statement shape repeated)


@dataclass(frozen=True)
class Piece:
    """A stretch of one side as the page shows it: matched code, code around it, or
    `skipped` lines left out between (then `text` is empty)."""
    text: str
    matched: bool = False
    skipped: int = 0


@dataclass(frozen=True)
class Side:
    """One file of a pair: who, how much of it matches, and its text cut into
    (text, matched) segments."""
    student_id: str
    share: float
    segments: list[tuple[str, bool]]

    @property
    def excerpt(self) -> list[Piece]:
        return excerpt(self.segments)


@dataclass(frozen=True)
class Pair:
    a: Side
    b: Side
    tokens: int      # matching tokens
    kept: int        # matching characters of code with names kept

    @property
    def similarity(self) -> float:
        return max(self.a.share, self.b.share)


@dataclass
class Found:
    """What compare() found: the similar pairs, most similar first, and what was left
    out: pairs above the threshold alike in shape only, pairs not compared in time."""
    pairs: list[Pair]
    total: int                # pairs in the class
    examined: int = 0         # pairs compared before the time budget ran out
    shape_only: int = 0       # above the threshold, but under KEPT characters with names kept

    @property
    def out_of_time(self) -> bool:
        return self.examined < self.total


def read_text(path: Path, cap: int = MAX_SOURCE) -> tuple[str, int]:
    """(the first `cap` bytes of a submission's text, the file's size), as the grader
    reads any of it: capped, never followed through a link, undecodable bytes replaced."""
    data, size = read_capped(path, min(cap, MAX_SOURCE))
    return data[:cap].decode("utf-8", "replace"), size


def names_kept(text: str) -> str:
    """The code without whitespace and comments, names, strings and numbers as written."""
    from pygments import lexers, token

    return "".join(value for kind, value in lexers.get_lexer_by_name("python").get_tokens(text)
                   if kind not in token.Text and kind not in token.Comment)


def fingerprint(name: str, text: str, boilerplate: list[int] | None = None,
                kept: bool = False) -> CodeFingerprint:
    """copydetect's fingerprint of one text (`kept`: of its code with names kept).
    copydetect is imported here, not above: it loads matplotlib (0.7 s), and the
    `grader` command imports this module for its default threshold."""
    from copydetect import CodeFingerprint

    return CodeFingerprint(name, NOISE, GUARANTEE - NOISE + 1, boilerplate=boilerplate,
                           language="python", filter=not kept,
                           fp=io.StringIO(names_kept(text) if kept else text))


def segments(text: str, slices) -> list[tuple[str, bool]]:
    """The text cut at copydetect's slices (starts in row 0, ends in row 1)."""
    out, at = [], 0
    for start, end in sorted(zip(slices[0].tolist(), slices[1].tolist())):
        start, end = max(start, at), max(end, at)
        if start > at:
            out.append((text[at:start], False))
        if end > start:
            out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out


def excerpt(segs: list[tuple[str, bool]], context: int = CONTEXT) -> list[Piece]:
    """The matched segments (of a long one, MATCHED lines) with `context` lines either
    side; the lines left out are counted, not shown, so a 1 MB file with one copied
    function shows that function."""
    out: list[Piece] = []
    for i, (text, matched) in enumerate(segs):
        lines = text.splitlines(keepends=True)
        if matched:
            if len(lines) <= MATCHED:
                out.append(Piece(text, True))
                continue
            half = MATCHED // 2
            out += [Piece("".join(lines[:half]), True), Piece("", skipped=len(lines) - MATCHED),
                    Piece("".join(lines[-half:]), True)]
            continue
        head = lines[:context + 1] if i > 0 else []             # after a match
        tail = lines[-(context + 1):] if i < len(segs) - 1 else []  # before one
        if len(lines) <= len(head) + len(tail) + context:  # a few lines: not worth a note
            out.append(Piece(text))
            continue
        if head:
            out.append(Piece("".join(head)))
        out.append(Piece("", skipped=len(lines) - len(head) - len(tail)))
        if tail:
            out.append(Piece("".join(tail)))
    return out


def compare(texts: dict[str, str], stub: str, threshold: float = THRESHOLD,
            budget: Budget | None = None) -> Found:
    """Every pair of these submissions, most similar first, keeping those above
    `threshold` that share KEPT characters with names kept; the stub's code is
    boilerplate. Stops once `budget.seconds` have passed: checked before each file and
    each pair, whose work the caller bounds by cutting `texts` to `budget.file_kb`."""
    from copydetect import compare_files

    budget = budget or Budget()
    deadline = time.monotonic() + budget.seconds
    found = Found([], len(texts) * (len(texts) - 1) // 2)
    boilerplate = list(fingerprint("stub.py", stub).hashes)
    kept_boilerplate = list(fingerprint("stub.py", stub, kept=True).hashes)
    prints: dict[str, CodeFingerprint] = {}
    kept: dict[str, CodeFingerprint] = {}  # only for pairs above the threshold
    for sid in sorted(texts):
        if time.monotonic() > deadline:
            break
        prints[sid] = fingerprint(f"{sid}.py", texts[sid], boilerplate)
    for x, y in combinations(sorted(prints), 2):
        if time.monotonic() > deadline:
            break
        found.examined += 1
        if not prints[x].hashes or not prints[y].hashes:
            continue  # nothing but the stub (or too short to fingerprint)
        tokens, (share_x, share_y), (slices_x, slices_y) = compare_files(prints[x], prints[y])
        if max(share_x, share_y) <= threshold:
            continue
        for sid in (x, y):
            if sid not in kept:
                kept[sid] = fingerprint(f"{sid}.py", texts[sid], kept_boilerplate, kept=True)
        shared = int(compare_files(kept[x], kept[y])[0])
        if shared < KEPT:
            found.shape_only += 1
            continue
        found.pairs.append(Pair(Side(x, float(share_x), segments(prints[x].raw_code, slices_x)),
                                Side(y, float(share_y), segments(prints[y].raw_code, slices_y)),
                                int(tokens), shared))
    found.pairs.sort(key=lambda p: (-p.similarity, p.a.student_id, p.b.student_id))
    return found


def render_similarity(found: Found, compared: int, threshold: float,
                      course: Course, lesson_key: str, language: str | None = None,
                      pages: Environment | None = None,
                      budget: Budget | None = None,
                      cut: list[tuple[str, int]] | tuple = ()) -> tuple[str, int]:
    """The TAs' similarity report and how many pairs it shows: `found`'s pairs side by
    side, most similar first, while the page stays within `budget.page_kb` (course.yml's,
    else the defaults), each side's matching regions marked with a few lines around
    them; what the budget left out is said. `cut`: the sides compared only up to
    `budget.file_kb` (label, size in KB). The code is the students', escaped and cleaned."""
    lang = language_of(course, language)
    budget = budget or Budget()
    template = (pages or templates()).get_template("similarity.html.j2")

    def render(shown: int) -> str:
        return template.render(
            t=STRINGS[lang], lang=lang, course_title=course_title(course, lang),
            lesson_key=lesson_key, lesson_title=lesson_title(course, lesson_key, lang),
            n=compared, threshold=f"{100 * threshold:g}", pairs=found.pairs[:shown],
            hidden=len(found.pairs) - shown, found=found, budget=budget, kept=KEPT,
            context=CONTEXT, cut=cut)

    room = budget.page_kb * 1024 - len(render(0).encode())  # the page with no pair on it
    shown = 0
    for pair in found.pairs:
        room -= _pair_bytes(pair)
        if room < 0:
            break
        shown += 1
    return render(shown), shown


PAIR_MARKUP = 2048   # a pair's HTML around its ids and code (measured: under 1 KB)
PIECE_MARKUP = 160   # a piece's: <mark> or a skipped-lines note (measured: under 100 bytes)


def _pair_bytes(pair: Pair) -> int:
    """At most what one pair adds to the similarity page: its ids (each twice) and its
    excerpts, escaped and cleaned as the template shows them."""
    ids = [side.student_id for side in (pair.a, pair.b)] * 2
    pieces = [piece.text for side in (pair.a, pair.b) for piece in side.excerpt]
    return (PAIR_MARKUP + PIECE_MARKUP * len(pieces)
            + sum(len(str(escape(clean(text, MAX_SOURCE))).encode()) for text in ids + pieces))
