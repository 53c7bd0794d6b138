"""Practice case for part "freqs" (0 points): shipped to students with its recorded
reference result, so it uses a configuration no graded case uses. Its parameters and id
are named as the graded tests' are."""
import pytest

from _rope_common import check_freqs, freqs_args


@pytest.mark.parametrize("dim,rows,end,rope_base,rope_scaling,tol",
                         [(16, (0, 32, 1), 32, 1e4, None, "rope_table")],
                         ids=["d16-e32-base1e4"])
def test_practice_tables(student, reference, check, dim, rows, end, rope_base, rope_scaling,
                         tol):
    args = freqs_args(dim, rows, end, rope_base, rope_scaling)
    check_freqs(check, student.call("freqs", **args), reference.call("freqs", **args), tol)
