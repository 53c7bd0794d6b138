"""Cases as named records: what a test's id and the feedback say about a case.

A hidden test parametrizes over records whose fields are the lesson's own names
(a NamedTuple: `E`, `K`, `norm_topk_prob`, `dtype`, `N`, ...), so its id reads
`E=8 K=2 float32 N=10` and the feedback can say which fields the failing cases
share. Fields in HIDDEN (the seed) are never shown: students see test ids.
"""
from __future__ import annotations

HIDDEN = frozenset({"seed"})
DTYPES = ("float", "bfloat", "int", "uint", "complex", "bool")


def _shown(value: object) -> bool:
    """A value the feedback can name and compare: a scalar, or a short tuple of them."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return True
    return isinstance(value, (tuple, list)) and len(value) <= 8 and all(
        isinstance(v, (str, int, float, bool)) for v in value)


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def fields(params: dict[str, object]) -> dict[str, object]:
    """A test's case as the feedback names it, from its parameters: a record's fields
    (a NamedTuple parameter), else the scalar parameters by name; never a seed."""
    out: dict[str, object] = {}
    for name, value in params.items():
        record = getattr(value, "_asdict", None)
        items = record().items() if callable(record) else [(name, value)]
        out.update({k: _plain(v) for k, v in items if k not in HIDDEN and _shown(v)})
    return out


def _one(name: str, value: object) -> str:
    """`dtype=float32` reads as `float32`; every other field as `name=value`."""
    if name == "dtype" and isinstance(value, str) and value.startswith(DTYPES):
        return value
    return f"{name}={value}"


def case_id(case: object) -> str | None:
    """A record's test id, `E=8 K=2 float32 N=10` (no seed); None for anything else,
    which keeps pytest's own id."""
    record = getattr(case, "_asdict", None)
    if not callable(record):
        return None
    return " ".join(_one(k, v) for k, v in record().items() if k not in HIDDEN)
