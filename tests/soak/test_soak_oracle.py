"""The fuzz suite's oracle refuses what issue 11 found (no server needed).

A fuzz run that passes says little unless its checks would fail on a broken server:
each answer below is one a server gave, or could give, when it misbehaves -- the
connection killed (``1011``) by a NaN or a lone surrogate, a reply that answers another
request, a reply missing a slot, a 500 -- and the oracle must refuse it; the last cases
of each table are well-behaved answers it must accept.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack
import numpy as np
import pytest
from soak_frames import Frame, RawCase, pack
from soak_oracle import check_batch_answer, check_json_answer, check_raw_answer
from soak_support import Closed

from openenv_gym.protocol import batch as bp

pytestmark = pytest.mark.soak

NAN_STEP = Frame('{"type":"step","data":{"message":NaN}}', True, "number")
SURROGATE_STEP = Frame('{"type":"step","data":{"message":"\\ud800"}}', True, "message")
STATE = Frame('{"type":"state"}', True, "message")
HI = Frame('{"type":"step","data":{"message":"hi"}}', True, "message")


def _observation(message: str) -> str:
    return json.dumps(
        {"type": "observation", "data": {"observation": {"echoed_message": message}, "done": False}}
    )


VALIDATION_ERROR = '{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR"}}'


class _NoSocket:
    """Stands for the connection: these answers never make the oracle read more."""

    def recv(self, timeout: float | None = None) -> Any:
        raise AssertionError("not expected to read")


@pytest.mark.parametrize(
    ("frame", "answer"),
    [
        (NAN_STEP, Closed(1011, "internal error")),  # issue 11, finding 3
        (SURROGATE_STEP, Closed(None)),  # dropped without a close frame
        (HI, Closed(1000)),  # closed without a reason
        (STATE, _observation("hi")),  # the reply to another request: desync
        (HI, _observation("ho")),  # someone else's step
        (HI, '{"type":"observation","data":{}}'),  # malformed (2.3)
        (HI, '{"type":"error","data":{"code":"NEW_CODE","message":""}}'),  # undocumented
        (Frame(b'{"x":"\xff"}', True, "bytes"), Closed(1007)),  # RFC 6455, but not 2.6
    ],
)
def test_the_json_oracle_refuses(frame: Frame, answer: str | Closed) -> None:
    with pytest.raises(AssertionError):
        check_json_answer(frame, answer, _NoSocket())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("frame", "answer"),
    [
        (NAN_STEP, VALIDATION_ERROR),
        (SURROGATE_STEP, VALIDATION_ERROR),
        (HI, _observation("hi")),
        (Frame('{"type":"close"}', True, "message"), Closed(1000)),
        (
            Frame(b'{"x":"\xff"}', True, "bytes"),
            '{"type":"error","data":{"message":"Invalid JSON: not UTF-8","code":"INVALID_JSON"}}',
        ),
        (Frame("x" * (2**20), True, "oversize"), Closed(1009)),
    ],
)
def test_the_json_oracle_accepts(frame: Frame, answer: str | Closed) -> None:
    check_json_answer(frame, answer, _NoSocket())  # type: ignore[arg-type]


def _step(rid: int, slots: list[int], args: list[dict[str, Any]]) -> Frame:
    return Frame(pack({"op": "step", "id": rid, "slots": slots, "args": args}), False, "request")


RESET_BAD_ID = Frame(
    pack({"op": "reset", "id": 2, "slots": [0], "args": [{"episode_id": b"\xff"}]}),
    False,
    "request",
)


def _reply(**fields: Any) -> bytes:
    return bp.encode_frame(fields)


def _many_slots(count: int) -> Frame:
    """An ``open`` naming ``count`` slots, over 64 KiB, that is not msgpack after them."""
    request = {"op": "open", "id": 7, "slots": list(range(100_000, 100_000 + count))}
    return Frame(pack(request) + b"\xc1", False, "request")


def _refused(rid: int) -> bytes:
    return _reply(op="error", id=rid, code="INVALID_REQUEST", message="too many slots")


def _step_reply(rid: int, echoed: list[str | None], errors: dict[int, Any] | None = None) -> bytes:
    n = len(echoed)
    reply: dict[str, Any] = {
        "op": "step",
        "id": rid,
        "obs": [None if e is None else {"echoed_message": e} for e in echoed],
        "reward": np.zeros(n),
        "done": np.zeros(n, dtype=bool),
    }
    if errors:
        reply["errors"] = errors
    return _reply(**reply)


@pytest.mark.parametrize(
    ("frame", "answer"),
    [
        (RESET_BAD_ID, Closed(1011, "internal error")),  # issue 11, finding 3
        (_step(3, [0], [{"message": "hi"}]), Closed(1000)),  # the protocol never closes
        (_step(3, [0], [{"message": "hi"}]), _step_reply(4, ["hi"])),  # another request's id
        (_step(3, [0], [{"message": "hi"}]), _step_reply(3, ["ho"])),  # someone else's step
        (_step(3, [0, 1], [{"message": "a"}, {"message": "b"}]), _step_reply(3, ["a"])),
        (_step(3, [0], [{"message": "a"}]), _step_reply(3, [None])),  # neither result nor error
        (Frame(b"\xc1", False, "bytes"), _reply(op="error", id=None, code="NEW", message="")),
        (Frame(b"\xc1", False, "bytes"), "text"),
        (Frame(b"\xff", True, "bytes"), Closed(1007)),  # a text frame is INVALID_FRAME (3.1)
        (_many_slots(1025), _refused(7)),  # 5 KiB: decoded whole, so INVALID_FRAME is due
        (_many_slots(20_000), _refused(8)),  # another request's id
    ],
)
def test_the_batch_oracle_refuses(frame: Frame, answer: bytes | str | Closed) -> None:
    with pytest.raises(AssertionError):
        check_batch_answer(frame, answer, 1)


@pytest.mark.parametrize(
    ("frame", "answer"),
    [
        (_step(3, [0], [{"message": "hi"}]), _step_reply(3, ["hi"])),
        (
            _step(3, [0, 9], [{"message": "hi"}, {"message": "x"}]),
            _step_reply(3, ["hi", None], {1: ["NO_SUCH_SLOT", "slot 9 is not open", {}]}),
        ),
        (
            Frame(b"\xc1", False, "bytes"),
            _reply(op="error", id=None, code="INVALID_FRAME", message=""),
        ),
        (
            Frame(msgpack.packb({"op": "bogus", "id": 5}), False, "request"),
            _reply(op="error", id=5, code="INVALID_REQUEST", message="unknown op 'bogus'"),
        ),
        (Frame(b"\x00" * (2**20), False, "oversize"), Closed(1009)),
        (_many_slots(20_000), _refused(7)),  # refused from its first keys (3.8)
        (
            _many_slots(20_000),
            _reply(op="error", id=None, code="INVALID_FRAME", message="not msgpack"),
        ),
    ],
)
def test_the_batch_oracle_accepts(frame: Frame, answer: bytes | str | Closed) -> None:
    check_batch_answer(frame, answer, 1)


def test_the_raw_oracle_refuses_internal_errors() -> None:
    with pytest.raises(AssertionError):
        check_raw_answer(
            RawCase(None, b"GET / HTTP/1.1\r\n\r\n"), b"HTTP/1.1 500 Internal Server Error\r\n\r\n"
        )
    upgraded = b"HTTP/1.1 101 Switching Protocols\r\n\r\n"
    with pytest.raises(AssertionError):
        check_raw_answer(RawCase("/ws", b"\x81"), upgraded + b"\x88\x10\x03\xf3internal error")
    assert (
        check_raw_answer(RawCase("/ws", b"\x81"), upgraded + b"\x88\x02\x03\xea") == "closed 1002"
    )


@pytest.fixture
def credulous_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our client decoders, broken to accept anything (a bug our server could share)."""
    import soak_oracle

    monkeypatch.setattr(soak_oracle, "decode_reply", lambda text: None)
    monkeypatch.setattr(soak_oracle, "_reply_event", lambda *args: None)


@pytest.mark.usefixtures("credulous_client")
@pytest.mark.parametrize(
    ("frame", "answer"),
    [
        (_step(3, [0], [{"message": "hi"}]), _step_reply(4, ["hi"])),  # another request's id
        (_step(3, [0], [{"message": "a"}]), _step_reply(3, [None])),  # neither result nor error
        (
            _step(3, [0], [{"message": "a"}]),
            _reply(op="step", id=3, obs=[{}], reward=np.zeros(1, "<f4"), done=np.zeros(1, bool)),
        ),  # reward of the wrong dtype (3.4.3)
        (Frame(b"\xc1", False, "bytes"), _reply(op="error", id=None, code="NEW", message="")),
    ],
)
def test_the_batch_verdict_does_not_rest_on_our_decoders(
    frame: Frame, answer: bytes | str | Closed
) -> None:
    with pytest.raises(AssertionError):
        check_batch_answer(frame, answer, 1)


@pytest.mark.usefixtures("credulous_client")
@pytest.mark.parametrize(
    "answer",
    [
        '{"type":"observation","data":{}}',  # malformed (2.3)
        '{"type":"error","data":{"code":"NEW_CODE","message":""}}',  # undocumented (2.4)
        '{"type":"observation","data":{"observation":{"echoed_message":"hi"},"done":1}}',
        "not json",
    ],
)
def test_the_json_verdict_does_not_rest_on_our_decoders(answer: str) -> None:
    with pytest.raises(AssertionError):
        check_json_answer(HI, answer, _NoSocket())  # type: ignore[arg-type]
