"""When a known mistake explains a part: one rule for the feedback and for grading.

A mistake explains a part only when it accounts for every failing test of the part:
the student's results pass against the mistake's results in each of them (or, where
the student's code raised, the mistake's variant raised the same type of exception
there: `raises`), and the mistake fails exactly the tests the student failed (its
signature, computed from trusted code). A raise alone names nothing: where the
student's code raised in every failing test, no mistake explains the part, or code
that raises everywhere would be named as any mistake that raises in each test it
fails. Anything less is no diagnosis: a wrong name teaches the wrong thing, and an
explained part lets the composite part forgive the layer.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from grader.record import Diagnosis, TestRecord

if TYPE_CHECKING:
    from grader.judge.reference import Mistake


def explaining(failed: set[str], raised: set[str], matches: dict[str, list[str] | None],
               signatures: dict[str, set[str]], candidates: Iterable[str]) -> list[str]:
    """The candidates (in their order) that explain a part whose tests `failed`, given
    which mistakes each failing test's results matched (None: not diagnosable) and
    the failing tests where the student's code `raised`."""
    if not failed or failed <= raised or any(matches.get(name) is None for name in failed):
        return []
    return [m for m in candidates
            if signatures.get(m) == failed
            and all(m in (matches[name] or ()) for name in failed)]


def diagnose(tests: list[TestRecord], matches: dict[str, list[str] | None],
             mistakes: list[Mistake], signatures: dict[str, set[str]]) -> Diagnosis | None:
    """A part's diagnosis for the record: the first mistake `explaining` names, then
    set on each of the part's failing tests that could tell mistakes apart (`matches`
    not None, which only a failing test has); in an unexplained part such a test says
    `id=None`."""
    failing = {t.name for t in tests if not t.passed}
    known = {m.id: m for m in mistakes}
    found = explaining(failing, {t.name for t in tests if not t.passed and t.error},
                       matches, signatures, known)
    chosen = Diagnosis(found[0], known[found[0]].title, known[found[0]].hint) if found else None
    for t in tests:
        if matches.get(t.name) is not None:
            t.diagnosis = chosen if chosen and not t.passed else Diagnosis(None)
    return chosen
