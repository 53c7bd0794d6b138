"""Framing and serialisation shared by the trusted side and the sandboxed worker.

A frame is `[8-byte length][4-byte header length][JSON header][tensor bytes]`.
The JSON holds plain data (dicts with string keys, lists, str, int, float, bool,
None); each tensor in it is a reference {"$t": i} into a table of (dtype, shape,
offset) over the raw bytes. There is no pickle anywhere, so a submission can
send data, never code, to the process that holds the verdict; every size, dtype
and offset is checked on decode, and frames are size-capped.
"""
from __future__ import annotations

import json
import socket
import struct
import time

import torch

HEADER = struct.Struct(">Q")
JSON_LEN = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024
MAX_JSON = 4 * 1024 * 1024
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool)}


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame."""


def dumps(obj: object) -> bytes:
    table: list[list] = []
    chunks: list[bytes] = []
    offset = 0

    def enc(o):
        nonlocal offset
        if isinstance(o, torch.Tensor):
            t = o.detach().cpu().contiguous()
            name = str(t.dtype).removeprefix("torch.")
            if name not in DTYPES:
                raise TypeError(f"tensors of dtype {name} cannot be sent")
            raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            table.append([name, list(t.shape), offset, len(raw)])
            chunks.append(raw)
            offset += len(raw)
            return {"$t": len(table) - 1}
        if isinstance(o, dict):
            return {str(k): enc(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [enc(v) for v in o]
        if o is None or isinstance(o, (bool, int, float, str)):
            return o
        raise TypeError(f"a {type(o).__name__} cannot be sent; return tensors and numbers")

    head = json.dumps({"v": enc(obj), "t": table}).encode()
    return JSON_LEN.pack(len(head)) + head + b"".join(chunks)


def loads(data: bytes) -> object:
    try:
        (n,) = JSON_LEN.unpack_from(data, 0)
        if n > MAX_JSON or 4 + n > len(data):
            raise ValueError("bad header length")
        head = json.loads(data[4:4 + n])
        body = memoryview(data)[4 + n:]
        tensors = [_tensor(entry, body) for entry in head["t"]]
        return _resolve(head["v"], tensors)
    except ProtocolError:
        raise
    except Exception as exc:  # any malformed payload is the sender's fault
        raise ProtocolError(f"malformed result ({type(exc).__name__})") from None


def _tensor(entry: list, body: memoryview) -> torch.Tensor:
    name, shape, offset, size = entry
    dtype = DTYPES[name]
    if not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ValueError("bad shape")
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if size != numel * itemsize or not (0 <= offset and offset + size <= len(body)):
        raise ValueError("bad tensor extent")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(body[offset:offset + size]), dtype=dtype).reshape(shape)


def _resolve(v, tensors: list[torch.Tensor]):
    if isinstance(v, dict):
        if set(v) == {"$t"}:
            return tensors[v["$t"]]
        return {k: _resolve(x, tensors) for k, x in v.items()}
    if isinstance(v, list):
        return [_resolve(x, tensors) for x in v]
    return v


def send(sock: socket.socket, obj: object) -> None:
    send_bytes(sock, dumps(obj))


def send_bytes(sock: socket.socket, data: bytes) -> None:
    sock.sendall(HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            # A socket timeout bounds each recv, not the frame: a sender dripping one
            # byte a second would otherwise hold the reader forever. Bound the total.
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("frame not complete by the deadline")
            sock.settimeout(left)
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise EOFError("connection closed")
        got += k
    return bytes(buf)


def recv(sock: socket.socket, limit: int = MAX_FRAME, deadline: float | None = None) -> object:
    """One frame; with `deadline` (time.monotonic()), socket.timeout once it passes."""
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size, deadline))
    if size > limit:
        raise ProtocolError(f"result of {size} bytes is over the {limit}-byte limit")
    return loads(_recv_exact(sock, size, deadline))
