"""The wire format: tensors and plain data round-trip; nothing else gets through."""
import pickle
import socket

import pytest
import torch

from grader.inside import protocol


def test_round_trip_keeps_values_dtypes_and_structure():
    obj = {"y": torch.randn(2, 3, dtype=torch.float64), "idx": torch.tensor([[1, 2]]),
           "none": None, "list": [1, 2.5, "s", True], "empty": torch.zeros(0, 4),
           "nested": {"g": torch.ones(()).float()}}
    back = protocol.loads(protocol.dumps(obj))
    assert torch.equal(back["y"], obj["y"]) and back["y"].dtype == torch.float64
    assert back["idx"].dtype == torch.int64 and back["nested"]["g"].shape == ()
    assert back["none"] is None and back["list"] == [1, 2.5, "s", True]
    assert back["empty"].shape == (0, 4)


def test_objects_are_refused_when_sending():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with pytest.raises(TypeError):
        protocol.dumps({"x": Evil()})


@pytest.mark.parametrize("payload", [
    b"", b"\x00\x00\x00\x05{bad}", pickle.dumps({"a": 1}),
    protocol.JSON_LEN.pack(40) + b'{"v": {"$t": 0}, "t": [["float32", [4], 0, 16]]}',
    protocol.JSON_LEN.pack(44) + b'{"v": {"$t": 0}, "t": [["object", [1], 0, 8]]}   ',
])
def test_malformed_or_pickled_frames_are_rejected(payload):
    with pytest.raises(protocol.ProtocolError):
        protocol.loads(payload)


def test_oversized_frame_is_refused_before_reading_it():
    a, b = socket.socketpair()
    with a, b:  # closed here: a socket left to the collector is a ResourceWarning
        a.sendall(protocol.HEADER.pack(protocol.MAX_FRAME + 1, 7))
        with pytest.raises(protocol.ProtocolError, match="over the"):
            protocol.recv(b)


def test_a_frame_carries_its_nonce():
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, {"ok": True}, nonce=2 ** 64 - 1)
        protocol.send_bytes(a, protocol.dumps([1]), nonce=5)
        assert protocol.recv(b) == (2 ** 64 - 1, {"ok": True})
        assert protocol.recv_header(b) == (len(protocol.dumps([1])), 5)


@pytest.mark.parametrize("text", ["\udc80", "a\ud800b", "\udfff" * 3])
def test_lone_surrogates_arrive_as_valid_text(text):
    back = protocol.loads(protocol.dumps({"message": text, text: [text]}))
    for s in (back["message"], *back, *next(iter(back.values()))):
        s.encode("utf-8")  # would raise on a lone surrogate
    assert back["message"] == text.translate({c: "\ufffd" for c in range(0xD800, 0xE000)})
    assert protocol.loads(protocol.dumps({"m": "\U0001f600 ok"})) == {"m": "\U0001f600 ok"}


def test_raw_surrogate_bytes_are_malformed():
    head = b'{"v": "\xed\xb2\x80", "t": []}'
    head += b" " * (-(4 + len(head)) % 8)
    with pytest.raises(protocol.ProtocolError):
        protocol.loads(protocol.JSON_LEN.pack(len(head)) + head)


def test_json_limit_is_the_callers():
    frame = protocol.dumps({"m": "x" * 5000})
    assert protocol.loads(frame, json_limit=8192) == {"m": "x" * 5000}
    with pytest.raises(protocol.ProtocolError):
        protocol.loads(frame, json_limit=4096)
