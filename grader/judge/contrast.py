"""Contrast: the one rule over the case fields that separates failing from passing.

Given a part's tests as (case fields, failed), a rule (`K >= 2`, `norm_topk_prob =
False`, `E != 4`, `test = test_gradients`, or a relation between two fields, `K = E`)
that holds for every failing case and for no passing one says more than a list of
test ids. The same search over rows (a token's fields, such as the experts it was
routed to) says what the wrong rows of a tensor share.

A rule is a fact about the cases, never a guess, and it is stated only where the
cases can support it:
- at least MIN_SIDE tests on each side: one test alone can fail for its own inputs (a
  near tie in top-k, a value at the tolerance's edge), and then anything unique to it
  "separates" it;
- the rule must be the only one of its kind that fits. The lesson's case fields are
  confounded (the one K = E case of a part is also its one case with N = 7), so
  when several rules fit the same split the cases cannot say which one matters.
  Kinds are ranked: first the boundaries code branches on (two fields equal, such as
  K = E; a size of 1; which test; an argument given or not), then one value or a
  threshold, then every value but one. The best-ranked rule is stated alone when it
  is the only one of its rank (a boundary wins over the coincidences of its case);
  when two fit at that rank, nothing is said. No list of co-features is ever made.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import TypeGuard

MIN_SIDE = 2  # tests (or rows) on each side before a rule is stated: see above
RELATIONS = {"same": "=", "differs": "≠"}  # ops whose value is another field's name


@dataclass(frozen=True)
class Rule:
    """`field op value`: op is eq, ne, ge, le, has (a list-valued field holds it), or
    same / differs (the field equals / differs from the field named by `value`)."""
    field: str
    op: str
    value: object

    def holds(self, fields: dict[str, object]) -> bool | None:
        """Does a case satisfy the rule? None when it has no such field."""
        if self.field not in fields:
            return None
        v = fields[self.field]
        if self.op in RELATIONS:
            if self.value not in fields:
                return None
            return (v == fields[self.value]) == (self.op == "same")
        if self.op == "has":
            return isinstance(v, (list, tuple)) and self.value in v
        if isinstance(v, (list, tuple)):
            return False
        if self.op in ("ge", "le"):
            if not _number(v) or not _number(self.value):
                return False
            return v >= self.value if self.op == "ge" else v <= self.value
        return v == self.value if self.op == "eq" else v != self.value

    def to_dict(self) -> dict:
        return {"field": self.field, "op": self.op, "value": self.value}


def _number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _size(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _at_most(a: object, b: object) -> bool:
    return _size(a) and _size(b) and a <= b


def _key(v: object) -> object:
    """A hashable stand-in for a value (lists compare as tuples)."""
    return tuple(v) if isinstance(v, list) else (type(v).__name__, v)


def _one_field(name: str, failing: list[object], passing: list[object],
               members: bool) -> Rule | None:
    """The simplest rule on one field, in the order eq, ge/le, ne, and (for `members`:
    list-valued labels such as a token's experts) has."""
    fail = {_key(v): v for v in failing}
    ok = {_key(v): v for v in passing}
    if fail.keys() & ok.keys():
        return None
    if all(v is None for v in passing) and all(v is not None for v in failing):
        return Rule(name, "ne", None)  # fails whenever it is given (a cache, a scaling)
    lists = [v for v in [*failing, *passing] if isinstance(v, (list, tuple))]
    if lists and members:
        if len(lists) != len(failing) + len(passing):
            return None
        shared = set.intersection(*(set(v) for v in lists[:len(failing)]))
        for value in sorted(shared, key=repr):
            if not any(value in v for v in lists[len(failing):]):
                return Rule(name, "has", value)
        return None
    if len(fail) == 1:
        return Rule(name, "eq", failing[0])
    threshold = None
    fail_n, pass_n = [v for v in failing if _number(v)], [v for v in passing if _number(v)]
    if len(fail_n) == len(failing) and len(pass_n) == len(passing):
        if min(fail_n) > max(pass_n):
            threshold = Rule(name, "ge", min(fail_n))
        elif max(fail_n) < min(pass_n):
            threshold = Rule(name, "le", max(fail_n))
    if len(ok) == 1 and not _adjacent(threshold, passing[0]):
        return Rule(name, "ne", passing[0])  # "every N except 1" reads better than N >= 5
    return threshold


def _adjacent(rule: Rule | None, passing: object) -> bool:
    """A threshold next to the one passing integer (K >= 2 beside K = 1)."""
    return rule is not None and isinstance(passing, int) and isinstance(rule.value, int) \
        and abs(rule.value - passing) == 1


def _relations(cases: list[tuple[dict[str, object], bool]]) -> list[Rule]:
    """`a = b` (or `a ≠ b`) between two whole-number fields that every case has, where
    a ≤ b in every case (a bound, as K ≤ E) and a = b in some: the rule when exactly
    the failing cases, or exactly the passing ones, have a = b."""
    names = list(dict.fromkeys(k for f, _ in cases for k in f))
    sizes = [n for n in names if all(n in f and _size(f[n]) for f, _ in cases)]
    found = []
    for a, b in permutations(sizes, 2):
        if not all(_at_most(f[a], f[b]) for f, _ in cases):
            continue
        equal = [(f[a] == f[b], failed) for f, failed in cases]
        if {e for e, _ in equal} != {True, False}:
            continue
        if all(e == failed for e, failed in equal):
            found.append(Rule(a, "same", b))
        elif all(e != failed for e, failed in equal):
            found.append(Rule(a, "differs", b))
    return found


def _rank(rule: Rule) -> int:
    """0: a boundary code branches on (two fields equal, a size of 1, which test, given
    or not); 1: one value, a threshold, a label; 2: every value but one."""
    if rule.op in RELATIONS or rule.field == "test" or rule.value is None:
        return 0
    if _size(rule.value) and (rule.value == 1 and rule.op in ("eq", "ne", "le")
                              or rule.value == 2 and rule.op == "ge"):
        return 0
    return 2 if rule.op == "ne" else 1


def rules(cases: list[tuple[dict[str, object], bool]], members: bool = False) -> list[Rule]:
    """The one rule the cases support (module docstring), as a list of one; empty
    when fewer than MIN_SIDE cases failed or passed, when no rule separates them, or
    when two of the best rank do. `members`: a list value is a set of labels (`has`
    rules); otherwise it is one value (a case's shape), and relations between fields
    are rules too."""
    failing = [f for f, failed in cases if failed]
    passing = [f for f, failed in cases if not failed]
    if len(failing) < MIN_SIDE or len(passing) < MIN_SIDE:
        return []
    names = list(dict.fromkeys(k for f, _ in cases for k in f))
    found = [] if members else _relations(cases)
    for name in names:
        if not all(name in f for f in failing):
            continue
        have = [f[name] for f in passing if name in f]
        if have:
            rule = _one_field(name, [f[name] for f in failing], have, members)
            if rule is not None:
                found.append(rule)
    if not found:
        return []
    best = min(map(_rank, found))
    top = [r for r in found if _rank(r) == best]
    return top if len(top) == 1 else []
