"""Names and errors from a class's files as text that prints and encodes: what intake
and the notebook loader say about a student's files, on pages and in the terminal."""
from __future__ import annotations

import unicodedata


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
