"""Which submissions of a class are alike: copydetect's winnowing over every pair.

Each file is tokenised (pygments) with names, strings and numbers filtered out, so
renaming variables changes nothing; its k-grams are hashed and winnowed into
fingerprints, which do not depend on where a function sits, so reordering changes
nothing either. The stub's fingerprints are boilerplate: what every student was handed
never counts. A pair's similarity is the larger of its two shares (the part of each
file's tokens that matches the other), so a copy pasted into a longer file still shows.
copydetect hashes k-grams with Python's hash(), salted per process, so which
fingerprints winnowing keeps, and a share, may differ by a point from run to run.

Student code is read here as text only (capped like every read of it on the trusted
side), never imported or run.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from typing import TYPE_CHECKING

from grader.intake.capped import MAX_SOURCE, read_capped

if TYPE_CHECKING:
    from copydetect import CodeFingerprint

NOISE = 25          # copydetect's default noise threshold: k-grams of 25 tokens
GUARANTEE = 30      # a match this long is always found: window = 30 - 25 + 1
THRESHOLD = 0.5     # pairs above this share are reported


@dataclass(frozen=True)
class Side:
    """One file of a pair: who, how much of it matches, and its text cut into
    (text, matched) segments for the side-by-side view."""
    student_id: str
    share: float
    segments: list[tuple[str, bool]]


@dataclass(frozen=True)
class Pair:
    a: Side
    b: Side
    tokens: int      # matching tokens

    @property
    def similarity(self) -> float:
        return max(self.a.share, self.b.share)


def read_text(path: Path) -> str:
    """A submission's text, as the grader reads any of it: capped, never followed
    through a link, undecodable bytes replaced."""
    data, _ = read_capped(path, MAX_SOURCE)
    return data[:MAX_SOURCE].decode("utf-8", "replace")


def fingerprint(name: str, text: str, boilerplate: list[int] | None = None
                ) -> CodeFingerprint:
    """copydetect's fingerprint of one text. copydetect is imported here, not above: it
    loads matplotlib (0.7 s), and the `grader` command imports this module for its
    default threshold."""
    from copydetect import CodeFingerprint

    return CodeFingerprint(name, NOISE, GUARANTEE - NOISE + 1, boilerplate=boilerplate,
                           language="python", fp=io.StringIO(text))


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


def compare(texts: dict[str, str], stub: str, threshold: float = THRESHOLD) -> list[Pair]:
    """Every pair of these submissions, most similar first, keeping those above
    `threshold`; the stub's code is boilerplate."""
    from copydetect import compare_files

    boilerplate = list(fingerprint("stub.py", stub).hashes)
    prints = {sid: fingerprint(f"{sid}.py", text, boilerplate) for sid, text in texts.items()}
    pairs = []
    for x, y in combinations(sorted(prints), 2):
        if not prints[x].hashes or not prints[y].hashes:
            continue  # nothing but the stub (or too short to fingerprint)
        tokens, (share_x, share_y), (slices_x, slices_y) = compare_files(prints[x], prints[y])
        if max(share_x, share_y) > threshold:
            pairs.append(Pair(Side(x, float(share_x), segments(prints[x].raw_code, slices_x)),
                              Side(y, float(share_y), segments(prints[y].raw_code, slices_y)),
                              int(tokens)))
    return sorted(pairs, key=lambda p: (-p.similarity, p.a.student_id, p.b.student_id))
