"""Practice case for part "router" (0 points). Shipped to students with its recorded
reference result, so its inputs come from a seed no graded case uses."""
from _moe_common import check_route, route_args


def test_practice_route(student, reference, check):
    args = route_args(10_002, "float32", 10, 4, 64, 2, True)
    check_route(check, student.call("route", **args), reference.call("route", **args), 4)
