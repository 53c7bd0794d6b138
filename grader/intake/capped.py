"""Reading the class's files within caps: never through a link, never blocking on a
FIFO, never more than a cap, and the verdict on a submission's file (`read_source`),
the one rule every path that reads one (a local run, its plan, a Dask client) keeps."""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.text.strings import say

MAX_SOURCE = 1024 * 1024
MAX_FILE = 32 * 1024 * 1024  # any other file of a class intake reads: a notebook, an archive entry


class NotAFile(OSError):
    """The path names a link, a folder, a FIFO or a device: never read as a submission."""


def read_capped(path: Path, cap: int) -> tuple[bytes, int]:
    """(the first cap+1 bytes, the size) of a regular file, read through a descriptor
    opened without following a link and without blocking (a FIFO would hang the run),
    so a link to a secret or a 2 GiB file costs nothing. Raises OSError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAFile(errno.ELOOP, "it is a link, and links are never followed") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(errno.EINVAL, "it is not a regular file")
        return b"".join(chunks(fd, cap)), st.st_size
    finally:
        os.close(fd)


def chunks(fd: int, cap: int) -> Iterator[bytes]:
    """What an open file holds, at most cap+1 bytes (one over: it is, or grew, past
    its cap), in pieces of at most 1 MiB: the one capped read every copy uses."""
    left = cap + 1
    while left and (chunk := os.read(fd, min(left, 1 << 20))):
        yield chunk
        left -= len(chunk)


# How a source file's bytes are read as text: UTF-8, with or without a byte-order mark
TEXT = "utf-8-sig"


@dataclass(frozen=True)
class Source:
    """A submission's file as every path reads it (a local run, its plan, a Dask
    client): at most MAX_SOURCE+1 bytes, never through a link, and why it cannot be
    graded, if it cannot."""
    data: bytes | None  # None: nothing could be read
    size: int           # the file's size, which may be more than len(data)
    problem: str = ""   # shown to the student; "": the bytes may be graded

    def text(self) -> str:
        """The bytes as the graded run takes its source (`runner.read`, which refuses a
        file that is not UTF-8 first): UTF-8, a byte-order mark (Windows editors write
        one) dropped, a byte that is no UTF-8 replaced; "" where nothing was read."""
        return (self.data or b"").decode(TEXT, "replace")


def read_source(path: Path) -> Source:
    """Read `path` (read_capped) and give the verdict on what was read."""
    try:
        data, size = read_capped(path, MAX_SOURCE)
    except FileNotFoundError:
        return Source(None, 0, say("file_none"))
    except OSError as exc:
        return Source(None, 0, say("file_unreadable", why=exc.strerror))
    if size > MAX_SOURCE:
        return Source(None, size, say("file_too_big", size=size, cap=MAX_SOURCE))
    return Source(data, size)
