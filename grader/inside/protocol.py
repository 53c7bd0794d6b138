"""Framing and serialisation shared by the trusted side and the sandboxed worker.

A frame is `[8-byte length][8-byte nonce][4-byte header length][JSON header][tensor
bytes]`. The trusted side puts a fresh nonce on every request and the child echoes it
on its reply, so a reply is bound to its request: a second writer (a fork, a thread
that found the socket) cannot pass a frame off as the answer to another request.
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
import re
import socket
import struct
import time
from typing import NamedTuple

import torch

# Any one string of a report from a child (an error message, a traceback, what the
# harness says when it fails), as the student or the TA sees it; the child caps its
# own, the trusted side caps again.
MAX_TEXT = 4000

HEADER = struct.Struct(">QQ")  # frame length, nonce
JSON_LEN = struct.Struct(">I")
ALIGN = 8
MAX_FRAME = 64 * 1024 * 1024
MAX_JSON = 4 * 1024 * 1024
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool)}
ITEMSIZE = {name: torch.empty((), dtype=d).element_size() for name, d in DTYPES.items()}
Buffer = bytes | bytearray | memoryview
# A request that names one of the graded requests the zygote holds, by index
# ({HELD: k}), instead of carrying its inputs (zygote.Zygote.held)
HELD = "held"
SURROGATE = re.compile("[\ud800-\udfff]")  # a pair in JSON decodes to one character


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame."""


def _pad(n: int) -> int:
    return -n % ALIGN


def _put(o: torch.Tensor, table: list[list], chunks: list[Buffer], offset: int) -> int:
    """A tensor's entry into `table` and its bytes (a view of its memory) into
    `chunks`, at `offset`, aligned; the offset after it."""
    t = o.detach().cpu().contiguous()
    name = str(t.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise TypeError(f"tensors of dtype {name} cannot be sent")
    # (an ndarray is a buffer: numpy's stubs declare it one for Python 3.12 on only)
    raw = (memoryview(t.reshape(-1).view(torch.uint8).numpy())  # type: ignore[arg-type]
           if t.numel() else b"")
    table.append([name, list(t.shape), offset, len(raw)])
    chunks.append(raw)
    offset += len(raw)
    if pad := _pad(len(raw)):
        chunks.append(bytes(pad))
        offset += pad
    return offset


class Packed(NamedTuple):
    """Tensors (or None) encoded once, sent in many frames: an answer the trusted side
    keeps and sends to every student who asks the same (grader/judge/standin.py).
    `values`: the tensors themselves; `refs`: each one's index in `table`, or None;
    `chunks`: their bytes, aligned."""

    values: list[torch.Tensor | None]
    refs: list[int | None]
    table: list[list]
    chunks: list[Buffer]
    size: int


def pack(values: list[torch.Tensor | None]) -> Packed:
    """`values` encoded once (`encode` sends a Packed as the list of them)."""
    refs: list[int | None] = []
    table: list[list] = []
    chunks: list[Buffer] = []
    offset = 0
    for value in values:
        refs.append(None if value is None else len(table))
        if value is not None:
            offset = _put(value, table, chunks, offset)
    return Packed(list(values), refs, table, chunks, offset)


def encode(obj: object) -> list[Buffer]:
    """The frame (without its length) as buffers: JSON, then each tensor's bytes. A
    `Packed` in it is sent as the list of its tensors, their bytes as they were packed."""
    table: list[list] = []
    chunks: list[Buffer] = []
    offset = 0

    def add(packed: Packed) -> list:
        nonlocal offset
        base = len(table)
        table.extend([name, shape, at + offset, size] for name, shape, at, size in packed.table)
        chunks.extend(packed.chunks)
        offset += packed.size
        return [None if r is None else {"$t": r + base} for r in packed.refs]

    def enc(o):
        nonlocal offset
        if isinstance(o, torch.Tensor):
            offset = _put(o, table, chunks, offset)
            return {"$t": len(table) - 1}
        if isinstance(o, Packed):
            return add(o)
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


class Frame(NamedTuple):
    """A received frame, undecoded but for its JSON: `head["v"]` is the value with
    each tensor as {"$t": i}, `head["t"]` their table over `body`. `data` is the whole
    frame (the trusted side keys the stand-ins' answers by it, and decodes a frame it
    has answered before no further)."""

    data: Buffer
    head: dict
    body: memoryview

    def value(self) -> object:
        """The frame decoded; tensors are views of `data`."""
        try:
            tensors = [_tensor(entry, self.body) for entry in self.head["t"]]
            return _resolve(self.head["v"], tensors)
        except Exception as exc:  # any malformed payload is the sender's fault
            raise ProtocolError(f"malformed result ({type(exc).__name__})") from None


def split(data: Buffer, json_limit: int = MAX_JSON) -> Frame:
    """A frame's JSON read and checked, its tensors left as bytes (`Frame.value`
    decodes them). Every string in it is valid UTF-8: JSON's escapes can spell lone
    surrogates, which no encoder downstream accepts (one in an error message stopped
    a whole run)."""
    if isinstance(data, bytes):
        data = bytearray(data)
    try:
        view = memoryview(data)
        (n,) = JSON_LEN.unpack_from(view, 0)
        if 4 + n > len(view) or (4 + n) % ALIGN:
            raise ValueError("bad header length")
        if n > json_limit:
            raise ProtocolError(f"a result whose JSON is {n} bytes (at most {json_limit})")
        text = str(view[4:4 + n], "utf-8")  # strict: json.loads(bytes) passes surrogates
        head = json.loads(text)
        if "\\ud" in text or "\\uD" in text:  # a surrogate escape: rare, so walk only then
            head = _valid_text(head)
        if not (isinstance(head, dict) and isinstance(head.get("t"), list) and "v" in head):
            raise ValueError("no value or table")
        return Frame(data, head, view[4 + n:])
    except ProtocolError:
        raise
    except Exception as exc:  # any malformed payload is the sender's fault
        raise ProtocolError(f"malformed result ({type(exc).__name__})") from None


def loads(data: Buffer, json_limit: int = MAX_JSON) -> object:
    """Decode a frame; tensors are views of `data` (copied once if it is read-only)."""
    return split(data, json_limit).value()


def _tensor(entry: list, body: memoryview) -> torch.Tensor:
    name, shape, offset, size = entry
    dtype = DTYPES[name]
    numel = 1
    for s in shape:
        if not isinstance(s, int) or s < 0:
            raise ValueError("bad shape")
        numel *= s
    if (not isinstance(offset, int) or size != numel * ITEMSIZE[name] or offset % ALIGN
            or not (0 <= offset and offset + size <= len(body))):
        raise ValueError("bad tensor extent")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(body[offset:offset + size], dtype=dtype).reshape(shape)


def _valid_text(v):
    """`v` with every lone surrogate (in strings and keys) replaced by U+FFFD."""
    if isinstance(v, str):
        return SURROGATE.sub("\ufffd", v)
    if isinstance(v, dict):
        return {_valid_text(k): _valid_text(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_valid_text(x) for x in v]
    return v


def _resolve(v, tensors: list[torch.Tensor]):
    if isinstance(v, dict):
        if len(v) == 1 and "$t" in v:
            return tensors[v["$t"]]
        return {k: _resolve(x, tensors) for k, x in v.items()}
    if isinstance(v, list):
        return [_resolve(x, tensors) for x in v]
    return v


def send(sock: socket.socket, obj: object, nonce: int = 0) -> None:
    send_buffers(sock, encode(obj), nonce)


def send_bytes(sock: socket.socket, data: Buffer, nonce: int = 0) -> None:
    send_buffers(sock, [data], nonce)


def send_buffers(sock: socket.socket, parts: list[Buffer], nonce: int = 0) -> None:
    """Length and nonce, then the parts, gathered by the kernel (sendmsg): no joined
    copy (a request frame serialised once is sent to every student with its own nonce)."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    views.insert(0, memoryview(HEADER.pack(sum(v.nbytes for v in views), nonce)))
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


def recv_header(sock: socket.socket, deadline: float | None = None) -> tuple[int, int]:
    """A frame's (length, nonce): the reader decides from them whether to read on."""
    return HEADER.unpack(_recv_exact(sock, HEADER.size, deadline))


def recv_body(sock: socket.socket, size: int, deadline: float | None = None,
              json_limit: int = MAX_JSON) -> object:
    return recv_frame(sock, size, deadline, json_limit).value()


def recv_frame(sock: socket.socket, size: int, deadline: float | None = None,
               json_limit: int = MAX_JSON) -> Frame:
    """A frame's body, its JSON read (`split`), its tensors left to `Frame.value`."""
    return split(_recv_exact(sock, size, deadline), json_limit)


def recv(sock: socket.socket, limit: int = MAX_FRAME,
         deadline: float | None = None) -> tuple[int, object]:
    """One frame as (nonce, value); with `deadline` (time.monotonic()), socket.timeout
    once it passes."""
    size, nonce = recv_header(sock, deadline)
    if size > limit:
        raise ProtocolError(f"result of {size} bytes is over the {limit}-byte limit")
    return nonce, recv_body(sock, size, deadline)
