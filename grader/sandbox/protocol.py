"""Framing and serialisation shared by the trusted side and the sandboxed worker.

A frame is `[8-byte length][4-byte header length][JSON header][tensor bytes]`.
The JSON holds plain data (dicts with string keys, lists, str, int, float, bool,
None); each tensor in it is a reference {"$t": i} into a table of (dtype, shape,
offset) over the raw bytes. There is no pickle anywhere, so a submission can
send data, never code, to the process that holds the verdict; every size, dtype
and offset is checked on decode, and frames are size-capped.

A student's results are megabytes per submission, so nothing is copied that need
not be: a frame is sent as a list of buffers (the tensors' own memory), received
into one buffer, and decoded tensors are views of it (every tensor starts on an
8-byte boundary; a frame that breaks this is refused).
"""
from __future__ import annotations

import json
import socket
import struct
import time

import torch

HEADER = struct.Struct(">Q")
JSON_LEN = struct.Struct(">I")
ALIGN = 8
MAX_FRAME = 64 * 1024 * 1024
MAX_JSON = 4 * 1024 * 1024
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool)}
ITEMSIZE = {name: torch.empty((), dtype=d).element_size() for name, d in DTYPES.items()}
Buffer = bytes | bytearray | memoryview


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame."""


def _pad(n: int) -> int:
    return -n % ALIGN


def encode(obj: object) -> list[Buffer]:
    """The frame (without its length) as buffers: JSON, then each tensor's bytes."""
    table: list[list] = []
    chunks: list[Buffer] = []
    offset = 0

    def enc(o):
        nonlocal offset
        if isinstance(o, torch.Tensor):
            t = o.detach().cpu().contiguous()
            name = str(t.dtype).removeprefix("torch.")
            if name not in DTYPES:
                raise TypeError(f"tensors of dtype {name} cannot be sent")
            raw = memoryview(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else b""
            table.append([name, list(t.shape), offset, len(raw)])
            chunks.append(raw)
            offset += len(raw)
            if pad := _pad(len(raw)):
                chunks.append(bytes(pad))
                offset += pad
            return {"$t": len(table) - 1}
        if isinstance(o, dict):
            return {str(k): enc(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [enc(v) for v in o]
        if o is None or isinstance(o, (bool, int, float, str)):
            return o
        raise TypeError(f"a {type(o).__name__} cannot be sent; return tensors and numbers")

    head = json.dumps({"v": enc(obj), "t": table}).encode()
    head += b" " * _pad(JSON_LEN.size + len(head))  # the tensor bytes start aligned
    return [JSON_LEN.pack(len(head)), head, *chunks]


def dumps(obj: object) -> bytes:
    return b"".join(encode(obj))


def loads(data: Buffer) -> object:
    """Decode a frame; tensors are views of `data` (copied once if it is read-only)."""
    if isinstance(data, bytes):
        data = bytearray(data)
    try:
        view = memoryview(data)
        (n,) = JSON_LEN.unpack_from(view, 0)
        if n > MAX_JSON or 4 + n > len(view) or (4 + n) % ALIGN:
            raise ValueError("bad header length")
        head = json.loads(bytes(view[4:4 + n]))
        body = view[4 + n:]
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
    if (not isinstance(offset, int) or size != numel * ITEMSIZE[name] or offset % ALIGN
            or not (0 <= offset and offset + size <= len(body))):
        raise ValueError("bad tensor extent")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(body[offset:offset + size], dtype=dtype).reshape(shape)


def _resolve(v, tensors: list[torch.Tensor]):
    if isinstance(v, dict):
        if set(v) == {"$t"}:
            return tensors[v["$t"]]
        return {k: _resolve(x, tensors) for k, x in v.items()}
    if isinstance(v, list):
        return [_resolve(x, tensors) for x in v]
    return v


def send(sock: socket.socket, obj: object) -> None:
    send_buffers(sock, encode(obj))


def send_bytes(sock: socket.socket, data: Buffer) -> None:
    send_buffers(sock, [data])


def send_buffers(sock: socket.socket, parts: list[Buffer]) -> None:
    """Length, then the parts, gathered by the kernel (sendmsg): no joined copy."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    views.insert(0, memoryview(HEADER.pack(sum(v.nbytes for v in views))))
    while views:
        sent = sock.sendmsg(views[:512])  # under any system's IOV_MAX
        while sent:
            if sent >= views[0].nbytes:
                sent -= views.pop(0).nbytes
            else:
                views[0], sent = views[0][sent:], 0


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytearray:
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
    return buf


def recv(sock: socket.socket, limit: int = MAX_FRAME, deadline: float | None = None) -> object:
    """One frame; with `deadline` (time.monotonic()), socket.timeout once it passes."""
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size, deadline))
    if size > limit:
        raise ProtocolError(f"result of {size} bytes is over the {limit}-byte limit")
    return loads(_recv_exact(sock, size, deadline))
