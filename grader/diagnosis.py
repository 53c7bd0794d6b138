"""When a known mistake explains a part: one rule for the feedback and for grading.

A mistake explains a part only when it accounts for every failing test of the part:
the student's results pass against the mistake's results in each of them, and the
mistake fails exactly the tests the student failed (its signature, computed from
trusted code). Anything less is no diagnosis: a wrong name teaches the wrong thing,
and an explained part lets the composite part forgive the layer.
"""
from __future__ import annotations

from collections.abc import Iterable


def explaining(failed: set[str], matches: dict[str, list[str] | None],
               signatures: dict[str, set[str]], candidates: Iterable[str]) -> list[str]:
    """The candidates (in their order) that explain a part whose tests `failed`, given
    which mistakes each failing test's results matched (None: not diagnosable)."""
    if not failed or any(matches.get(name) is None for name in failed):
        return []
    return [m for m in candidates
            if signatures.get(m) == failed and all(m in matches[name] for name in failed)]
