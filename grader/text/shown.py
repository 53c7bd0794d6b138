"""Untrusted text and numbers as they are shown: names and errors from a class's files
(intake, the notebook loader), any student text on a page or in the terminal (no
control or bidi characters, bounded), measured numbers and points.

How a thing is written once it is shown; whether a student may see a fact of a
check at all is judge/disclosed.py's."""
from __future__ import annotations

import math
import re
import unicodedata
from decimal import ROUND_HALF_UP, Decimal

TEXT_LIMIT = 20_000      # characters of one untrusted text shown on a page
# A heatmap cell whose error is NaN or infinite (JSON has neither): compare.py writes
# it, and a number at or beyond it is shown as inf (or nan).
NON_FINITE = 1e30
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def raw_bytes(name: str) -> bytes:
    """The bytes behind a name: a file name's own (undecodable bytes come back from
    their surrogate escapes), else any lone surrogate as its three bytes."""
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")


def printable(name: str) -> str:
    """A name as text that prints and encodes: undecodable bytes, lone surrogates and
    control characters become U+FFFD."""
    text = raw_bytes(name).decode("utf-8", "replace")
    return "".join("\ufffd" if unicodedata.category(c) in ("Cc", "Cs") else c for c in text)


def reason_of(exc: BaseException) -> str:
    """An exception as one short line of text: its first line and where (a schema
    error's `On instance[...]`)."""
    if isinstance(exc, OSError) and exc.strerror:
        return printable(exc.strerror)
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
    where = next((ln.rstrip(":") for ln in lines if ln.startswith("On instance")), "")
    return printable(lines[0][:200] + (f" ({where[:100]})" if where else ""))


def clean(value: object, limit: int = TEXT_LIMIT) -> str:
    """Untrusted text made safe to show: no control/bidi characters, bounded size."""
    text = _UNSAFE.sub("", _ANSI.sub("", "" if value is None else str(value)))
    if len(text) > limit:
        cut = len(text) - limit
        text = text[:limit] + ("…" if limit < 1000 else f"\n… [{cut} more characters cut]")
    return text


def num(value: object) -> str:
    """A measured number, short but exact enough to compare with the tolerance."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return clean(value, 200)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value) or abs(value) >= NON_FINITE:
        return "inf" if not math.isnan(value) else "nan"
    return f"{value:.6g}" if value == 0 or 1e-3 <= abs(value) < 1e5 else f"{value:.4g}"


def points(value: object) -> str:
    """Points as people read them, the one rule for pages, the class report, `grader
    check` and LMS comments: two decimals at most, half rounded up, as Moodle and Canvas
    show a score (8.125 is 8.13; Python's own format would say 8.12). scores.json and the
    exports keep the exact value, a whole number of 1/1024 points."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return num(value)
    if not math.isfinite(value):
        return num(value)
    shown = Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{shown:f}".rstrip("0").rstrip(".") if shown else "0"
