"""diagnosis.explaining, the one rule for naming a known mistake, where the student's
code raised in some failing tests."""
from grader.judge.diagnosis import explaining

TESTS = {"test_a[K=1]", "test_a[K=2]", "test_a[K=3]"}


def test_a_raise_matched_by_its_variants_counts_beside_matching_results():
    """top-k + 1: its results are the student's where K < E, and both raise at K = E."""
    matches = {"test_a[K=1]": ["plus_one"], "test_a[K=2]": ["plus_one"],
               "test_a[K=3]": ["plus_one"]}
    assert explaining(TESTS, {"test_a[K=3]"}, matches, {"plus_one": TESTS},
                      ["plus_one"]) == ["plus_one"]


def test_a_raise_alone_names_nothing():
    """A mistake whose variant raises in every test it fails would be matched by code
    that raises the same type everywhere: where every failing test raised, none is
    named."""
    matches = {name: ["always_raises"] for name in TESTS}
    assert explaining(TESTS, set(TESTS), matches, {"always_raises": TESTS},
                      ["always_raises"]) == []
    assert explaining(TESTS, set(), matches, {"always_raises": TESTS},
                      ["always_raises"]) == ["always_raises"]  # results matched: named
