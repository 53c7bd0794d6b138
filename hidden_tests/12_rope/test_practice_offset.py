"""Practice case for part "offset" (0 points): shipped with its recorded reference
result, so its seed is one no graded case uses. Its parameters and id are named as the
graded tests' are."""
import pytest

from _rope_common import check_offset


@pytest.mark.parametrize("end,dim,seed,seq_length,past", [(32, 8, 10_013, 4, [1, 6, 2, 8])],
                         ids=["past6"])
def test_practice_rows(student, reference, check, end, dim, seed, seq_length, past):
    args = dict(end=end, dim=dim, seed=seed, seq_length=seq_length, past=past)
    check_offset(check, student.call("offset", **args), reference.call("offset", **args))
