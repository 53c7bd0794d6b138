"""No claim on a correct variant, no wrong claim on a known mistake.

Every lesson's graded tests run in-process with each known mistake of mistakes.yml,
each correct variant (the lesson's folder and the generated ones) in the student's
place. Every structure claim is checked again against the tensors it was made on, by
this file's own reading of what it says; every contrast rule against the tests'
outcomes. A correct variant must get no claim at all.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.judge import cases, contrast
from grader import config
from grader.judge.compare import Checks
from grader.judge.context import LessonContext
from grader.judge.plugin import replay
from grader.lesson.testfile import part_of
from grader.author.selftest import default_correct
from grader.author.tolerance import measured, variants

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(config.load(ROOT / "course.yml").lessons)
# a lesson's tests run on one xdist worker: tests/conftest.py, BY_LESSON


def _ok(got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> bool:
    return got.shape == want.shape and bool(
        (np.abs(got - want) <= atol + rtol * np.abs(want)).all())


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1]) if a.ndim >= 2 else a.reshape(-1, 1)


def true_claim(claim: dict, got: np.ndarray, ref: np.ndarray, atol: float, rtol: float,
               labels: dict | None = None) -> bool:
    """What the claim says, applied to the reference, is what the student returned."""
    kind = claim["kind"]
    if kind == "nonfinite":
        bad = ~np.isfinite(got) & np.isfinite(ref)
        first = got[tuple(claim["where"])]
        return int(bad.sum()) == claim["count"] and bool(bad[tuple(claim["where"])]) and (
            np.isnan(first) == (claim["value"] == "NaN"))
    if kind == "zeros":
        return _ok(got, np.zeros_like(ref), atol, rtol)
    if kind == "sign":
        return _ok(got, -ref, atol, rtol)
    if kind == "factor":
        return _ok(got, claim["factor"] * ref, atol, rtol)
    if kind == "shift":
        return _ok(got, ref + claim["shift"], atol, rtol)
    if kind == "transpose":
        return _ok(got, np.swapaxes(ref, -1, -2), atol, rtol)
    g, r = _rows(got), _rows(ref)
    if kind == "permutation":
        moved = dict(map(tuple, claim["moved"]))
        return all(_ok(g[i], r[j], atol, rtol) for i, j in moved.items()) and all(
            _ok(g[i], r[i], atol, rtol) for i in range(len(r)) if i not in moved) \
            if claim["count"] == len(moved) else all(
                _ok(g[i], r[j], atol, rtol) for i, j in moved.items())
    if kind == "rows":
        wrong = [i for i in range(len(r)) if not _ok(g[i], r[i], atol, rtol)]
        shared = [contrast.Rule(**rule) for rule in claim.get("shared", [])]
        rows = [({k: v[i] for k, v in (labels or {}).items()}, i in wrong) for i in range(len(r))]
        return wrong[:len(claim["rows"])] == claim["rows"] and len(wrong) == claim["count"] \
            and all(_rule_true(rule, rows) for rule in shared)
    raise AssertionError(f"unknown claim {claim}")


class Verifying(Checks):
    """`Checks` that keep every structure claim with its verdict."""

    def __init__(self, tolerances: dict):
        super().__init__(tolerances)
        self.claims: list[tuple[str, dict, bool]] = []

    def close(self, name, got, ref, tol=None, alt=None, alt_note="", rows=None,
              axes=None) -> bool:
        passed = super().close(name, got, ref, tol, alt, alt_note, rows, axes)
        claim = self.items[-1].structure
        if claim is not None:
            t = self._tol(tol, ref.dtype)
            g, r = got.detach().double().numpy(), ref.detach().double().numpy()
            labels = {k: v.tolist() for k, v in (rows or {}).items()}
            self.claims.append((name, claim, true_claim(claim, g, r, t.atol, t.rtol, labels)))
        return passed


def run(items, student, reference, tolerances) -> tuple[list, dict]:
    """Structure claims (test, check, claim, true?) and per part the cases' outcomes."""
    claims, by_part = [], defaultdict(list)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        checks = Verifying(tolerances)
        try:
            with torch.random.fork_rng():
                replay(item, {"student": student, "reference": reference, "check": checks})
            failed = bool(checks.failures)
        except Exception:  # noqa: BLE001 - a mistake may break a test: that test failed
            failed = True
        claims += [(item.name, *c) for c in checks.claims]
        by_part[part_of(item.path)].append(
            ({"test": item.originalname, **cases.fields(params)}, failed))
    return claims, by_part


def _rule_true(rule: contrast.Rule, outcomes: list[tuple[dict, bool]]) -> bool:
    """This file's own reading of a rule: every failing case satisfies it, no passing one."""
    ops = {"eq": lambda v: v == rule.value, "ne": lambda v: v != rule.value,
           "ge": lambda v: v >= rule.value, "le": lambda v: v <= rule.value,
           "has": lambda v: rule.value in v}
    for fields, failed in outcomes:
        if rule.field not in fields:
            if failed:
                return False
            continue
        if rule.op in ("same", "differs"):  # K = E: the other field's value, per case
            holds = (fields[rule.field] == fields[rule.value]) == (rule.op == "same")
        else:
            holds = bool(ops[rule.op](fields[rule.field]))
        if holds != failed:
            return False
    return True


@pytest.fixture(scope="module", params=LESSONS)
def lesson(request, course):
    key = request.param
    refs = LessonContext(course, key).refs
    return key, refs, measured.graded_tests(course, key), course.tolerances(key)


def test_no_claim_on_a_correct_variant(course, lesson):
    key, refs, items, tolerances = lesson
    made, _ = variants.generated(refs.source, refs.reference, refs.probes, key)
    chosen = variants.from_folder(default_correct(course, key), refs.probes) + made
    assert len(chosen) >= 2
    for v in chosen:
        claims, by_part = run(items, v.caller, refs.reference, tolerances)
        assert claims == [], f"{v.name}: {claims[:3]}"
        for part, outcomes in by_part.items():
            assert not any(f for _, f in outcomes), f"{v.name} fails in {part}"
            assert contrast.rules(outcomes) == []


def test_no_wrong_claim_on_a_known_mistake(lesson):
    key, refs, items, tolerances = lesson
    made = 0
    for v in refs.variants:
        claims, by_part = run(items, v.caller, refs.reference, tolerances)
        wrong = [c for c in claims if not c[3]]
        assert not wrong, f"{v.mistake.id}: wrong claims {wrong[:3]}"
        rules = contrast.rules(by_part[v.mistake.part])
        assert all(_rule_true(r, by_part[v.mistake.part]) for r in rules), (v.mistake.id, rules)
        made += len(claims) + len(rules)
    assert made, f"lesson {key}: no known mistake got any claim: is anything detected?"


def test_top_k_of_the_smallest_reads_as_k_equals_e(course):
    """Issue 26: the page said "Fails for every K except 3 ... also exactly those where
    N ≠ 7". What the router's cases support is that it passes only where K = E (every
    expert chosen, whatever the order); moe's one K = E case is also its one S = 1 case
    and its one B = S case, so moe says nothing."""
    from grader.judge.reference import Caller, load_module

    refs = LessonContext(course, "13").refs
    old = "torch.topk(scores, k=num_experts_per_tok, dim=-1, sorted=False)"
    assert refs.source.count(old) == 1
    source = refs.source.replace(old, old[:-1] + ", largest=False)")
    student = Caller(load_module("_topk_smallest", source, "13_moe.py"), refs.probes)
    _, by_part = run(measured.graded_tests(course, "13"), student, refs.reference,
                     course.tolerances("13"))
    assert contrast.rules(by_part["router"]) == [contrast.Rule("K", "differs", "E")]
    assert _rule_true(contrast.Rule("K", "differs", "E"), by_part["router"])
    assert any(f for _, f in by_part["moe"]) and contrast.rules(by_part["moe"]) == []


def test_no_wrong_claim_on_an_unlisted_mistake(lesson):
    """Issue 26's corpus: every single-line mistake of the divergence corpus
    (tests/fixtures/divergence/<lesson>.yml: the audit's mutants and mistakes students
    make, a few of lesson 13's also in its mistakes.yml, such as top-k off by one),
    graded by the hidden tests in-process; each
    structure sentence and each contrast rule a page would state is re-checked against
    the numbers (`true_claim`) and the cases (`_rule_true`). None may be false."""
    import yaml

    from grader.judge.reference import Caller, load_module

    key, refs, items, tolerances = lesson
    corpus = yaml.safe_load((ROOT / "tests" / "fixtures" / "divergence" / f"{key}.yml")
                            .read_text(encoding="utf-8"))
    # every hand-written mistake, then the audit's mutants in order, 30 in all at most
    # (the suite's time: the whole corpus, 240 mistakes, re-checked 1,169 sentences)
    hand = [e for e in corpus if e["id"].startswith("hand-")]
    entries = hand + [e for e in corpus if not e["id"].startswith("hand-")][:30 - len(hand)]
    assert len(entries) >= (30 if key == "13" else 10)
    stated = failing = 0
    lines = refs.source.splitlines()
    for entry in entries:
        edited = list(lines)
        assert edited[entry["line"] - 1] == entry["old"], entry["id"]
        edited[entry["line"] - 1] = entry["new"]
        try:
            module = load_module(f"_corpus_{key}_{entry['id']}", "\n".join(edited) + "\n",
                                 f"{key}.py")
        except Exception:  # noqa: BLE001 - a mistake that fails to import states nothing
            continue
        claims, by_part = run(items, Caller(module, refs.probes), refs.reference, tolerances)
        wrong = [c for c in claims if not c[3]]
        assert not wrong, f"{entry['id']}: wrong claims {wrong[:3]}"
        for part, outcomes in by_part.items():
            rules = contrast.rules(outcomes)
            assert all(_rule_true(r, outcomes) for r in rules), (entry["id"], part, rules)
            stated += len(rules)
            failing += any(f for _, f in outcomes)
        stated += len(claims)
    print(f"lesson {key}: {len(entries)} unlisted mistakes, {failing} failing parts, "
          f"{stated} sentences re-checked, 0 false")
    assert failing >= len(entries) * 0.9  # they are mistakes: the tests see them
