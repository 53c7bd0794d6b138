"""Framing and serialisation shared by the trusted side and the sandboxed worker.

Everything crossing the boundary is a length-prefixed `torch.save` payload. The
trusted side only ever decodes with `weights_only=True` (tensors, numbers,
strings, lists, tuples, dicts, None), so a submission cannot smuggle a pickle
that runs code in the process that holds the verdict. Frames are size-capped.
"""
from __future__ import annotations

import io
import socket
import struct

import torch

HEADER = struct.Struct(">Q")
MAX_FRAME = 64 * 1024 * 1024


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame."""


def dumps(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def loads(data: bytes) -> object:
    try:
        return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:  # any malformed payload is the sender's fault
        raise ProtocolError(f"malformed result ({type(exc).__name__})") from None


def send(sock: socket.socket, obj: object) -> None:
    data = dumps(obj)
    sock.sendall(HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(min(n - len(chunks), 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks += chunk
    return bytes(chunks)


def recv(sock: socket.socket, limit: int = MAX_FRAME) -> object:
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size))
    if size > limit:
        raise ProtocolError(f"result of {size} bytes is over the {limit}-byte limit")
    return loads(_recv_exact(sock, size))
