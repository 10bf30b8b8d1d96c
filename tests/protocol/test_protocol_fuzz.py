"""Round trips and fuzzing of both codecs (docs/protocol.md sections 2, 3 and 4).

* What one side sends, the other side reads back unchanged (Hypothesis round trips).
* Our server frames are byte for byte what OpenEnv's Pydantic models produce, and our
  server-side validation errors are the ones Pydantic reports (section 2.6).
* Arbitrary bytes or text fed to a decoder only ever raise ``RemoteProtocolError``; fed to a
  server, they never raise but are answered (sections 2.6 and 3.6). The arbitrary input
  includes what docs/security.md lists as hostile: NaN and +-inf, lone surrogates, and
  bytes that are not UTF-8 (in a JSON text frame or a msgpack ``str``).
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any, Literal

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.protocol.arrays import ALLOWED_DTYPES, unpack_ndarray
from openenv_gym.protocol.batch import (
    BatchClient,
    BatchReplyReceived,
    BatchRequestReceived,
    BatchServer,
    ConnectionState,
    HelloRequestReceived,
    SlotError,
    SlotResult,
    decode_frame,
    encode_frame,
)
from openenv_gym.protocol.openenv import (
    ClientSession,
    CloseRequest,
    ErrorCode,
    ErrorReceived,
    ObservationReceived,
    ResetRequest,
    ServerSession,
    SessionState,
    StateReceived,
    StateRequest,
    StepRequest,
    decode_reply,
)
from openenv_gym.protocol.openenv.messages import cut

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROUND_TRIP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ JSON strategies

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | finite | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=15,
)
json_objects = st.dictionaries(text, json_values, max_size=5)

# ----------------------------------------- hostile input (docs/security.md, 2.6, 3.6)

any_text = st.text(st.characters(), max_size=12)  # lone surrogates (category Cs) included
any_float = st.floats()  # NaN, +inf, -inf included
hostile_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | any_float | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=15,
)
hostile_objects = st.dictionaries(any_text, hostile_values, max_size=5)


def _dumps(value: Any, ascii_only: bool) -> str:
    """JSON text as Python writes it: ``NaN``/``Infinity`` literals; a lone surrogate as a
    ``\\ud800`` escape (``ascii_only``) or as itself (a str no UTF-8 can carry)."""
    return json.dumps(value, ensure_ascii=ascii_only)


hostile_json = st.builds(_dumps, hostile_values | hostile_objects, st.booleans())


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


not_utf8 = st.binary(min_size=1, max_size=64).filter(
    lambda b: not _is_utf8(b)
) | st.builds(  # well-formed JSON around bytes that are not UTF-8
    lambda head, bad: b'{"type":"step","data":{"message":"' + head + bad + b'"}}',
    st.binary(max_size=8).filter(_is_utf8),
    st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]),
)
hostile_frames = hostile_json | not_utf8 | any_text


# ---------------------------------------------------- 2.2 / 2.3: JSON round trips


@ROUND_TRIP
@given(st.data())
def test_json_requests_round_trip(data: st.DataObject) -> None:
    """2.2: every request our client sends is read back unchanged by our server."""
    kind = data.draw(st.sampled_from(["reset", "step", "state"]))
    payload = data.draw(json_objects)
    client, server = ClientSession(), ServerSession()
    if kind == "reset":
        client.send_reset(**payload)
        expected: Any = ResetRequest(payload)
    elif kind == "step":
        client.send_step(payload)
        expected = StepRequest(payload)
    else:
        client.send_state()
        expected = StateRequest()
    [frame] = client.data_to_send()
    server.receive_data(frame)
    assert server.events_received() == [expected]
    assert server.data_to_send() == []


rewards = st.none() | st.integers(-(2**53), 2**53) | finite | st.booleans()


@ROUND_TRIP
@given(st.data())
def test_json_replies_round_trip(data: st.DataObject) -> None:
    """2.3: every reply our server sends is read back unchanged by our client."""
    kind = data.draw(st.sampled_from(["observation", "state", "error"]))
    client, server = ClientSession(), ServerSession()
    if kind == "state":
        client.send_state()
    else:
        client.send_reset()
    server.receive_data(client.data_to_send()[0])
    server.events_received()
    if kind == "observation":
        observation, reward = data.draw(json_objects), data.draw(rewards)
        done, metadata = data.draw(st.booleans()), data.draw(st.none() | json_objects)
        server.send_observation(observation, reward, done, metadata)
        expected: Any = ObservationReceived(
            observation, None if reward is None else float(reward), done, metadata or None
        )
    elif kind == "state":
        state = data.draw(json_objects)
        server.send_state(state)
        expected = StateReceived(state)
    else:
        code = data.draw(st.sampled_from(list(ErrorCode)))
        message = data.draw(text)
        details = data.draw(
            st.dictionaries(text.filter(lambda k: k not in ("code", "message")), json_values)
        )
        server.send_error(code, message, **details)
        expected = ErrorReceived(code.value, message, details, code.ends_session)
    [frame] = server.data_to_send()
    client.receive_data(frame)
    assert client.events_received() == [expected]
    assert client.state is (
        SessionState.CLOSED if kind == "error" and expected.ends_session else SessionState.IDLE
    )


# ------------------------------------ 2.3 / 2.6: byte for byte against OpenEnv's models


class _WSObservationResponse(BaseModel):  # OpenEnv's core/env_server/types.py, verbatim shape
    model_config = ConfigDict(extra="forbid")
    type: Literal["observation"] = "observation"
    data: dict[str, Any]


class _WSStateResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["state"] = "state"
    data: dict[str, Any]


class _WSErrorResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["error"] = "error"
    data: dict[str, Any]


class _BaseMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class _WSResetMessage(_BaseMessage):
    type: Literal["reset"] = "reset"
    data: dict[str, Any] = Field(default_factory=dict)


class _WSStepMessage(_BaseMessage):
    type: Literal["step"] = "step"
    data: dict[str, Any] = Field(...)


class _WSStateMessage(_BaseMessage):
    type: Literal["state"] = "state"


class _WSCloseMessage(_BaseMessage):
    type: Literal["close"] = "close"


# Pydantic (Rust) and Python print floats alike except in exponent notation below 1e-4
# (``1e-7`` vs ``1e-07``): both parse to the same number (section 4.1).
plain_floats = finite.filter(lambda x: x == 0 or 1e-4 <= abs(x) < 1e16)
plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | plain_floats | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=15,
)
plain_objects = st.dictionaries(text, plain_values, max_size=5)


@ROUND_TRIP
@given(
    plain_objects,
    st.none() | st.integers(-100, 100) | plain_floats | st.booleans(),
    st.booleans(),
    st.none() | plain_objects,
)
def test_observation_frames_match_openenv_byte_for_byte(
    observation: dict[str, Any], reward: Any, done: bool, metadata: dict[str, Any] | None
) -> None:
    """2.3: ``WSObservationResponse(data=serialize_observation(obs)).model_dump_json()``."""
    server = ServerSession()
    server.receive_data('{"type":"reset"}')
    server.send_observation(observation, reward, done, metadata)
    data: dict[str, Any] = {"observation": observation, "reward": reward, "done": done}
    if metadata:
        data["metadata"] = metadata
    assert server.data_to_send() == [_WSObservationResponse(data=data).model_dump_json()]


@ROUND_TRIP
@given(plain_objects, text, st.sampled_from(list(ErrorCode)))
def test_state_and_error_frames_match_openenv_byte_for_byte(
    state: dict[str, Any], message: str, code: ErrorCode
) -> None:
    server = ServerSession()
    server.receive_data('{"type":"state"}')
    server.send_state(state)
    server.receive_data('{"type":"state"}')
    server.send_error(code, message)
    assert server.data_to_send() == [
        _WSStateResponse(data=state).model_dump_json(),
        _WSErrorResponse(data={"message": message, "code": code.value}).model_dump_json(),
    ]


_MODELS: dict[str, type[BaseModel]] = {
    "reset": _WSResetMessage,
    "step": _WSStepMessage,
    "state": _WSStateMessage,
    "close": _WSCloseMessage,
}


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(sorted(_MODELS)),
    st.dictionaries(
        st.sampled_from(["data", "extra", "seed", "Data", ""]), json_values, max_size=3
    ),
)
def test_server_validation_matches_pydantic(kind: str, fields: dict[str, Any]) -> None:
    """2.6: what we accept OpenEnv accepts, and our ``errors`` are Pydantic's (no ``url``)."""
    message = {"type": kind, **fields}
    server = ServerSession()
    server.receive_data(json.dumps(message))
    try:
        model: BaseModel | None = _MODELS[kind](**message)
        error = None
    except ValidationError as exc:
        model, error = None, exc
    if error is not None:
        [frame] = server.data_to_send()
        reply = json.loads(frame)
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        expected = json.loads(error.json(include_url=False))  # inputs cut when large (2.6)
        expected = [
            {**e, "loc": [cut(part) for part in e["loc"]], "input": cut(e["input"])}
            for e in expected
        ]
        assert reply["data"]["errors"] == json.loads(json.dumps(expected))
        assert server.events_received() == []
    else:
        assert server.data_to_send() == []
        [event] = server.events_received()
        assert getattr(event, "kwargs", getattr(event, "action", None)) == getattr(
            model, "data", None
        )


# -------------------------------------------------- 3.2 / 3.3: msgpack strategies

dtypes = st.sampled_from(sorted(ALLOWED_DTYPES)).map(np.dtype)
ndarrays = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
mp_scalars = (  # msgpack carries NaN and +-inf; its str must be UTF-8 (no lone surrogates)
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | any_float
    | text
    | st.binary(max_size=8)
)
mp_values = st.recursive(
    mp_scalars | ndarrays,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
mp_objects = st.dictionaries(text, mp_values, max_size=4)


def same(a: Any, b: Any) -> bool:
    """Equality that compares ndarrays by dtype, shape and bytes."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


@ROUND_TRIP
@given(mp_objects)
def test_frames_round_trip(message: dict[str, Any]) -> None:
    """3.2/3.3: any map of msgpack values and ndarrays decodes to itself."""
    assert same(decode_frame(encode_frame(message)), message)


def hello_pair(max_slots: int = 64) -> tuple[BatchClient, BatchServer]:
    client, server = BatchClient(), BatchServer()
    client.send_hello()
    server.receive_data(client.data_to_send()[0])
    server.events_received()
    server.send_hello(server="s", env="e", max_slots=max_slots)
    client.receive_data(server.data_to_send()[0])
    client.events_received()
    return client, server


slot_lists = st.lists(st.integers(0, 2**40), min_size=1, max_size=6, unique=True)
results = st.one_of(
    st.builds(
        SlotResult,
        st.none() | mp_objects,
        st.none() | finite,
        st.booleans(),
        st.none() | mp_objects,
    ),
    st.builds(SlotError, text, text, st.dictionaries(text, mp_values, max_size=3)),
)


@ROUND_TRIP
@given(st.data())
def test_batched_requests_and_replies_round_trip(data: st.DataObject) -> None:
    """3.4: arbitrary slots, args and per-slot results travel both ways unchanged."""
    client, server = hello_pair()
    slots = data.draw(slot_lists)
    client.open_slots.update(slots)
    op = data.draw(st.sampled_from(["reset", "step", "state"]))
    args = data.draw(st.lists(mp_objects, min_size=len(slots), max_size=len(slots)))
    if op == "reset":
        rid = client.send_reset(slots, args)
    elif op == "step":
        rid = client.send_step(slots, args)
    else:
        rid = client.send_state(slots)
    server.receive_data(client.data_to_send()[0])
    [request] = server.events_received()
    assert isinstance(request, BatchRequestReceived)
    assert (request.op.value, request.request_id, request.slots) == (op, rid, tuple(slots))
    assert same(list(request.args), args if op != "state" else [])

    answers = data.draw(st.lists(results, min_size=len(slots), max_size=len(slots)))
    server.send_results(request, answers)
    client.receive_data(server.data_to_send()[0])
    [reply] = client.events_received()
    assert isinstance(reply, BatchReplyReceived)
    assert (reply.request_id, reply.slots) == (rid, tuple(slots))
    for pos, (slot, answer) in enumerate(zip(slots, answers, strict=True)):
        if isinstance(answer, SlotError):
            error = reply.errors[slot]
            assert (error.code, error.message) == (answer.code, answer.message)
            assert same(error.details, dict(answer.details))
            assert reply.observations[pos] is None
            continue
        assert slot not in reply.errors
        assert same(reply.observations[pos], answer.observation or {})
        if op != "state":
            expected_reward = math.nan if answer.reward is None else answer.reward
            assert same(reply.rewards[pos : pos + 1], np.array([expected_reward]))
            assert reply.dones[pos] == answer.done
            assert same(reply.metadata[pos], answer.metadata or None)
    assert client.in_flight == 0


# --------------------------------------- arbitrary input: only our errors (2.6, 3.6)


def raised(call: Any, *args: Any) -> BaseException | None:
    """The exception ``call(*args)`` raises, if any."""
    try:
        call(*args)
    except Exception as exc:
        return exc
    return None


def assert_only_remote(call: Any, data: Any) -> None:
    error = raised(call, data)
    assert error is None or isinstance(error, RemoteProtocolError), repr(error)


def _mp_str(data: bytes) -> bytes:
    """A msgpack ``str`` holding ``data`` as it is (UTF-8 or not)."""
    if len(data) < 32:
        return bytes([0xA0 | len(data)]) + data
    return b"\xd9" + struct.pack(">B", len(data)) + data


bad_mp_str = st.binary(max_size=40).filter(lambda b: not _is_utf8(b)).map(_mp_str)
good_mp_str = st.sampled_from(["op", "id", "slots", "args", "versions", "obs", "errors"]).map(
    lambda key: _mp_str(key.encode())
)
# maps whose keys or values are msgpack strs that are not UTF-8 (what msgpack refuses to
# write, and a hostile peer writes anyway)
msgpack_not_utf8 = st.lists(
    st.tuples(bad_mp_str | good_mp_str, bad_mp_str | good_mp_str), min_size=1, max_size=4
).map(lambda pairs: bytes([0x80 | len(pairs)]) + b"".join(k + v for k, v in pairs))

frames = st.binary(max_size=64) | text | hostile_frames | msgpack_not_utf8


@FUZZ
@given(frames)
def test_decoders_only_raise_remote_protocol_error(data: bytes | str) -> None:
    """2.3/3.2/3.3: the decoders raise RemoteProtocolError or nothing (hostile input too)."""
    assert_only_remote(decode_reply, data)
    assert_only_remote(decode_frame, data)
    if isinstance(data, bytes):
        assert_only_remote(unpack_ndarray, data)


json_like_replies = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["observation", "state", "error", "mcp"]) | json_values,
        "data": st.fixed_dictionaries(
            {},
            optional={
                "observation": json_values,
                "reward": json_values | st.sampled_from([math.inf, math.nan, 10**400]),
                "done": json_values,
                "metadata": json_values,
                "code": st.sampled_from([c.value for c in ErrorCode]) | json_values,
                "message": json_values,
            },
        )
        | json_values,
    },
)


@FUZZ
@given(
    st.sampled_from(list(SessionState)),
    json_like_replies | json_values | text | hostile_json | hostile_values,
)
def test_client_session_only_raises_remote_protocol_error(state: SessionState, data: Any) -> None:
    """2.5: in any state, whatever arrives raises RemoteProtocolError or is one event."""
    client = ClientSession()
    if state is SessionState.AWAITING_OBSERVATION:
        client.send_step({})
    elif state is SessionState.AWAITING_STATE:
        client.send_state()
    elif state is SessionState.CLOSED:
        client.connection_lost()
    frame = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    error = raised(client.receive_data, frame)
    if error is None:
        assert len(client.events_received()) == 1
    else:
        assert isinstance(error, RemoteProtocolError), repr(error)
        assert client.state is SessionState.CLOSED


@FUZZ
@given(
    frames
    | json_values.map(json.dumps)
    | json_objects.map(json.dumps)
    | hostile_objects.flatmap(
        lambda data: st.sampled_from(["reset", "step", "state"]).map(
            lambda kind: _dumps({"type": kind, "data": data}, ascii_only=False)
        )
    )
)
def test_server_session_answers_anything(data: bytes | str) -> None:
    """2.6: any frame becomes exactly one request event or exactly one error frame."""
    server = ServerSession()
    server.receive_data(data)
    events, out = server.events_received(), server.data_to_send()
    assert len(events) + len(out) == 1
    if out:
        reply = json.loads(out[0])
        assert reply["type"] == "error"
        assert reply["data"]["code"] in {c.value for c in ErrorCode}
        assert server.closed is (reply["data"]["code"] == "SESSION_ERROR")
    else:
        assert isinstance(events[0], ResetRequest | StepRequest | StateRequest | CloseRequest)


msgpack_like = st.fixed_dictionaries(
    {},
    optional={
        "op": st.sampled_from(["hello", "open", "reset", "step", "state", "close", "error"])
        | mp_values,
        "id": st.integers(-1, 3) | mp_values,
        "slots": st.lists(st.integers(-1, 3), max_size=3) | mp_values,
        "args": st.lists(st.dictionaries(text, mp_values, max_size=2), max_size=3) | mp_values,
        "versions": st.lists(st.integers(0, 2), max_size=2) | mp_values,
        "client": mp_values,
        "version": st.just(1) | mp_values,
        "server": mp_values,
        "env": mp_values,
        "max_slots": mp_values,
        "max_frame": mp_values,
        "obs": mp_values,
        "reward": mp_values,
        "done": mp_values,
        "meta": mp_values,
        "state": mp_values,
        "errors": st.dictionaries(st.integers(-1, 3), mp_values, max_size=2) | mp_values,
        "code": mp_values,
        "message": mp_values,
    },
).map(encode_frame)


@FUZZ
@given(st.booleans(), frames | msgpack_like)
def test_batch_client_only_raises_remote_protocol_error(after_hello: bool, data: Any) -> None:
    """3.6: whatever arrives raises RemoteProtocolError (and closes) or is one event."""
    if after_hello:
        client, _ = hello_pair()
        client.open_slots.update({0, 1, 2})
        client.send_step([0, 1], [{}, {}])
        client.send_state([2])
    else:
        client = BatchClient()
        client.send_hello()
        client.send_open([0, 1])
    error = raised(client.receive_data, data)
    if error is None:
        assert len(client.events_received()) == 1
    else:
        assert isinstance(error, RemoteProtocolError), repr(error)
        assert client.state is ConnectionState.CLOSED


@FUZZ
@given(st.booleans(), frames | msgpack_like)
def test_batch_server_answers_anything(after_hello: bool, data: Any) -> None:
    """3.6.2: any frame becomes exactly one request event or exactly one error frame."""
    server = hello_pair()[1] if after_hello else BatchServer()
    server.receive_data(data)
    events, out = server.events_received(), server.data_to_send()
    assert len(events) + len(out) == 1
    if out:
        reply = decode_frame(out[0])
        assert reply["op"] == "error"
        assert reply["code"] in ("INVALID_FRAME", "INVALID_REQUEST")
        assert reply["id"] is None or isinstance(reply["id"], int)
    else:
        assert isinstance(events[0], HelloRequestReceived | BatchRequestReceived)
