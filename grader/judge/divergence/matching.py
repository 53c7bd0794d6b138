"""Whether a value of the student's is one the reference computes: within the
lesson's tolerance, in the same shape or another view of the same values."""
from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from grader.config import DEFAULT_TOLERANCES
from grader.inside import tracer
from grader.judge import closeness, trace_inputs
from grader.judge.divergence.untrusted import Event, Trace

_GRADIENT = re.compile(r".*grads?$")


@dataclass
class Tolerance:
    atol: float
    rtol: float


def tolerance(tols: dict, *dtypes: torch.dtype) -> Tolerance:
    """The lesson's tolerance for the least precise float dtype of the two."""
    names = [str(d).removeprefix("torch.") for d in dtypes if d.is_floating_point]
    for name in ("float16", "bfloat16", "float32", "float64"):
        if name in names and name in tols:
            return Tolerance(tols[name].atol, tols[name].rtol)
    if not names:
        return Tolerance(0.0, 0.0)
    t = tols.get("float32") or DEFAULT_TOLERANCES["float32"]
    return Tolerance(t.atol, t.rtol)


def near(a: torch.Tensor, b: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Per element, the checks' own rule (grader/judge/closeness.py), so the line a page
    names can never disagree with the verdict: a non-finite `b` is matched only by
    itself."""
    def array(t: torch.Tensor):
        return t.detach().cpu().double().numpy()
    return torch.from_numpy(closeness.near(array(a), array(b), tol.atol, tol.rtol))


def close(a: torch.Tensor, b: torch.Tensor, tol: Tolerance) -> bool:
    return bool(near(a, b, tol).all())


def same_values(s: torch.Tensor, r: torch.Tensor, tols: dict) -> bool:
    """`s` holds `r`'s values: in the same shape, flattened in another (a view), or
    with its dimensions permuted (a transpose)."""
    if s.numel() != r.numel() or s.numel() == 0:
        return False
    if s.is_floating_point() and r.is_floating_point() and s.dtype != r.dtype:
        return False  # the same numbers in another precision are another value
    tol = tolerance(tols, s.dtype, r.dtype)
    a, b = s.double().reshape(-1), r.double().reshape(-1)
    if close(a, b, tol):
        return True
    if 2 <= r.dim() <= 4 and s.dim() == r.dim() and sorted(s.shape) == sorted(r.shape):
        for p in itertools.permutations(range(r.dim())):
            if p != tuple(range(r.dim())) and r.permute(p).shape == s.shape:
                if close(a, r.permute(p).double().reshape(-1), tol):
                    return True
    return False


def tensors(value: object) -> list[torch.Tensor]:
    """The tensors and numbers of a probe's arguments: the inputs."""
    if isinstance(value, torch.Tensor):
        return [value.detach()] if value.numel() <= tracer.MAX_NUMEL else []
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [torch.tensor(value, dtype=torch.float64)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


@dataclass
class Reference:
    """The values the reference and its correct variants computed on one request."""
    request: trace_inputs.Request
    traces: list[Trace]
    inputs: list[torch.Tensor]
    _distinct: dict[int, list] | None = None

    def returns(self, func: str, name: str) -> list[torch.Tensor]:
        return [e.value for t in self.traces for e in t.events
                if e.func == func and e.name == name]

    def named(self, name: str) -> list[torch.Tensor]:
        return [e.value for t in self.traces for e in t.events if e.name == name]

    def distinct(self, numel: int) -> list[tuple[torch.Tensor, frozenset[int] | None]]:
        """The distinct values of `numel` elements the traces hold (only those can hold
        another's values), each with where its gradient reaches: the variants repeat
        most of the reference's, and comparing with each copy cost a second a part."""
        if self._distinct is None:
            self._distinct = {}
            seen: set[tuple] = set()
            for e in (e for t in self.traces for e in t.events):
                key = (e.value.dtype, tuple(e.value.shape), e.reach,
                       tuple(e.value.reshape(-1).tolist()) if e.value.numel() <= 512
                       else id(e))
                if key not in seen:
                    seen.add(key)
                    self._distinct.setdefault(e.value.numel(), []).append((e.value, e.reach))
        return self._distinct.get(numel, [])


def match(event: Event, ref: Reference, tols: dict) -> str | None:
    """"ref" when the reference computes this value, "input" when it is an input's,
    None when neither. A function's return is checked against what the reference's
    function of that name returned (its contract), a number against the reference's
    numbers of the same name where it has one (a small integer matches too much)."""
    v = event.value
    named = False
    if event.name.startswith("return") and ref.returns(event.func, event.name):
        # a function's result is its contract: the dtype and the shape too (a layer
        # returning [S, B, H] where the reference returns [B, S, H] holds its values)
        pool, named = [r for r in ref.returns(event.func, event.name)
                       if r.dtype == v.dtype and r.shape == v.shape], True
    elif v.dim() == 0 and ref.named(event.name):
        pool, named = ref.named(event.name), True
    else:
        pool = [r for r, _ in ref.distinct(v.numel())]
    if any(same_values(v, r, tols) for r in pool):
        return "ref"
    if not named and any(same_values(v, r, tols) for r in ref.inputs):
        return "input"
    return None


def same_result(a: object, b: object, tols: dict, keep: Callable[[str], bool]) -> bool:
    """Two probe results agree on the keys `keep` selects (recursively)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in b if keep(k)]
        return all(k in a and same_result(a[k], b[k], tols, lambda _: True) for k in keys)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and (a.numel() == 0 or same_values(a, b, tols))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_result(x, y, tols, keep) for x, y in zip(a, b))
    return a == b


def same_forward(a: object, b: object, tols: dict) -> bool:
    """Two probe results agree on every value but the gradients."""
    return same_result(a, b, tols, lambda k: not _GRADIENT.match(k))


def same_gradients(a: object, b: object, tols: dict) -> bool:
    """Two probe results agree on their gradients."""
    return same_result(a, b, tols, lambda k: bool(_GRADIENT.match(k)))
