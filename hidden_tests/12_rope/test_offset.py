"""Part "offset": the table rows of the new tokens, as MiniMindModel.forward slices
them: from position 0 without a cache, from the cache's length with one (the cache
is [B, past_len, H_kv, D]; past_len, batch and heads all differ, so reading the
wrong axis shows), for a prompt, a decoding step, MiniMind's 32k table and a slice
that ends on the table's last row."""
import pytest

from _rope_common import check_offset

# (table rows, dim, seed, seq_length, cache shape [B, past_len, H_kv, D] or None)
CASES = [
    (64, 8, 130, 7, None),
    (64, 8, 131, 3, [2, 5, 3, 8]),
    (32768, 96, 132, 16, [1, 32000, 4, 96]),
    (2048, 96, 133, 1, [1, 99, 4, 96]),
    (512, 64, 134, 12, [3, 500, 8, 64]),
]
IDS = ["no-cache", "past5", "d96-past32000", "decode-step", "ends-on-last-row"]


@pytest.mark.parametrize("end,dim,seed,seq_length,past", CASES, ids=IDS)
def test_rows(student, reference, check, end, dim, seed, seq_length, past):
    args = dict(end=end, dim=dim, seed=seed, seq_length=seq_length, past=past)
    check_offset(check, student.call("offset", **args), reference.call("offset", **args))
