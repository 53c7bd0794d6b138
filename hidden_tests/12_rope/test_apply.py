"""Part "apply": apply_rotary_pos_emb on q [B, S, H, D] and k [B, S, H_kv, D] (GQA:
fewer k heads), rotated by the reference's tables: small and MiniMind-sized heads
(D 96, 8 q and 4 kv heads), positions up to 32767, one decoding step with YaRN
tables, float64 and bfloat16 activations (float32 tables: the result must be cast
back to q's and k's dtype), and the [B, H, S, D] layout with unsqueeze_dim=0."""
import pytest

from _rope_common import MINIMIND_YARN, apply_args, check_apply

# (seed, dtype, batch, heads, kv_heads, positions start:stop, table arguments, layout)
CASES = [
    (120, "float32", 2, 4, 2, (0, 5), dict(dim=8, end=16, rope_base=1e4), "bshd"),
    (121, "float64", 2, 4, 4, (3, 11), dict(dim=16, end=64), "bshd"),
    (122, "float32", 2, 8, 4, (32704, 32768), dict(dim=96), "bshd"),
    (123, "bfloat16", 2, 8, 4, (1000, 1016), dict(dim=96), "bshd"),
    (124, "float32", 1, 4, 2, (0, 6), dict(dim=32, end=64), "bhsd"),
    (125, "float32", 1, 8, 4, (2047, 2048), dict(dim=96, rope_scaling=MINIMIND_YARN), "bshd"),
    (126, "bfloat16", 1, 8, 4, (30000, 30032), dict(dim=96, rope_scaling=MINIMIND_YARN),
     "bshd"),
]
IDS = ["d8-float32", "d16-float64", "d96-pos32704-float32", "d96-bfloat16",
       "d32-bhsd-unsqueeze0", "d96-yarn-decode-step", "d96-yarn-pos30000-bfloat16"]


@pytest.mark.parametrize("seed,dtype,batch,heads,kv_heads,positions,freqs,layout", CASES,
                         ids=IDS)
def test_rotation(student, reference, check, seed, dtype, batch, heads, kv_heads,
                  positions, freqs, layout):
    args = apply_args(reference, seed, dtype, batch, heads, kv_heads, positions, freqs, layout)
    check_apply(check, student.call("apply", **args), reference.call("apply", **args))
