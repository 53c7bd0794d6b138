"""Fuzz the frames a child may send (issue 11, item 6): whatever bytes come back,
decoding gives plain data with valid text, or `ProtocolError`, never anything else
(an exception of another kind, a tensor outside the frame, a lone surrogate).

Examples per test: GRADER_FUZZ_EXAMPLES (default 40), as for the intake fuzzing.
"""
from __future__ import annotations

import json
import os
import struct

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.inside import protocol

EXAMPLES = int(os.environ.get("GRADER_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES * 5, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool]
tensors = st.builds(lambda shape, dtype: torch.zeros(shape, dtype=dtype),
                    st.lists(st.integers(0, 4), max_size=3), st.sampled_from(DTYPES))
plain = st.recursive(
    st.none() | st.booleans() | st.integers(-2**62, 2**62) | st.floats(allow_nan=False)
    | st.text(max_size=20) | tensors,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)


def decoded_or_refused(data: bytes) -> object:
    try:
        value = protocol.loads(data)
    except protocol.ProtocolError:
        return None
    _walk(value, len(data))
    return value


def _walk(value: object, size: int) -> None:
    """Plain data only; text encodes as UTF-8; tensors lie inside the frame."""
    if isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, dict):
        for k, v in value.items():
            k.encode("utf-8")
            _walk(v, size)
    elif isinstance(value, list):
        for v in value:
            _walk(v, size)
    elif isinstance(value, torch.Tensor):
        assert value.numel() * value.element_size() <= size
    else:
        assert value is None or isinstance(value, (bool, int, float)), type(value)


@FUZZ
@given(st.binary(max_size=512))
def test_any_bytes_decode_or_are_refused(data):
    decoded_or_refused(data)


@FUZZ
@given(plain, st.data())
def test_damaged_frames_decode_or_are_refused(value, data):
    frame = bytearray(protocol.dumps({"ok": True, "result": value}))
    assert protocol.loads(bytes(frame)) is not None  # the intact frame decodes
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    decoded_or_refused(bytes(frame))


@FUZZ
@given(st.recursive(st.none() | st.integers() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10),
       st.lists(st.tuples(st.sampled_from(["float32", "int64", "bool", "complex64", "x"]),
                          st.lists(st.integers(-2, 2**40), max_size=3),
                          st.integers(-8, 2**40), st.integers(-8, 2**40)), max_size=3),
       st.binary(max_size=64), st.sampled_from(["", "\\ud800", "\\udfff x", "\\ud83d\\ude00"]))
def test_forged_headers_decode_or_are_refused(value, table, body, escape):
    """A child writing its own header: any tensor table, any JSON, lone surrogates."""
    head = json.dumps({"v": {"m": value, "s": "@"}, "t": table}).replace("@", escape).encode()
    head += b" " * (-(4 + len(head)) % 8)
    decoded_or_refused(struct.pack(">I", len(head)) + head + body)
