"""Part "freqs": precompute_freqs_cis's two tables, shape, dtype and values, with
MiniMind's defaults (dim 96 = 768 / 8 heads, end 32768, base 1e6), explicit
arguments, and YaRN scaling: MiniMind's own (2048 -> 32k), one with an
attention_factor, some given only in part or not at all (MiniMind's defaults), two
whose end fits the original length (no correction then), and one whose ramp is
clamped at both ends (low = 0, high = dim/2 - 1).

Tables use the `rope_table` tolerance: correct float32 tables drift from each other
by ~3.7e-8 x position (1.2e-3 at 32767), far below any mistake on a long table
(>= 0.2); and float16 angles, the one mistake that is close on a short table, differ
by one float16 ulp between the sandbox and the trusted side, so the default float32
tolerance could not name it there."""
import pytest

from _rope_common import MINIMIND_YARN, check_freqs, freqs_args

SMALL_YARN = {"type": "yarn", "factor": 4, "original_max_position_embeddings": 1024,
              "beta_fast": 32, "beta_slow": 1, "attention_factor": 0.8}
PARTIAL_YARN = {"type": "yarn", "factor": 8, "original_max_position_embeddings": 512}
ALL_DEFAULTS = {"type": "yarn"}  # factor 16 from 2048: end 2048 fits, 2049 does not
# beta_fast so large that the ramp starts at dimension 0, beta_slow past the last pair
EDGES_YARN = {"type": "yarn", "factor": 2, "original_max_position_embeddings": 4096,
              "beta_fast": 1024, "beta_slow": 1}

# (dim, rows start:stop:step, end, rope_base, rope_scaling, tolerance); None = default
CASES = [
    (8, (0, 16, 1), 16, 1e4, None, "rope_table"),
    (64, (0, 256, 1), 256, None, None, "rope_table"),
    (96, (63, 32768, 64), None, None, None, "rope_table"),
    (96, (63, 32768, 64), 32768, 1e6, MINIMIND_YARN, "rope_table"),
    (64, (0, 4096, 16), 4096, 1e6, SMALL_YARN, "rope_table"),
    (32, (0, 1024, 4), 1024, None, MINIMIND_YARN, "rope_table"),
    (48, (5, 8192, 32), 8192, 1e5, PARTIAL_YARN, "rope_table"),
    (32, (0, 2048, 8), 2048, None, ALL_DEFAULTS, "rope_table"),
    (32, (0, 2049, 8), 2049, None, ALL_DEFAULTS, "rope_table"),
    (16, (0, 8192, 32), 8192, 500.0, EDGES_YARN, "rope_table"),
]
IDS = ["d8-e16-base1e4", "d64-e256", "d96-defaults", "d96-minimind-yarn",
       "d64-e4096-yarn-attn0.8", "d32-e1024-yarn-fits", "d48-e8192-partial-yarn",
       "d32-e2048-yarn-defaults", "d32-e2049-yarn-defaults", "d16-base500-yarn-ramp-edges"]


@pytest.mark.parametrize("dim,rows,end,rope_base,rope_scaling,tol", CASES, ids=IDS)
def test_tables(student, reference, check, dim, rows, end, rope_base, rope_scaling, tol):
    args = freqs_args(dim, rows, end, rope_base, rope_scaling)
    check_freqs(check, student.call("freqs", **args), reference.call("freqs", **args), tol)
