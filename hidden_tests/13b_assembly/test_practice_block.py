"""Practice case for part "block" (0 points): shipped with its recorded reference result,
so its seed is one no graded case uses. In a student bundle it runs on the
student's own lessons 10-13 files (`pieces`)."""
import pytest

from _asm_common import check_layer, config, layer_args, pieces


@pytest.mark.parametrize("case", ["practice"])
def test_practice_block(student, reference, check, case):
    args = layer_args(10_300, tuple(config().items()), "float32", "block", 1, 3, 0, True,
                      False, True)
    check_layer(check, student.call("block_forward", **args, **pieces(student)),
                reference.call("block_forward", **args))
