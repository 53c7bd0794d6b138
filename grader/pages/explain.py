"""The page's sentences for what the grader found beyond known mistakes: which cases
fail (contrast), what a failing check's difference looks like (structure), and that a
composite part's own parts failed first. Built from the record (trusted facts) at
render time, in the page's language; every string comes from templates/i18n.yml."""
from __future__ import annotations

from fractions import Fraction

from grader.judge import contrast, disclosed
from grader.record import TestRecord
from grader.text.strings import check_label, in_language

OPS = {"eq": "=", "ne": "≠", "ge": "≥", "le": "≤", **contrast.RELATIONS}
CLAIMS_AT_TOP = 2   # distinct structure claims repeated at the top of a part
TEST = "test"       # the case field naming the test function


def _value(v: object) -> str:
    if isinstance(v, float):
        return str(v)  # as the test id writes it: coef=1.0
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return str(v)


def rule_text(rule: dict) -> str:
    """`K ≥ 2`, `norm_topk_prob = False`; the test function by its name alone."""
    if rule["field"] == TEST and rule["op"] == "eq":
        return _value(rule["value"])
    return f"{rule['field']} {OPS.get(rule['op'], rule['op'])} {_value(rule['value'])}"


def case_fields(test: TestRecord) -> dict[str, object]:
    """A test record's case ([name, value] pairs, in the lesson's order) as a dict."""
    return {p[0]: p[1] for p in test.case if len(p) == 2 and isinstance(p[0], str)}


def precision_only(tests: list[TestRecord]) -> bool:
    """Every failing test fails only float64 checks, each by less than float32's
    precision (`Check.precision`): the part's whole failing set is a precision matter."""
    failing = [x for x in tests if not x.passed]
    if not failing:
        return False
    checks = [c for x in failing for c in x.checks if isinstance(c, dict) and not c.get("passed")]
    return bool(checks) and all(not x.error for x in failing) \
        and all(c.get("precision") is True for c in checks)


def precision_sentences(tests: list[TestRecord], t: dict[str, str]) -> list[str]:
    """The precision finding, where it explains every failing test (said first)."""
    return [t["finding_precision"]] if precision_only(tests) else []


def contrast_sentences(tests: list[TestRecord], t: dict[str, str]) -> list[str]:
    """The one rule that separates a part's failing tests from its passing ones, if
    the cases support one (grader/judge/contrast.py); never a list of co-features."""
    cases = [(case_fields(x), not x.passed) for x in tests]
    found = [r.to_dict() for r in contrast.rules(cases)]
    if not found:
        return []
    rule = found[0]
    if rule["field"] == TEST and rule["op"] == "eq":
        return [t["contrast_test"].format(value=_value(rule["value"]))]
    if rule["field"] == TEST and rule["op"] == "ne":  # "the tests with test = …" said nothing
        return [t["contrast_test_except"].format(value=_value(rule["value"]))]
    if rule["op"] == "ne" and rule["value"] is None:
        return [t["contrast_given"].format(field=rule["field"])]
    if rule["op"] == "eq" and rule["value"] is None:  # a case field's None: not given
        return [t["contrast_default"].format(field=rule["field"])]
    if rule["op"] == "ne":
        return [t["contrast_except"].format(field=rule["field"], value=_value(rule["value"]))]
    if rule["op"] == "differs":
        return [t["contrast_only"].format(rule=rule_text({**rule, "op": "same"}))]
    return [t["contrast_when"].format(rule=rule_text(rule))]


def _fraction(value: object) -> str:
    """A factor as structure.py found it, a simple fraction: `2`, `0.5`, `1/3`."""
    if not isinstance(value, (int, float)):
        return str(value)
    f = Fraction(value).limit_denominator(64)
    if f.denominator == 1:
        return str(f.numerator)
    return str(float(f)) if len(str(float(f))) <= 6 else f"{f.numerator}/{f.denominator}"


def _rows(rows: list) -> str:
    return ", ".join(str(r) for r in rows)


def structure_text(claim: dict, t: dict[str, str]) -> str:
    """One structure claim (grader/judge/structure.py) as a sentence; "" for an unknown kind.
    A graded case's claim names no rows or elements (`disclosed.claim`): its counts."""
    kind = claim.get("kind")
    if kind == "nonfinite" and "where" not in claim:
        return t["s_nonfinite_count"].format(count=claim["count"], total=claim["total"],
                                             value=claim["value"])
    if kind == "nonfinite":
        return t["s_nonfinite"].format(count=claim["count"], total=claim["total"],
                                       value=claim["value"], where=_rows(claim["where"]))
    if kind in ("zeros", "sign", "transpose"):
        return t[f"s_{kind}"]
    if kind == "factor":
        return t["s_factor"].format(factor=_fraction(claim["factor"]))
    if kind == "shift":
        return t["s_shift"].format(shift=_value(claim["shift"]))
    if kind == "permutation" and "moved" not in claim:
        return t["s_permutation_count"].format(count=claim["count"], total=claim["total"])
    if kind == "permutation":
        moved = ", ".join(t["s_moved"].format(i=i, j=j) for i, j in claim["moved"])
        more = "…" if claim["count"] > len(claim["moved"]) else ""
        return t["s_permutation"].format(moved=moved + more, count=claim["count"],
                                         total=claim["total"])
    if kind == "rows":
        rows = claim.get("rows")
        more = "…" if rows is not None and claim["count"] > len(rows) else ""
        text = t["s_rows"].format(count=claim["count"], total=claim["total"],
                                  rows=_rows(rows) + more) if rows is not None else \
            t["s_rows_count"].format(count=claim["count"], total=claim["total"])
        for rule in claim.get("shared") or []:
            text += ("" if text.endswith("。") else " ") + (t["s_rows_has"].format(field=rule["field"], value=_value(rule["value"]))
                           if rule["op"] == "has" else
                           t["s_rows_when"].format(rule=rule_text(rule)))
        return text
    return ""


def structure_at_top(failing: list[TestRecord], t: dict[str, str]) -> list[tuple[int, str]]:
    """The distinct structure claims of a part's failing checks that reach the most
    failing tests (CLAIMS_AT_TOP of them), each with where it was first seen and its
    reach: how many failing tests have a failing check it describes."""
    seen: dict[str, str] = {}
    tests: dict[str, set[str]] = {}
    for test in failing:
        for check in test.checks:
            claim = check.get("structure") if isinstance(check, dict) else None
            claim = claim if test.practice else disclosed.claim(claim)
            text = structure_text(claim, t) if isinstance(claim, dict) else ""
            if text and text not in seen:
                seen[text] = t["claim_in"].format(test=test.name,
                                                  check=check_label(str(check.get("name", "")), t),
                                                  claim=text)
            if text:
                tests.setdefault(text, set()).add(test.name)
    return by_reach([(len(tests[text]), said) for text, said in seen.items()])[:CLAIMS_AT_TOP]


def by_reach(found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A part's findings (reach, sentence) in the order every surface lists them: by
    how many of the part's failing tests each explains, the widest first, ties in the
    order given (issue 54: a dtype note that reached the float64 tests alone came
    before a claim that held in every failing test)."""
    return sorted(found, key=lambda f: -f[0])


def answer_reach(finding: dict, failing: list[TestRecord]) -> int:
    """How many failing tests a question's finding explains: one that held on every
    input asked is about the function, so all of them; a dtype finding is about
    float64 inputs, so the failing tests whose case is float64."""
    if finding.get("kind") == "dtype":
        return sum(1 for x in failing if case_fields(x).get("dtype") == "float64")
    return len(failing)


def answer_text(finding: dict, t: dict[str, str]) -> str:
    """One finding of grader/judge/questions.py as a sentence; "" for an unknown kind."""
    kind = finding.get("kind")
    if kind not in ("ignores", "rows", "earlier", "dtype"):
        return ""
    return t[f"q_{kind}"].format(function=finding.get("function", ""),
                                 argument=finding.get("argument", ""),
                                 output=finding.get("output", ""),
                                 dtype=finding.get("dtype", ""))


def stand_in_sentences(stand_in: dict | None, t: dict[str, str]) -> list[str]:
    """What a composite part's stand-in round found (grader/judge/standin.py): its verdict
    only, never what the student's code printed or raised in it."""
    if not stand_in or not stand_in.get("parts"):
        return []
    parts = [str(p) for p in stand_in["parts"]]
    them = t["composite_them_one" if len(parts) == 1 else "composite_them_many"]
    key = "stand_in_excused" if stand_in.get("passed") else "stand_in_not_excused"
    return [t[key].format(parts=", ".join(parts), them=them)]


def earlier_sentences(earlier: dict | None, t: dict[str, str]) -> list[str]:
    """Where an assembly lesson's part got its numbers (grader/judge/earlier.py): a
    wiring part with the grader's pieces; the own-code part with which of the
    student's earlier pieces, and why any other was stood in for."""
    if not earlier:
        return []
    if earlier.get("wiring"):
        return [t["assembly_wiring"].format(names=", ".join(map(str, earlier["wiring"])))]
    pieces = [p for p in earlier.get("pieces") or [] if isinstance(p, dict)]
    own = [f"{p.get('name')} ({t['assembly_lesson'].format(lesson=p.get('lesson'))})"
           for p in pieces if p.get("own")]
    said = [t["assembly_own"].format(names=", ".join(own))] if own else []
    for p in pieces:
        why = p.get("why")
        if p.get("own") or why not in ("lost", "no_file", "no_record", "changed", "unhashed"):
            continue
        mistakes = "; ".join(f"“{in_language(m, t['language_code'])}”"
                             for m in p.get("mistakes") or [] if isinstance(m, dict))
        said.append(t[f"assembly_{why}"].format(
            name=p.get("name"), lesson=p.get("lesson"),
            parts=", ".join(map(str, p.get("parts") or [])),
            mistake=t["assembly_mistake"].format(mistakes=mistakes) if mistakes else ""))
    return said


def composite_sentences(tests: list[TestRecord], failed_before: list[str],
                        explained: set[str], t: dict[str, str]) -> list[str]:
    """A composite part (its tests compare with `explained`) that failed, after parts
    of its own that failed too. A mistake no known one explains is not forgiven here:
    wherever it changes this part's results it costs points here as well (said first,
    as a rule, not as the cause of these failures, which the grader cannot establish).
    A known mistake that was named costs none here (this part is compared with the
    reference carrying it): said so, since the failures here come from something else."""
    failing = any(not x.passed for x in tests)
    if not failing or not failed_before or not any(x.composite for x in tests):
        return []
    said = []
    for key, parts in (("composite_unexplained", [p for p in failed_before
                                                  if p not in explained]),
                       ("composite_explained", [p for p in failed_before if p in explained])):
        if parts:
            them = t["composite_them_one" if len(parts) == 1 else "composite_them_many"]
            said.append(t[key].format(parts=", ".join(parts), them=them))
    return said
