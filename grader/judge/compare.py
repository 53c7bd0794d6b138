"""Numeric comparison of a student's results with the reference's.

`Checks` is the soft-assertion recorder hidden tests use: every comparison is
recorded with its numbers (max absolute and relative difference, where the worst
element is, shapes, dtypes, the tolerance), the test goes on, and the plugin fails
the test at the end if any check failed. A graded case's checks record less: the
verdict, shapes, dtypes, the tolerance and how many values are beyond it, no fact of
one element (`disclosed` says why). Hidden tests never see student objects, only
tensors decoded on the trusted side.

Not run/compare_class.py, which compares a class's submissions with each other as
text (`grader similarity`): this one compares one student's tensors with the
reference's, by the checks' rule (closeness.py)."""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import torch

from grader.judge import disclosed, structure
from grader.judge.closeness import abs_error, allowance, rel_error
from grader.text.strings import Said, Text, message_fields, restored, say
from grader.text.shown import NON_FINITE

HEATMAP_ROWS, HEATMAP_COLS = 16, 32
# float32 keeps 2^-24 relative per step; a float32 softmax inside float64 code (lesson
# 13's router, forward and gradients) stays within 1.2e-6 of the result's largest
# magnitude over 20 seeds; the lessons' smallest formula mistakes are 1e-2 and above
PRECISION = 2e-6


@dataclass
class Check:
    name: str
    passed: bool
    message: str = ""
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    atol: float | None = None
    rtol: float | None = None
    where: list[int] | None = None
    got_value: float | None = None
    ref_value: float | None = None
    got_shape: list[int] | None = None
    ref_shape: list[int] | None = None
    got_dtype: str | None = None
    ref_dtype: str | None = None
    outside: int | None = None      # elements beyond the tolerance, of `size`
    size: int | None = None
    heatmap: list[list[float]] | Later | None = None
    structure: dict | None = None   # what the difference looks like (grader/judge/structure.py)
    axes: dict | None = None        # {"rows": Text, "cols": Text}: what a heatmap's axes are
    # a failing float64 check whose every value is within float32's precision of the
    # reference's (PRECISION of its largest magnitude, over the atol): a float32 step
    precision: bool | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The check as its record keeps it: `message` in English, and
        `message_texts` each language's when the message was said in all of them."""
        out = {k: v for k, v in vars(self).items() if v is not None and v != {} and v != ""}
        if isinstance(self.message, Said):
            out.update(message_fields(self.message))
        return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _drawable(err: np.ndarray | torch.Tensor) -> bool:
    return err.ndim >= 2 and _numel(err) >= 4


def _numel(err: np.ndarray | torch.Tensor) -> int:
    return err.size if isinstance(err, np.ndarray) else err.numel()


class Later:
    """A check's heatmap, not drawn yet: most failing checks' never are (a page draws
    one per card shown, `feedback.draw_shown`), and pooling each one's error into
    Python floats was a sixth of a mistaken student's trusted-side time. Truthy, as a
    drawn heatmap is."""

    __slots__ = ("error",)

    def __init__(self, error: np.ndarray):
        self.error = error

    def value(self) -> list[list[float]] | None:
        return _heatmap(torch.from_numpy(self.error))


def _heatmap(err: torch.Tensor) -> list[list[float]] | None:
    """The error over tokens x hidden units, max-pooled to a small grid for a picture."""
    if not _drawable(err):
        return None
    grid = err.reshape(-1, err.shape[-1]).float()
    rows, cols = min(HEATMAP_ROWS, grid.shape[0]), min(HEATMAP_COLS, grid.shape[1])
    pooled = torch.nn.functional.adaptive_max_pool2d(grid[None, None], (rows, cols))[0, 0]
    # NaN and inf alike become the sentinel (an infinite error is not float32's max)
    # (.tolist() first: the same floats, without a 0-d tensor per value); kept to the 6
    # significant digits a page shows of a cell (`shown.num`): 12 decimals were 40 % of
    # a mistaken student's results file
    return [[float(f"{v:.6g}") if math.isfinite(v) else NON_FINITE
             for v in row] for row in pooled.tolist()]


def _float64(t: torch.Tensor) -> np.ndarray:
    """The tensor as float64 numpy: on arrays this small, numpy's per-operation cost
    is a fraction of torch's, and a comparison is a dozen operations. A reference
    tensor (the same for every student) keeps its conversion."""
    cached = getattr(t, "_grader_f64", None)
    if cached is None:
        cached = t.detach().to(torch.float64).numpy()
        cached.flags.writeable = False
        try:
            # (a cache kept on the tensor itself: torch's stubs declare no such attribute)
            t._grader_f64 = cached  # type: ignore[attr-defined]
        except AttributeError:
            pass
    return cached


def _allowed(ref: torch.Tensor, atol: float, rtol: float) -> np.ndarray:
    """`allowance` of a reference tensor, kept on it per tolerance like its conversion:
    the same for every student, and a third of a passing check's cost."""
    kept = getattr(ref, "_grader_allowed", None)
    if kept is None:
        kept = {}
        try:
            # (a cache kept on the tensor itself: torch's stubs declare no such attribute)
            ref._grader_allowed = kept  # type: ignore[attr-defined]
        except AttributeError:
            pass
    found = kept.get((atol, rtol))
    if found is None:
        found = kept[atol, rtol] = allowance(_float64(ref), atol, rtol)
        found.flags.writeable = False
    return found


def _alternatives(alt) -> list:
    alt = alt() if callable(alt) else alt
    return list(alt) if isinstance(alt, (list, tuple)) else [alt]


class Checks:
    """Records checks for one test; `failures` decides its outcome."""

    def __init__(self, tolerances: dict, pictures: bool = True, later: bool = False,
                 described: dict | None = None, practice: bool = False):
        self.tolerances = tolerances
        # a practice case's inputs ship with its reference's results: its checks keep
        # every number; a graded case's (the default) keep none of one element
        self.practice = practice
        # failing checks' structures by content, kept by the caller for a whole class
        self.described: dict = {} if described is None else described
        self.draw = pictures  # replays only need verdicts: no heatmaps to draw
        self.later = later  # heatmaps as `Later`, drawn once a page is known to show them
        self.items: list[Check] = []
        self.pictures: list[dict] = []

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.items if not c.passed]

    def _tol(self, tol: str | None, dtype: torch.dtype):
        key = tol or str(dtype).removeprefix("torch.")
        if key not in self.tolerances:
            raise KeyError(f"no tolerance named {key!r} in course.yml")
        return self.tolerances[key]

    def _add(self, check: Check) -> bool:
        self.items.append(check)
        return check.passed

    def counts(self, name: Text, labels: list[Text], got: list[float],
               ref: list[float]) -> None:
        """Not a check: counts to draw side by side (e.g. how many tokens each expert got).
        The name and labels are text, or {language: text} for the pages' languages.
        A graded case keeps none: which labels' counts differ from the reference's is a
        fact of one element each."""
        if not self.practice:
            return
        self.pictures.append({"name": name,
                              "labels": [x if isinstance(x, dict) else str(x) for x in labels],
                              "got": [float(x) for x in got], "ref": [float(x) for x in ref]})

    def true(self, name: str, ok: bool, message: Text) -> bool:
        """`message`: text, or {language: text} (with "en") for the pages' languages."""
        return self._add(Check(name, bool(ok), "" if ok else restored(message)))

    def shape(self, name: str, got, expected: tuple) -> bool:
        if not isinstance(got, torch.Tensor):
            return self._add(Check(name, False, say("check_not_tensor", type=type(got).__name__)))
        ok = tuple(got.shape) == tuple(expected)
        return self._add(Check(name, ok, "" if ok else
                               say("check_shape", got=list(got.shape), ref=list(expected)),
                               got_shape=list(got.shape), ref_shape=list(expected)))

    def equal(self, name: str, got, expected, message: str = "") -> bool:
        ok = got == expected
        return self._add(Check(name, bool(ok), "" if ok else
                               message or say("check_equal", got=repr(got), ref=repr(expected))))

    def close(self, name: str, got, ref: torch.Tensor, tol: str | None = None,
              alt=None, alt_note: Text = "", rows: dict | None = None,
              axes: dict | None = None) -> bool:
        """`got` within tolerance of `ref`, or else of one of `alt`: a tensor, a list of
        them, or a callable giving either, called only when `ref` does not match.
        Alternatives are trusted results (e.g. the reference with mistakes the grader
        established elsewhere), never the student's own. `rows` labels each row of
        `ref` (e.g. {"expert": topk_idx}): what the wrong rows share is then said.
        `axes` names what the heatmap's rows (leading dims, flattened) and columns (the
        last dim) are, {"rows": Text, "cols": Text}: the lesson knows, the grader does not."""
        check = self._compare(name, got, ref, tol)
        if not check.passed and self.draw and isinstance(got, torch.Tensor) \
                and not (got.is_complex() or got.dtype == torch.bool):
            t = self._tol(tol, ref.dtype)
            labels = {k: v.tolist() if isinstance(v, torch.Tensor) else list(v)
                      for k, v in (rows or {}).items()}
            check.structure = described(self.described, got, ref, t.atol, t.rtol,
                                        labels)
            if not self.practice:
                check.structure = disclosed.claim(check.structure)
        if not check.passed and alt is not None:
            for candidate in _alternatives(alt):
                if isinstance(candidate, torch.Tensor):
                    second = self._compare(name, got, candidate, tol)
                    if second.passed:
                        second.message = restored(alt_note)
                        check = second
                        break
        if check.heatmap is not None and axes:
            check.axes = {k: v for k, v in axes.items() if k in ("rows", "cols")}
        return self._add(check)

    def grad(self, name: str, got, ref, tol: str | None = None,
             alt=None, alt_note: Text = "", rows: dict | None = None,
             axes: dict | None = None) -> bool:
        """A gradient: None (never reached) equals zeros, on either side and in `alt`."""
        if ref is None and got is None:
            return self._add(Check(name, True, extra={"note": "no gradient on either side"}))
        if not isinstance(ref, torch.Tensor) and not isinstance(got, torch.Tensor):
            return self._add(Check(name, False, say("check_not_tensor", type=type(got).__name__)))
        ref = ref if isinstance(ref, torch.Tensor) else torch.zeros_like(got)
        got = torch.zeros_like(ref) if got is None else got
        zeros = (lambda: [torch.zeros_like(ref) if a is None else a
                          for a in _alternatives(alt)]) if alt is not None else None
        return self.close(name, got, ref, tol, alt=zeros, alt_note=alt_note, rows=rows,
                          axes=axes)

    def grads(self, name: str, got: dict, ref: dict, tol: str | None = None,
              alt=None, alt_note: Text = "") -> bool:
        """Gradients by parameter name; a missing or None gradient equals zeros. `alt`
        gives dicts like `ref` (resolved once, only if some gradient differs)."""
        if not isinstance(got, dict):
            return self._add(Check(name, False, say("check_no_grads")))
        resolved: list | None = None

        def alts(key: str) -> list:
            nonlocal resolved
            if resolved is None:
                resolved = [a for a in _alternatives(alt) if isinstance(a, dict)]
            return [a.get(key) for a in resolved]

        ok = True
        for key, r in sorted(ref.items()):
            one = (lambda k=key: alts(k)) if alt is not None else None
            ok &= self.grad(f"{name}[{key}]", got.get(key), r, tol, alt=one, alt_note=alt_note)
        return ok

    def _compare(self, name: str, got, ref: torch.Tensor, tol: str | None) -> Check:
        t = self._tol(tol, ref.dtype)
        base = Check(name, False, atol=t.atol, rtol=t.rtol, ref_shape=list(ref.shape),
                     ref_dtype=str(ref.dtype).removeprefix("torch."))
        if not isinstance(got, torch.Tensor):
            base.message = say("check_not_tensor", type=type(got).__name__)
            return base
        base.got_shape = list(got.shape)
        base.got_dtype = str(got.dtype).removeprefix("torch.")
        if tuple(got.shape) != tuple(ref.shape):
            base.message = say("check_shape", got=list(got.shape), ref=list(ref.shape))
            return base
        if got.is_complex() or got.dtype == torch.bool:
            base.message = say("check_dtype", got=base.got_dtype, ref=base.ref_dtype)
            return base
        if got.dtype == ref.dtype and torch.equal(got, ref):
            # Equal element for element (equal infinities too): each error is 0 by
            # closeness's rule, so the check passes with 0 as its largest difference,
            # as the comparison below would find at ten times the cost. (A NaN equals
            # no NaN here: such a pair takes the comparison.)
            base.passed = True
            if self.practice:
                base.max_abs_diff = 0.0
            return base
        g, r = _float64(got), _float64(ref)
        err = abs_error(g, r)
        allowed = _allowed(ref, t.atol, t.rtol)
        base.passed = bool((err <= allowed).all())
        if not err.size:
            if self.practice:
                base.max_abs_diff = 0.0
            return base
        largest = _finite(float(err.max()))
        if self.practice:
            base.max_abs_diff = largest
        if base.passed:
            # A passed check's record keeps its name and verdict (`feedback.stored`), and
            # a practice test the largest difference: where it is, and how far relative,
            # no reader asks of a pass (a third of a correct student's comparisons' time)
            return base
        # no number of the reference's in a message: a graded case's is shown
        base.outside, base.size = int((~(err <= allowed)).sum()), int(err.size)
        base.message = say("check_beyond", n=base.outside, m=base.size,
                           atol=f"{t.atol:g}", rtol=f"{t.rtol:g}") \
            if largest is not None else say("check_nonfinite")
        if base.ref_dtype == "float64" and largest is not None:
            # one verdict over the whole result, as `outside` is: no element's figure
            # (against the result's scale: a gradient's small elements carry the
            # rounding of its large ones)
            base.precision = bool(err.max() <= np.abs(r).max() * PRECISION + t.atol)
        if not self.practice:
            return base  # a graded case: no element's place, values or map
        worst = int(np.argmax(err - allowed))
        base.max_rel_diff = _finite(float(rel_error(err, r).max()))
        base.where = [int(i) for i in np.unravel_index(worst, err.shape)]
        base.got_value = _finite(float(g.flat[worst]))
        base.ref_value = _finite(float(r.flat[worst]))
        if self.draw and self.later:
            base.heatmap = Later(err) if _drawable(err) else None
        elif self.draw:
            base.heatmap = _heatmap(torch.from_numpy(err))
        return base


K = TypeVar("K")
V = TypeVar("V")
KEPT = 4096  # what a cache by content keeps at most: a worker's memory stays flat
# whatever the class's mistakes


def kept_by_content(cache: dict[K, V], key: K, make: Callable[[], V]) -> V:
    """`make()` for `key`, made once while `cache` keeps it (at most `KEPT` entries, the
    oldest dropped first), and copied out: a caller may change what it gets. For what
    depends on content alone (students with the same mistake give the same numbers)."""
    if key not in cache:
        if len(cache) >= KEPT:
            del cache[next(iter(cache))]
        cache[key] = make()
    return copy.deepcopy(cache[key])


def described(cache: dict, got: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
              labels: dict) -> dict | None:
    """`structure.describe` of a failing check, kept in `cache` by the check's numbers
    and tolerance (`kept_by_content`)."""
    from grader.judge.reference import request_key  # the one content hash (it imports yaml)

    key = request_key("structure", {"got": got, "ref": ref, "atol": atol, "rtol": rtol,
                                    "labels": labels})
    return kept_by_content(cache, key, lambda: structure.describe(
        _float64(got), _float64(ref), atol, rtol, labels))
