"""The lesson's graded tests, run in-process with any trusted module as the student,
every numeric comparison summarised as it is made."""
from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from grader.judge import plugin as fixtures
from grader.judge.closeness import abs_error, rel_error
from grader.judge.compare import Check, Checks, _float64
from grader.config import Course
from grader.judge.reference import Caller

# The rtol values the advisor weighs (with the current one): per element, the error
# left over once rtol·|ref| is allowed decides the atol a tolerance needs.
RTOLS = (0.0, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
MIN_AXIS = 16  # shorter axes are too short to fit a drift along


@dataclass
class Compared:
    """One comparison's errors, summarised: what the advice needs, not the tensors."""
    test: str            # the test function, e.g. test_tables
    case: str            # its parameters' id, e.g. d96-defaults
    check: str           # the check's name
    key: str             # the tolerance key it used
    atol: float
    rtol: float
    eps: float           # the reference dtype's resolution at its largest value
    numel: int
    max_abs: float       # inf when shapes differ or values are not finite
    max_rel: float
    excess: dict[float, float]            # rtol -> max(err - rtol·|ref|)
    profiles: dict[int, np.ndarray] = field(default_factory=dict)  # axis -> max err by index


def _summary(err: np.ndarray, ref: np.ndarray, rtols: tuple[float, ...]) -> dict[float, float]:
    return {r: float(np.max(err - r * ref)) if err.size else 0.0 for r in rtols}


def _profiles(err: np.ndarray) -> dict[int, np.ndarray]:
    """The largest error at each index of every long enough axis."""
    out = {}
    for axis, n in enumerate(err.shape):
        if n >= MIN_AXIS:
            others = tuple(a for a in range(err.ndim) if a != axis)
            out[axis] = err.max(axis=others) if others else err.copy()
    return out


class Measuring(Checks):
    """`Checks` that also summarise every numeric comparison (`compared`)."""

    def __init__(self, tolerances: dict, test: str, case: str):
        super().__init__(tolerances, practice=True)  # the staff's tool: every number
        self.test, self.case = test, case
        self.compared: list[Compared] = []

    def _compare(self, name: str, got, ref: torch.Tensor, tol: str | None) -> Check:
        check = super()._compare(name, got, ref, tol)
        key = tol or str(ref.dtype).removeprefix("torch.")
        t = self.tolerances[key]
        rtols = tuple(sorted({*RTOLS, t.rtol}))
        r = ref.detach().to(torch.float64).abs().numpy()
        r = np.where(np.isnan(r), 0.0, r)  # a NaN reference allows atol alone, as in a check
        eps = (torch.finfo(ref.dtype).eps if ref.is_floating_point() else 0.0) * \
            float(r.max(initial=1.0))
        same = isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(ref.shape)
        if same:  # the grader's own rule: both NaN agree, any other NaN is inf
            err = abs_error(_float64(got), _float64(ref)).reshape(r.shape)
        self.compared.append(Compared(
            self.test, self.case, name, key, t.atol, t.rtol, eps, int(ref.numel()),
            max_abs=float(err.max(initial=0.0)) if same else np.inf,
            max_rel=float(rel_error(err, r).max(initial=0.0)) if same else np.inf,
            excess=_summary(err, r, rtols) if same else dict.fromkeys(rtols, np.inf),
            profiles=_profiles(err) if same else {}))
        return check


class _Collector:
    def __init__(self):
        self.items: list[pytest.Function] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = [i for i in session.items if isinstance(i, pytest.Function)]


def graded_tests(course: Course, key: str, select: str = "") -> list[pytest.Function]:
    """The lesson's graded tests, collected as the grading run collects them (only
    those `-k select` picks, if given)."""
    tests = course.path(course.lesson(key).tests)
    collector = _Collector()
    args = [str(tests), "-q", "--collect-only", "-m", "not practice", "--assert=plain",
            "--disable-plugin-autoload", "--rootdir", str(tests), "-c", "/dev/null",
            "-p", "no:cacheprovider", *(["-k", select] if select else [])]
    sink = io.StringIO()
    with redirect_stdout(sink), redirect_stderr(sink):
        code = pytest.main(args, plugins=[collector, fixtures])
    if code != pytest.ExitCode.OK or not collector.items:
        raise RuntimeError(f"the hidden tests of lesson {key} could not be collected "
                           f"(pytest exit {code}):\n{sink.getvalue()[-3000:]}")
    return collector.items


@dataclass
class Run:
    """What one student-in-place gave: its comparisons, and the tests it broke."""
    compared: list[Compared]
    raised: dict[str, str]  # test id -> the exception
    failed: set[str]        # tests with a failing check (any kind) or an exception


def run(items: list[pytest.Function], student, reference: Caller, tolerances: dict) -> Run:
    """Every graded test with `student` in the student's place (trusted code only)."""
    compared, raised, failed = [], {}, set()
    for item in items:
        case = getattr(getattr(item, "callspec", None), "id", "")
        checks = Measuring(tolerances, item.originalname, case)
        try:
            with torch.random.fork_rng():
                fixtures.replay(item, {"student": student, "reference": reference,
                                       "check": checks})
        except Exception as exc:  # noqa: BLE001 - a variant may break a test: reported
            raised[item.name] = f"{type(exc).__name__}: {str(exc)[:200]}"
        if item.name in raised or checks.failures:
            failed.add(item.name)
        compared += checks.compared
    return Run(compared, raised, failed)
