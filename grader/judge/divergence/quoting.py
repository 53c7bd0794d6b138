"""A value as the page quotes it: a few numbers, from where the student's and the
reference's first differ, with digits enough that they read differently."""
from __future__ import annotations

import torch

from grader.judge.divergence.matching import near, tolerance

SHOWN = 4              # values of a tensor quoted on the page


def _items(flat: torch.Tensor, digits: int) -> list[str]:
    if flat.dtype == torch.bool:
        return ["True" if bool(x) else "False" for x in flat]
    if flat.is_floating_point():
        return [f"{float(x):.{digits}g}" for x in flat]
    return [str(int(x)) for x in flat]


def shown(t: torch.Tensor, start: int = 0, digits: int = 4) -> str:
    """A value as the page quotes it: a few numbers from flat position `start` on
    (`…` where some are left out). Its shape and that position are the sentence's to
    say, in the page's language (`Where.got_shape`, `got_at`)."""
    flat = t.detach().reshape(-1)
    items = _items(flat[start:start + SHOWN], digits)
    if t.dim() == 0:
        return items[0] if items else "[]"
    before = "…, " if start > 0 else ""
    more = ", …" if flat.numel() > start + SHOWN else ""
    return f"[{before}{', '.join(items)}{more}]"


def _index(t: torch.Tensor, flat: int) -> list[int]:
    """The index, in `t`'s own shape, of its element at flat position `flat`."""
    out = []
    for size in reversed(t.shape):
        out.append(flat % size)
        flat //= size
    return out[::-1]


def _apart(s: torch.Tensor, r: torch.Tensor, tols: dict) -> int:
    """The first flat position where `s` and `r` differ (values in the order they are
    stored, so a flatten after a transpose shows where the orders part); 0 when their
    sizes differ or no element does."""
    if s.numel() != r.numel() or s.numel() == 0:
        return 0
    a, b = s.detach().double().reshape(-1), r.detach().double().reshape(-1)
    off = (~near(a, b, tolerance(tols, s.dtype, r.dtype))).nonzero()
    return int(off[0]) if len(off) else 0


def _digits(s: torch.Tensor, r: torch.Tensor, at: int) -> int:
    """Significant digits enough that the first values quoted read differently (4, or
    up to 17 where they differ only further on)."""
    if not (s.is_floating_point() and r.is_floating_point()) or s.numel() != r.numel() \
            or s.numel() == 0:
        return 4
    a, b = float(s.detach().reshape(-1)[at]), float(r.detach().reshape(-1)[at])
    digits = 4
    while a != b and digits < 17 and f"{a:.{digits}g}" == f"{b:.{digits}g}":
        digits += 1
    return digits


def quoted(s: torch.Tensor, r: torch.Tensor | None, tols: dict) -> dict:
    """The `Where` fields quoting a student's value and the reference's, from the first
    position where they differ, with enough digits that they visibly differ."""
    if r is None:
        return {"got": shown(s), "got_shape": _shape(s)}
    first = _apart(s, r, tols)
    digits = _digits(s, r, first)
    at = first if s.numel() > SHOWN else 0  # a short value is quoted whole
    return {"got": shown(s, at, digits), "ref": shown(r, at, digits),
            "got_shape": _shape(s), "ref_shape": _shape(r),
            "got_at": _index(s, at) if at else [], "ref_at": _index(r, at) if at else []}


def _shape(t: torch.Tensor) -> list[int]:
    """The shape the sentence names: only where a value has more than it quotes."""
    return list(t.shape) if t.numel() > SHOWN or t.dim() > 1 else []
