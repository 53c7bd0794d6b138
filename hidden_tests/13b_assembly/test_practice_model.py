"""Practice case for part "model" (0 points): shipped with its recorded reference result,
so its seed is one no graded case uses. In a student bundle it runs on the
student's own lessons 10-13 files (`pieces`)."""
import pytest

from _asm_common import check_model, config, model_args, pieces


@pytest.mark.parametrize("case", ["practice"])
def test_practice_model(student, reference, check, case):
    args = model_args(10_400, tuple(config(moe=True).items()), "float32", 1, 3, 2, True, True,
                      True)
    check_model(check, student.call("model_forward", **args, **pieces(student)),
                reference.call("model_forward", **args))
