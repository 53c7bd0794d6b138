"""The contrast rule: it speaks when one field separates failing from passing cases,
and stays silent when none does, when too many do, or when nothing failed or passed."""
from grader.contrast import Rule, rules

# lesson 13's dispatch cases, as their records name them (seeds are not fields)
DISPATCH = [dict(test=t, E=e, K=k, dtype=d, N=n) for t, e, k, d, n in [
    ("test_dispatch", 4, 1, "float32", 10), ("test_dispatch", 4, 2, "float32", 10),
    ("test_dispatch", 3, 3, "float32", 10), ("test_dispatch", 8, 2, "float64", 3),
    ("test_dispatch", 8, 1, "float64", 1), ("test_dispatch", 3, 2, "float64", 12),
    ("test_gradients", 8, 2, "float64", 3), ("test_gradients", 3, 2, "float64", 12)]]


def _cases(fail) -> list[tuple[dict, bool]]:
    return [(c, bool(fail(c))) for c in DISPATCH]


def test_a_threshold_when_the_failing_values_are_all_above_the_passing_ones():
    assert rules(_cases(lambda c: c["K"] >= 2)) == [Rule("K", "ge", 2)]


def test_one_value_gives_equality_and_every_value_but_one_gives_inequality():
    # every float64 case here also has N other than 10: both are said, in field order
    assert rules(_cases(lambda c: c["dtype"] == "float64")) == [Rule("dtype", "eq", "float64"),
                                                                 Rule("N", "ne", 10)]
    assert Rule("E", "ne", 4) in rules(_cases(lambda c: c["E"] != 4))


def test_a_boolean_field_and_the_test_function_are_fields_too():
    cases = [({"norm_topk_prob": n, "K": k}, not n) for n in (True, False) for k in (1, 2)]
    assert rules(cases) == [Rule("norm_topk_prob", "eq", False)]
    only_grads = _cases(lambda c: c["test"] == "test_gradients")
    assert Rule("test", "eq", "test_gradients") in rules(only_grads)


def test_a_list_field_names_the_member_every_failing_row_has():
    rows = [({"expert": [0, 3]}, True), ({"expert": [3, 1]}, True), ({"expert": [1, 2]}, False),
            ({"expert": [0, 2]}, False)]
    assert rules(rows, members=True) == [Rule("expert", "has", 3)]
    assert rules(rows) == []  # a case's list is one value (a shape), not a set


def test_silent_when_no_field_separates_them():
    assert rules(_cases(lambda c: c["K"] == 2 and c["dtype"] == "float32"
                        or c["K"] == 1 and c["dtype"] == "float64")) == []
    rows = [({"expert": [0, 3]}, True), ({"expert": [1, 2]}, True), ({"expert": [0, 1]}, False)]
    assert rules(rows, members=True) == []


def test_silent_when_everything_or_nothing_failed():
    assert rules(_cases(lambda c: True)) == []
    assert rules(_cases(lambda c: False)) == []
    assert rules([]) == []


def test_silent_when_more_fields_fit_than_a_reader_can_weigh():
    # one failing case, unique in every field: it says nothing about which matters
    cases = [({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}, True),
             ({"a": 2, "b": 2, "c": 2, "d": 2, "e": 2}, False)]
    assert rules(cases) == []


def test_a_failing_case_without_the_field_rules_the_field_out():
    cases = [({"test": "test_layout"}, True), ({"test": "test_train", "K": 2}, True),
             ({"test": "test_train", "K": 1}, False)]
    assert all(r.field != "K" for r in rules(cases))


def test_every_rule_found_holds_for_every_failing_case_and_no_passing_one():
    for fail in (lambda c: c["K"] >= 2, lambda c: c["E"] != 4, lambda c: c["N"] <= 3,
                 lambda c: c["dtype"] == "float32", lambda c: c["test"] == "test_gradients"):
        cases = _cases(fail)
        found = rules(cases)
        assert found
        for rule in found:
            assert all(rule.holds(f) is failed for f, failed in cases)


def test_one_passing_value_far_from_the_failing_ones_reads_as_every_value_but_it():
    cases = [({"N": n}, n != 1) for n in (1, 5, 9, 16)]
    assert rules(cases) == [Rule("N", "ne", 1)]
    cases = [({"coef": c}, c != 1.0) for c in (5e-4, 0.1, 1.0)]
    assert rules(cases) == [Rule("coef", "ne", 1.0)]


def test_a_field_given_only_in_the_failing_cases():
    cases = [({"past": None, "seq_length": 7}, False), ({"past": [2, 5, 3, 8], "seq_length": 3},
                                                        True),
             ({"past": [1, 99, 4, 96], "seq_length": 1}, True)]
    assert rules(cases)[0] == Rule("past", "ne", None)  # given or not: said first
