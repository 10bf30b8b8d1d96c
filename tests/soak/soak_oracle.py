"""The fuzz suite's oracle: is this how the server may answer that frame?

Not a test module; tests/soak/test_soak_fuzz.py asks it about every case, and
tests/soak/test_soak_oracle.py checks it refuses broken answers. The rules are those of
``docs/protocol.md``, summed up in test_soak_fuzz.py's docstring. Each ``check_*``
raises ``AssertionError`` naming the frame when the answer breaks them, and otherwise
returns a short name of the answer (the fuzz run counts them).

The verdict rests on :mod:`soak_wire`, which reads frames and answers with ``msgpack`` and
``json`` and the spec written out again, never with our decoders: a bug our server and
our client share would pass a check made with them. Our client protocols then read each
answer too (a second check: our client must accept whatever our server sends).
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgpack
from soak_frames import Frame, RawCase
from soak_support import Closed, receive
from soak_wire import (
    JSON_ERROR_CODES,
    WireError,
    batch_reply_problem,
    json_reply_problem,
    slot_observations,
    unpack,
)
from websockets.sync.client import ClientConnection

from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol.openenv import decode_reply

MAX_FRAME = 256 * 2**10
"""The fuzzed server's ``--max-frame``: small, so oversize frames are cheap to send."""
MAX_REQUEST_SLOTS = 1024
"""The fuzzed server's ``--max-request-slots``: the most slots one request may name."""
_PRESCAN = 64 * 2**10

# ------------------------------------------------------------------------------ /batch


def _request_of(frame: Frame) -> dict[Any, Any] | None:
    """The frame as the spec reads it (a map), or None if it is no map (3.2)."""
    try:
        return unpack(frame.data)
    except WireError:
        return None


def _refused_from_its_keys(frame: Frame) -> dict[str, Any] | None:
    """The ``op`` and ``id`` of a frame the server may refuse from its first keys (3.8).

    A frame of more than 64 KiB whose first keys are an ``op`` (not ``hello``), a valid
    ``id`` and a ``slots`` array longer than :data:`MAX_REQUEST_SLOTS` is refused from the
    array's header alone, ``INVALID_REQUEST`` with that id -- also when the rest of the
    frame is not msgpack, which section 3.6.2 alone would answer ``INVALID_FRAME``, id
    nil. None: the frame is not such a one.
    """
    if frame.text or frame.size <= _PRESCAN:
        return None
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(frame.data)  # type: ignore[arg-type]
    fields: dict[str, Any] = {}
    try:
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key == "slots":
                count = unpacker.read_array_header()
                break
            if key in ("op", "id"):
                fields[key] = unpacker.unpack()
            else:
                unpacker.skip()
        else:
            return None
    except Exception:
        return None
    op, rid = fields.get("op"), fields.get("id")
    if op not in set(bp.Op) - {bp.Op.HELLO} or not bp._is_uint(rid):
        return None
    if not 0 < rid <= bp.MAX_REQUEST_ID or count <= MAX_REQUEST_SLOTS:
        return None
    return fields


def _uint_list(value: Any) -> tuple[int, ...]:
    if isinstance(value, list) and all(bp._is_uint(v) for v in value):
        return tuple(value)
    return ()


def _reply_event(version: int, request: dict[Any, Any] | None, answer: bytes) -> Any:
    """Read ``answer`` with our client protocol, as the reply to ``request``.

    ``BatchClient`` checks every rule of 3.4 - 3.6 and 3.9 on a reply to a request in
    flight; the request is entered as in flight directly (the fuzz sends requests the
    client itself would refuse to send).

    Raises:
        RemoteProtocolError: The reply breaks the protocol.
    """
    client = bp.BatchClient("soak-check", version=version)
    client.state = bp.ConnectionState.OPEN
    rid = None if request is None else request.get("id")
    if bp._is_uint(rid) and rid <= bp.MAX_REQUEST_ID:
        name = request.get("op")  # type: ignore[union-attr]
        op = bp.Op(name) if isinstance(name, str) and name in bp._OPS else bp.Op.STATE
        client._pending[rid] = bp._Pending(op, _uint_list(request.get("slots")))  # type: ignore[union-attr]
        if op is bp.Op.HELLO:
            client.state = bp.ConnectionState.HELLO_SENT
    client.receive_data(answer)
    [event] = client.events_received()
    return event


def _sent_messages(request: dict[Any, Any], n: int) -> list[Any]:
    """The ``message`` the request gives each of its ``n`` slots (None: none or unknown)."""
    args, cols = request.get("args"), request.get("cols")
    if isinstance(args, list) and len(args) == n:
        return [a.get("message") if isinstance(a, dict) else None for a in args]
    if isinstance(cols, dict) and isinstance(cols.get("message"), list):
        column = cols["message"]
        if len(column) == n:
            return list(column)
    return [None] * n


def check_batch_answer(frame: Frame, answer: bytes | str | Closed, version: int) -> str:
    """Check the server's answer to one frame on ``/batch``; what the answer was."""
    if frame.size > MAX_FRAME and isinstance(answer, Closed):
        assert answer.code == 1009, f"{frame!r} over max_frame: closed with {answer}"
        return "closed 1009"
    assert not isinstance(answer, Closed), f"{frame!r}: the server closed the connection: {answer}"
    assert isinstance(answer, bytes), f"{frame!r}: a text frame came back: {answer!r}"
    request = _request_of(frame)
    early = _refused_from_its_keys(frame) if request is None else None
    try:
        reply = unpack(answer)
    except WireError as exc:
        raise AssertionError(
            f"{frame!r}: the answer is no frame ({exc}): {answer[:300]!r}"
        ) from None
    if early is not None and reply.get("op") == "error" and reply.get("id") is not None:
        assert (reply.get("code"), reply.get("id")) == ("INVALID_REQUEST", early["id"]), (
            f"{frame!r}: refused from its keys as {reply!r:.300}"
        )
        outcome = "INVALID_REQUEST (3.8, from the keys)"
    else:
        problem = batch_reply_problem(request, reply, version)
        assert problem is None, f"{frame!r}: {problem}: {answer[:300]!r}"
        outcome = _outcome(request, reply)
    try:  # the second check: our client protocol takes it as well
        _reply_event(version, request or early, answer)
    except RemoteProtocolError as exc:
        raise AssertionError(
            f"{frame!r}: our client refuses the reply ({exc}): {answer[:300]!r}"
        ) from None
    return outcome


def _outcome(request: dict[Any, Any] | None, reply: dict[Any, Any]) -> str:
    """The short name of a reply the spec allows; checks what a step echoed."""
    op = reply.get("op")
    if op == "error":
        return str(reply["code"])
    assert request is not None
    if op == "hello":
        return "HelloReceived"
    slots = request.get("slots")
    n = len(slots) if isinstance(slots, list) else 0
    if op == "step":
        sent = _sent_messages(request, n)
        for k, (message, observation) in enumerate(
            zip(sent, slot_observations(reply, n), strict=True)
        ):
            if observation is not None and isinstance(message, str):
                assert observation.get("echoed_message") == message, (
                    f"{request!r:.300}: slot position {k} echoed {observation!r:.300}"
                )
    return f"{op} with slot errors" if reply.get("errors") else str(op)


# -------------------------------------------------------------------------------- /ws


def _json_request(frame: Frame) -> Any:
    """The frame's JSON value as the server reads it; None if it is not JSON."""
    if not frame.text or not frame.utf8:
        return None
    text = frame.data if isinstance(frame.data, str) else frame.data.decode()
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


_ENDS_SESSION = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})  # 2.4


def check_json_answer(frame: Frame, answer: bytes | str | Closed, ws: ClientConnection) -> str:
    """Check the server's answer to one frame on ``/ws``; what the answer was."""
    if frame.size > MAX_FRAME and isinstance(answer, Closed):
        assert answer.code == 1009, f"{frame!r} over max_frame: closed with {answer}"
        return "closed 1009"
    request = _json_request(frame)
    kind = request.get("type") if isinstance(request, dict) else None
    if isinstance(answer, Closed):
        why = f"{frame!r}: the server closed the session with {answer}"
        assert answer.code == 1000, why
        assert frame.utf8, f"{why}: text that is not UTF-8 gets INVALID_JSON (2.6)"
        assert request == {"type": "close"}, f"{why}, but that is no 'close'"
        return "closed 1000 (close)"
    assert isinstance(answer, str), f"{frame!r}: a binary frame came back: {answer!r}"
    problem, reply = json_reply_problem(answer)
    assert problem is None, f"{frame!r}: {problem}: {answer[:300]!r}"
    try:  # the second check: our client protocol takes it as well
        decode_reply(answer)
    except RemoteProtocolError as exc:
        raise AssertionError(f"{frame!r}: our client refuses ({exc}): {answer[:300]!r}") from None
    reply_type, data = reply["type"], reply["data"]
    if frame.text and not frame.utf8:  # RFC 6455 would fail the connection; not ours (2.6)
        assert (reply_type, data.get("code")) == ("error", "INVALID_JSON"), (
            f"{frame!r}: not UTF-8, answered {answer[:300]!r}"
        )
        return "INVALID_JSON (not UTF-8)"
    if reply_type == "observation":
        assert kind in ("reset", "step"), (
            f"{frame!r} answered with an observation: {answer[:300]!r}"
        )
        sent = request.get("data")
        message = sent.get("message") if isinstance(sent, dict) else None
        if kind == "step" and isinstance(message, str):
            assert data["observation"].get("echoed_message") == message, (
                f"{frame!r}: echoed {answer[:300]!r}"
            )
        return f"{kind} observation"
    if reply_type == "state":
        assert kind == "state", f"{frame!r} answered with a state: {answer[:300]!r}"
        return "state"
    code = data["code"]
    assert code in JSON_ERROR_CODES
    if not frame.text:
        assert code == "SESSION_ERROR", f"{frame!r} (binary) answered {answer[:300]!r}"
    if code in _ENDS_SESSION:
        closed = receive(ws)
        why = f"{frame!r}: after {code} the session must close with 1000, got {closed!r}"
        assert isinstance(closed, Closed), why
        assert closed.code == 1000, why
    return str(code)


# ---------------------------------------------------------------------------- raw TCP

_STATUS = re.compile(rb"(?:^|\r\n\r\n)HTTP/1\.[01] (\d{3}) ")


def _server_closes(data: bytes) -> list[tuple[int | None, bytes]]:
    """The close frames (code, reason) among the server's WebSocket frames in ``data``."""
    closes, i = [], 0
    while i + 2 <= len(data):
        opcode, length = data[i] & 0x0F, data[i + 1] & 0x7F
        i += 2
        if length >= 126:
            size = 2 if length == 126 else 8
            length, i = int.from_bytes(data[i : i + size], "big"), i + size
        payload, i = data[i : i + length], i + length
        if opcode == 0x8:
            code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
            closes.append((code, payload[2:]))
    return closes


def check_raw_answer(case: RawCase, received: bytes) -> str:
    """No 5xx (but 503), no close for an internal error; what the server answered."""
    statuses = [int(code) for code in _STATUS.findall(received)]
    assert all(s < 500 or s == 503 for s in statuses), f"{case!r}: answered {received[:300]!r}"
    if case.path is None:
        return f"HTTP {statuses[0]}" if statuses else "closed"
    assert statuses[:1] == [101], f"{case!r}: the upgrade was refused: {received[:300]!r}"
    frames = received[received.index(b"\r\n\r\n") + 4 :]
    closes = _server_closes(frames)
    # the server echoes a close code the peer sent; its own internal errors say so
    assert (1011, b"internal error") not in closes, f"{case!r}: internal error: {frames[:300]!r}"
    return f"closed {closes[0][0]}" if closes else "closed, no close frame"
