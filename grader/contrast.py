"""Contrast: the simplest rule over the case fields that separates failing from passing.

Given a part's tests as (case fields, failed), a rule on one field (`K >= 2`,
`norm_topk_prob = False`, `E != 4`, `test = test_gradients`) that holds for every
failing case and for no passing one says more than a list of test ids. The same
search over rows (a token's fields, such as the experts it was routed to) says what
the wrong rows of a tensor share. A rule is a fact about the cases, never a guess;
when no one-field rule fits, or more fields fit than a reader can weigh, nothing
is said.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_FIELDS = 4  # more fields that each fit: the cases can't say which one matters


@dataclass(frozen=True)
class Rule:
    """`field op value`: op is eq, ne, ge, le, or has (a list-valued field holds it)."""
    field: str
    op: str
    value: object

    def holds(self, fields: dict[str, object]) -> bool | None:
        """Does a case satisfy the rule? None when it has no such field."""
        if self.field not in fields:
            return None
        v = fields[self.field]
        if self.op == "has":
            return isinstance(v, (list, tuple)) and self.value in v
        if isinstance(v, (list, tuple)):
            return False
        if self.op in ("ge", "le"):
            if not _number(v):
                return False
            return v >= self.value if self.op == "ge" else v <= self.value
        return v == self.value if self.op == "eq" else v != self.value

    def to_dict(self) -> dict:
        return {"field": self.field, "op": self.op, "value": self.value}


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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
        shared = set.intersection(*(set(v) for v in failing))
        for value in sorted(shared, key=repr):
            if not any(value in v for v in passing):
                return Rule(name, "has", value)
        return None
    if len(fail) == 1:
        return Rule(name, "eq", failing[0])
    threshold = None
    if all(_number(v) for v in [*failing, *passing]):
        if min(failing) > max(passing):
            threshold = Rule(name, "ge", min(failing))
        elif max(failing) < min(passing):
            threshold = Rule(name, "le", max(failing))
    if len(ok) == 1 and not _adjacent(threshold, passing[0]):
        return Rule(name, "ne", passing[0])  # "every N except 1" reads better than N >= 5
    return threshold


def _adjacent(rule: Rule | None, passing: object) -> bool:
    """A threshold next to the one passing integer (K >= 2 beside K = 1)."""
    return rule is not None and isinstance(passing, int) and isinstance(rule.value, int) \
        and abs(rule.value - passing) == 1


def _rank(rule: Rule) -> int:
    """Simplest first: one value, a threshold, given or not, every value but one."""
    return {"eq": 0, "ge": 1, "le": 1, "has": 1}.get(rule.op, 2 if rule.value is None else 3)


def rules(cases: list[tuple[dict[str, object], bool]], members: bool = False) -> list[Rule]:
    """Every field's simplest separating rule, simplest first, then in the fields'
    order; empty when nothing failed or passed, when no field separates them, or when
    too many fields do. `members`: a list value is a set of labels (`has` rules);
    otherwise it is one value (a case's shape)."""
    failing = [f for f, failed in cases if failed]
    passing = [f for f, failed in cases if not failed]
    if not failing or not passing:
        return []
    names = list(dict.fromkeys(k for f, _ in cases for k in f))
    found = []
    for name in names:
        if not all(name in f for f in failing):
            continue
        have = [f[name] for f in passing if name in f]
        if have:
            rule = _one_field(name, [f[name] for f in failing], have, members)
            if rule is not None:
                found.append(rule)
    return sorted(found, key=_rank) if len(found) <= MAX_FIELDS else []
