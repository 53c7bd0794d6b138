"""Practice case for part "router" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses; its id names its
case's fields as the graded tests' ids do."""
import pytest

from _moe_common import RouteCase, check_route, route_args


@pytest.mark.parametrize("case", [RouteCase(4, 2, True, "float32", 10, 64, 10_002)])
def test_practice_route(student, reference, check, case):
    args = route_args(case.seed, case.dtype, case.N, case.E, case.H, case.K, case.norm_topk_prob)
    check_route(check, student.call("route", **args), reference.call("route", **args), case.E)
