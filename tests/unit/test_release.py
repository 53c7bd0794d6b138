"""Stub generation from nbgrader-style markers."""
import pytest

from grader.lesson.release import MarkerError, make_stub

SOLUTION = '''def f(x):
    """Doc."""
    ### BEGIN SOLUTION
    return x + 1
    ### END SOLUTION


class A:
    def g(self):
        if True:
            ### BEGIN SOLUTION
            return 2
            ### END SOLUTION
### BEGIN HIDDEN TESTS
assert f(1) == 2
### END HIDDEN TESTS
'''


def test_regions_become_not_implemented_at_the_markers_indentation():
    stub = make_stub(SOLUTION)
    assert "return x + 1" not in stub and "return 2" not in stub
    assert "    # YOUR CODE HERE\n    raise NotImplementedError()\n" in stub
    assert "            # YOUR CODE HERE\n            raise NotImplementedError()\n" in stub
    assert '"""Doc."""' in stub
    compile(stub, "stub", "exec")


def test_hidden_tests_are_removed():
    assert "assert f(1)" not in make_stub(SOLUTION)


@pytest.mark.parametrize("bad,line", [
    ("    ### BEGIN SOLUTION\n    x = 1\n", 1),
    ("    ### END SOLUTION\n", 1),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", 2),
])
def test_unbalanced_markers_name_the_line(bad, line):
    with pytest.raises(MarkerError, match=f"sol.py:{line}:"):
        make_stub(bad, "sol.py")
