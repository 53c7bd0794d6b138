"""Practice case for part "freqs" (0 points): shipped to students with its recorded
reference result, so it uses a configuration no graded case uses."""
from _rope_common import check_freqs, freqs_args


def test_practice_tables(student, reference, check):
    args = freqs_args(16, (0, 32, 1), end=32, rope_base=1e4)
    check_freqs(check, student.call("freqs", **args), reference.call("freqs", **args),
                "rope_table")
