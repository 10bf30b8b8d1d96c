"""OpenEnv's JSON ``/ws`` protocol, client and server sessions (docs/protocol.md section 2)."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import pytest

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
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
    code_ends_session,
    decode_reply,
    dumps,
    encode_request,
    observation_payload,
)
from openenv_gym.protocol.openenv import messages as openenv_messages


def snapshot(obj: ClientSession | ServerSession) -> dict[str, Any]:
    """Everything a session holds, to check that an illegal call changed nothing."""
    return copy.deepcopy({name: getattr(obj, name) for name in vars(obj)})


def client_in(state: SessionState) -> ClientSession:
    client = ClientSession()
    if state is SessionState.AWAITING_OBSERVATION:
        client.send_reset()
    elif state is SessionState.AWAITING_STATE:
        client.send_state()
    elif state is SessionState.CLOSED:
        client.send_close()
    client.data_to_send()
    return client


def server_with(frame: str) -> ServerSession:
    server = ServerSession()
    server.receive_data(frame)
    return server


def only_frame(server: ServerSession) -> dict[str, Any]:
    [frame] = server.data_to_send()
    message = json.loads(frame)
    assert isinstance(message, dict)
    return message


# ----------------------------------------------------------------------- 2.4 error codes


@pytest.mark.parametrize(
    ("code", "ends"),
    [
        (ErrorCode.INVALID_JSON, False),
        (ErrorCode.UNKNOWN_TYPE, False),
        (ErrorCode.VALIDATION_ERROR, False),
        (ErrorCode.EXECUTION_ERROR, False),
        (ErrorCode.CAPACITY_REACHED, True),
        (ErrorCode.FACTORY_ERROR, True),
        (ErrorCode.SESSION_ERROR, True),
    ],
)
def test_which_codes_end_the_session(code: ErrorCode, ends: bool) -> None:
    """2.4: the table of codes and whether the server closes after sending them."""
    assert code.ends_session is ends
    assert code_ends_session(code.value) is ends
    assert str(code) == code.value  # a StrEnum: the wire string itself


def test_there_are_exactly_seven_openenv_codes() -> None:
    assert [c.value for c in ErrorCode] == [
        "INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR",
        "CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR",
    ]  # fmt: skip


def test_unknown_codes_do_not_end_the_session() -> None:
    """2.4: a code this client does not know is treated as non-fatal."""
    assert code_ends_session("SOME_FUTURE_CODE") is False


# ------------------------------------------------------------------------ 2.1 framing


def test_dumps_is_compact_utf8_like_pydantic() -> None:
    """2.1: no spaces, non-ASCII as is (Pydantic ``model_dump_json``)."""
    assert dumps({"a": [1, 2.5, None, True], "é": "ü✓"}) == '{"a":[1,2.5,null,true],"é":"ü✓"}'


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        {1, 2},
        object(),
        b"bytes",
        {"k": float("-inf")},
        "\ud800",
        {"é": ["\udcff"]},
    ],
)
def test_dumps_refuses_what_is_not_json(value: Any) -> None:
    """2.1: NaN/Infinity are not JSON; we refuse them rather than emit them. A lone
    surrogate is refused here too: UTF-8 cannot carry it, so the frame could not be sent."""
    with pytest.raises(LocalProtocolError, match="cannot encode as JSON"):
        dumps(value)


def test_dumps_refuses_nesting_too_deep_for_the_encoder() -> None:
    deep: list[Any] = []
    for _ in range(sys.getrecursionlimit() + 10):
        deep = [deep]
    with pytest.raises(LocalProtocolError):
        dumps(deep)


# ---------------------------------------------------------------- 2.2 client messages


@pytest.mark.parametrize(
    ("request_", "frame"),
    [
        (ResetRequest(), '{"type":"reset","data":{}}'),
        (
            ResetRequest({"seed": 1, "episode_id": "ep"}),
            '{"type":"reset","data":{"seed":1,"episode_id":"ep"}}',
        ),
        (StepRequest({"message": "héllo"}), '{"type":"step","data":{"message":"héllo"}}'),
        (StateRequest(), '{"type":"state"}'),
        (CloseRequest(), '{"type":"close"}'),
    ],
)
def test_request_frames(request_: Any, frame: str) -> None:
    """2.2: the exact text of each client message."""
    assert encode_request(request_) == frame


def test_client_send_methods_queue_the_frames() -> None:
    client = ClientSession()
    client.send_reset(seed=3)
    assert client.data_to_send() == ['{"type":"reset","data":{"seed":3}}']
    assert client.data_to_send() == []


# ----------------------------------------------------------------- 2.3 server replies


def test_observation_frame_is_byte_for_byte_openenv() -> None:
    """2.3: what an OpenEnv echo server sends (Pydantic ``model_dump_json``)."""
    server = server_with('{"type":"step","data":{"message":"hi"}}')
    server.send_observation({"echoed_message": "hi"}, 0.2, False)
    assert server.data_to_send() == [
        '{"type":"observation","data":{"observation":{"echoed_message":"hi"},"reward":0.2,"done":false}}'
    ]


def test_observation_frame_with_metadata_is_byte_for_byte_openenv_0_4() -> None:
    """2.3: openenv >= 0.4 keeps metadata in the observation and copies it to the top."""
    server = server_with('{"type":"reset"}')
    server.send_observation(
        {"echoed_message": "", "metadata": {"status": "ready"}}, None, False, {"status": "ready"}
    )
    assert server.data_to_send() == [
        '{"type":"observation","data":{"observation":{"echoed_message":"","metadata":'
        '{"status":"ready"}},"reward":null,"done":false,"metadata":{"status":"ready"}}}'
    ]


def test_state_and_error_frames_are_byte_for_byte_openenv() -> None:
    server = server_with('{"type":"state"}')
    server.send_state({"episode_id": "ép", "step_count": 1})
    assert server.data_to_send() == ['{"type":"state","data":{"episode_id":"ép","step_count":1}}']
    server.receive_data('{"type":"step","data":{}}')
    server.send_error(ErrorCode.EXECUTION_ERROR, "boom")
    assert server.data_to_send() == [
        '{"type":"error","data":{"message":"boom","code":"EXECUTION_ERROR"}}'
    ]


def test_capacity_frame_carries_its_extras() -> None:
    """2.4: CAPACITY_REACHED carries active_sessions and max_sessions, unsolicited."""
    server = ServerSession()
    server.send_error(ErrorCode.CAPACITY_REACHED, "full", active_sessions=1, max_sessions=1)
    assert server.data_to_send() == [
        '{"type":"error","data":{"message":"full","code":"CAPACITY_REACHED",'
        '"active_sessions":1,"max_sessions":1}}'
    ]
    assert server.closed


@pytest.mark.parametrize(
    ("metadata", "top_level"),
    [(None, None), ({}, None), ({"a": 1}, {"a": 1})],
)
def test_observation_payload_metadata_rule(
    metadata: dict[str, Any] | None, top_level: dict[str, Any] | None
) -> None:
    """2.3: top-level ``metadata`` only when non-empty; the observation is sent as given."""
    observation = {"x": 1, "metadata": metadata or {}}
    data = observation_payload(observation, 1.0, True, metadata)
    assert data["observation"] == observation
    assert data["observation"] is not observation
    assert data.get("metadata") == top_level
    assert ("metadata" in data) is (top_level is not None)
    assert list(data)[:3] == ["observation", "reward", "done"]


def test_observation_payload_copies_metadata() -> None:
    metadata = {"a": 1}
    data = observation_payload({}, None, False, metadata)
    assert data["metadata"] == metadata
    assert data["metadata"] is not metadata


# decode_reply (client side), every branch


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (
            '{"type":"observation","data":{"observation":{"a":1},"reward":0.5,"done":true}}',
            ObservationReceived({"a": 1}, 0.5, True, None),
        ),
        (
            '{"type":"observation","data":{"observation":{},"reward":null,"done":false,'
            '"metadata":{"m":1}}}',
            ObservationReceived({}, None, False, {"m": 1}),
        ),
        # reward may be an int or a bool (OpenEnv does not coerce); done defaults to false
        (
            '{"type":"observation","data":{"observation":{},"reward":2}}',
            ObservationReceived({}, 2.0, False),
        ),
        (
            '{"type":"observation","data":{"observation":{},"reward":true}}',
            ObservationReceived({}, 1.0, False),
        ),
        ('{"type":"observation","data":{"observation":{}}}', ObservationReceived({}, None, False)),
        (
            '{"type":"observation","data":{"observation":{},"metadata":null}}',
            ObservationReceived({}, None, False),
        ),
        ('{"type":"state","data":{"step_count":0}}', StateReceived({"step_count": 0})),
        (
            '{"type":"error","data":{"message":"m","code":"VALIDATION_ERROR","errors":[]}}',
            ErrorReceived("VALIDATION_ERROR", "m", {"errors": []}, False),
        ),
        (
            '{"type":"error","data":{"code":"SESSION_ERROR"}}',
            ErrorReceived("SESSION_ERROR", "", {}, True),
        ),
        (
            '{"type":"error","data":{"code":"NEW","message":"x"},"extra":1}',
            ErrorReceived("NEW", "x", {}, False),
        ),
    ],
)
def test_decode_reply_accepts(frame: str, expected: Any) -> None:
    """2.3: valid server frames and the event each becomes."""
    assert decode_reply(frame) == expected


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (b'{"type":"state","data":{}}', "binary frame"),
        (bytearray(b"{}"), "binary frame"),
        ("not json", "invalid JSON"),
        ("[" * 100_000, "invalid JSON"),  # nested beyond the parser's recursion limit
        ("[1]", "not a JSON object"),
        ('"x" ', "not a JSON object"),
        ('{"type":"state"}', "has no object 'data'"),
        ('{"type":"state","data":[]}', "has no object 'data'"),
        ('{"type":"observation","data":{"reward":0}}', "without an 'observation' object"),
        ('{"type":"observation","data":{"observation":[]}}', "without an 'observation' object"),
        ('{"type":"observation","data":{"observation":{},"done":1}}', "'done' must be a boolean"),
        (
            '{"type":"observation","data":{"observation":{},"done":null}}',
            "'done' must be a boolean",
        ),
        (
            '{"type":"observation","data":{"observation":{},"metadata":[]}}',
            "'metadata' must be an object",
        ),
        ('{"type":"observation","data":{"observation":{},"reward":"1"}}', "finite number or null"),
        ('{"type":"observation","data":{"observation":{},"reward":NaN}}', "finite number or null"),
        (
            '{"type":"observation","data":{"observation":{},"reward":-Infinity}}',
            "finite number or null",
        ),
        (
            '{"type":"observation","data":{"observation":{},"reward":1e999}}',
            "finite number or null",
        ),
        (
            '{"type":"observation","data":{"observation":{},"reward":1' + "0" * 400 + "}}",
            "finite number or null",
        ),
        ('{"type":"error","data":{"message":"m"}}', "malformed error frame"),
        ('{"type":"error","data":{"code":"X","message":3}}', "malformed error frame"),
        ('{"type":"mcp","data":{}}', "unknown server frame type 'mcp'"),
        ('{"data":{}}', "unknown server frame type None"),
    ],
)
def test_decode_reply_rejects(frame: str | bytes, match: str) -> None:
    """2.3: anything else is a RemoteProtocolError, never another exception."""
    with pytest.raises(RemoteProtocolError, match=match):
        decode_reply(frame)


def test_decode_reply_messages_stay_short_for_huge_or_deep_values() -> None:
    deep = "[" * 900 + "]" * 900
    with pytest.raises(RemoteProtocolError) as info:
        decode_reply('{"type":"observation","data":{"observation":{},"done":' + deep + "}}")
    assert len(str(info.value)) < 200
    with pytest.raises(RemoteProtocolError) as info:
        decode_reply('{"type":' + '"' + "x" * 10_000 + '","data":{}}')
    assert len(str(info.value)) < 200


# ------------------------------------------------------- 2.5 client state machine


def test_client_transition_table() -> None:
    """2.5: IDLE -> AWAITING_* on a request, back to IDLE on its reply."""
    client = ClientSession()
    assert client.state is SessionState.IDLE
    client.send_reset()
    assert client.state is SessionState.AWAITING_OBSERVATION
    client.receive_data('{"type":"observation","data":{"observation":{},"reward":0,"done":false}}')
    assert client.state is SessionState.IDLE
    client.send_step({"a": 1})
    assert client.state is SessionState.AWAITING_OBSERVATION
    client.receive_data('{"type":"error","data":{"message":"bad","code":"VALIDATION_ERROR"}}')
    assert client.state is SessionState.IDLE
    client.send_state()
    assert client.state is SessionState.AWAITING_STATE
    client.receive_data('{"type":"state","data":{}}')
    assert client.state is SessionState.IDLE
    assert [type(e) for e in client.events_received()] == [
        ObservationReceived, ErrorReceived, StateReceived,
    ]  # fmt: skip
    assert client.events_received() == []
    client.send_close()
    assert client.state is SessionState.CLOSED
    assert client.data_to_send()[-1] == '{"type":"close"}'


@pytest.mark.parametrize(
    "state", [SessionState.AWAITING_OBSERVATION, SessionState.AWAITING_STATE, SessionState.CLOSED]
)
@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.send_reset(),
        lambda c: c.send_step({"a": 1}),
        lambda c: c.send_state(),
    ],
    ids=["reset", "step", "state"],
)
def test_client_one_request_in_flight(state: SessionState, call: Any) -> None:
    """2.5: no request ids, so a second request while one is in flight is illegal."""
    client = client_in(state)
    before = snapshot(client)
    with pytest.raises(LocalProtocolError):
        call(client)
    assert snapshot(client) == before


@pytest.mark.parametrize(
    "state", [SessionState.IDLE, SessionState.AWAITING_OBSERVATION, SessionState.AWAITING_STATE]
)
def test_client_close_is_allowed_in_every_open_state(state: SessionState) -> None:
    client = client_in(state)
    client.send_close()
    assert client.state is SessionState.CLOSED
    assert client.data_to_send() == ['{"type":"close"}']


def test_client_close_twice_is_illegal() -> None:
    client = client_in(SessionState.CLOSED)
    before = snapshot(client)
    with pytest.raises(LocalProtocolError, match="already closed"):
        client.send_close()
    assert snapshot(client) == before


@pytest.mark.parametrize(
    "call",
    [lambda c: c.send_step({"x": float("nan")}), lambda c: c.send_reset(options={1, 2})],
    ids=["nan", "set"],
)
def test_client_unencodable_request_leaves_state_unchanged(call: Any) -> None:
    client = ClientSession()
    before = snapshot(client)
    with pytest.raises(LocalProtocolError):
        call(client)
    assert snapshot(client) == before


OBS = '{"type":"observation","data":{"observation":{},"reward":null,"done":false}}'
STATE = '{"type":"state","data":{}}'
SOFT_ERROR = '{"type":"error","data":{"message":"m","code":"EXECUTION_ERROR"}}'
FATAL_ERROR = '{"type":"error","data":{"message":"m","code":"FACTORY_ERROR"}}'


@pytest.mark.parametrize(
    ("state", "frame", "match"),
    [
        (SessionState.IDLE, OBS, "unsolicited ObservationReceived"),
        (SessionState.IDLE, STATE, "unsolicited StateReceived"),
        (SessionState.IDLE, SOFT_ERROR, "unsolicited EXECUTION_ERROR"),
        (SessionState.AWAITING_OBSERVATION, STATE, "expected ObservationReceived"),
        (SessionState.AWAITING_STATE, OBS, "expected StateReceived"),
        (SessionState.AWAITING_STATE, "garbage", "invalid JSON"),
        (SessionState.CLOSED, OBS, "closed session"),
    ],
)
def test_client_rejects_replies_that_answer_nothing(
    state: SessionState, frame: str, match: str
) -> None:
    """2.5: an unexpected frame means the stream is out of step: fatal."""
    client = client_in(state)
    with pytest.raises(RemoteProtocolError, match=match):
        client.receive_data(frame)
    assert client.state is SessionState.CLOSED
    assert client.events_received() == []


@pytest.mark.parametrize(
    "state", [SessionState.IDLE, SessionState.AWAITING_OBSERVATION, SessionState.AWAITING_STATE]
)
def test_client_fatal_error_closes_from_any_open_state(state: SessionState) -> None:
    """2.4/2.5: fatal codes may arrive unsolicited (CAPACITY_REACHED after the upgrade)."""
    client = client_in(state)
    client.receive_data(FATAL_ERROR)
    assert client.state is SessionState.CLOSED
    [event] = client.events_received()
    assert isinstance(event, ErrorReceived)
    assert event.ends_session


@pytest.mark.parametrize("state", [SessionState.AWAITING_OBSERVATION, SessionState.AWAITING_STATE])
def test_client_soft_error_answers_the_request(state: SessionState) -> None:
    client = client_in(state)
    client.receive_data(SOFT_ERROR)
    assert client.state is SessionState.IDLE
    [event] = client.events_received()
    assert event == ErrorReceived("EXECUTION_ERROR", "m", {}, False)


@pytest.mark.parametrize(
    "state", [SessionState.IDLE, SessionState.AWAITING_OBSERVATION, SessionState.AWAITING_STATE]
)
def test_client_connection_lost_closes(state: SessionState) -> None:
    """2.5: a lost connection or a timeout ends the session; the request is lost."""
    client = client_in(state)
    client.connection_lost()
    assert client.state is SessionState.CLOSED
    with pytest.raises(LocalProtocolError):
        client.send_reset()


# ---------------------------------------------------- 2.6 server-side validation


@pytest.mark.parametrize(
    ("frame", "request_"),
    [
        ('{"type":"reset"}', ResetRequest({})),
        ('{"type":"reset","data":{}}', ResetRequest({})),
        (
            '{"type":"reset","data":{"seed":-5,"unknown":[1]}}',
            ResetRequest({"seed": -5, "unknown": [1]}),
        ),
        ('{"type":"step","data":{}}', StepRequest({})),
        (
            '{"type":"step","data":{"message":"hi","metadata":{}}}',
            StepRequest({"message": "hi", "metadata": {}}),
        ),
        ('{"type":"state"}', StateRequest()),
        ('{"type": "state"}\n', StateRequest()),
        ('{"data":{},"type":"step"}', StepRequest({})),
    ],
)
def test_server_accepts(frame: str, request_: Any) -> None:
    """2.6: valid frames become one request event and no frame is sent."""
    server = server_with(frame)
    assert server.events_received() == [request_]
    assert server.data_to_send() == []
    assert server.pending == request_
    assert not server.closed


def test_server_close_request_closes_without_reply() -> None:
    """2.2: ``close`` has no reply; the server closes the socket (code 1000)."""
    server = server_with('{"type":"close"}')
    assert server.events_received() == [CloseRequest()]
    assert server.data_to_send() == []
    assert server.closed
    assert server.pending is None


def _err(kind: str, loc: str, msg: str, value: Any) -> dict[str, Any]:
    return {"type": kind, "loc": [loc], "msg": msg, "input": value}


EXTRA = "Extra inputs are not permitted"
DICT = "Input should be a valid dictionary"


@pytest.mark.parametrize(
    ("frame", "code", "message", "errors"),
    [
        (
            "not json",
            "INVALID_JSON",
            "Invalid JSON: Expecting value: line 1 column 1 (char 0)",
            None,
        ),
        ("", "INVALID_JSON", "Invalid JSON: Expecting value: line 1 column 1 (char 0)", None),
        ('{"type":"reset"', "INVALID_JSON", None, None),
        ("{}", "UNKNOWN_TYPE", "Unknown message type: ", None),
        ('{"type":"bogus"}', "UNKNOWN_TYPE", "Unknown message type: bogus", None),
        ('{"type":"mcp","data":{}}', "UNKNOWN_TYPE", "Unknown message type: mcp", None),
        ('{"type":"Reset"}', "UNKNOWN_TYPE", "Unknown message type: Reset", None),
        ('{"type":null}', "UNKNOWN_TYPE", "Unknown message type: None", None),
        ('{"type":7}', "UNKNOWN_TYPE", "Unknown message type: 7", None),
        ('{"type":["reset"]}', "UNKNOWN_TYPE", "Unknown message type: ['reset']", None),
        ('{"type":{"a":1}}', "UNKNOWN_TYPE", "Unknown message type: {'a': 1}", None),
        # 2.7: OpenEnv ends the session with SESSION_ERROR here; we answer and go on
        ("[1,2]", "UNKNOWN_TYPE", "Unknown message type: ", None),
        ('"reset"', "UNKNOWN_TYPE", "Unknown message type: ", None),
        ("null", "UNKNOWN_TYPE", "Unknown message type: ", None),
        ("3", "UNKNOWN_TYPE", "Unknown message type: ", None),
        (
            '{"type":"step"}',
            "VALIDATION_ERROR",
            "Invalid message",
            [_err("missing", "data", "Field required", {"type": "step"})],
        ),
        (
            '{"type":"step","data":null}',
            "VALIDATION_ERROR",
            "Invalid message",
            [_err("dict_type", "data", DICT, None)],
        ),
        (
            '{"type":"reset","data":[1]}',
            "VALIDATION_ERROR",
            "Invalid message",
            [_err("dict_type", "data", DICT, [1])],
        ),
        (
            '{"type":"reset","extra":1}',
            "VALIDATION_ERROR",
            "Invalid message",
            [_err("extra_forbidden", "extra", EXTRA, 1)],
        ),
        (
            '{"type":"state","data":{}}',
            "VALIDATION_ERROR",
            "Invalid message",
            [_err("extra_forbidden", "data", EXTRA, {})],
        ),
        (
            '{"type":"close","data":null}',
            "VALIDATION_ERROR",
            "Invalid message",
            [_err("extra_forbidden", "data", EXTRA, None)],
        ),
        (
            '{"type":"step","z":1,"a":2}',
            "VALIDATION_ERROR",
            "Invalid message",
            [
                _err("missing", "data", "Field required", {"type": "step", "z": 1, "a": 2}),
                _err("extra_forbidden", "z", EXTRA, 1),
                _err("extra_forbidden", "a", EXTRA, 2),
            ],
        ),
        (
            '{"type":"step","data":5,"x":1}',
            "VALIDATION_ERROR",
            "Invalid message",
            [_err("dict_type", "data", DICT, 5), _err("extra_forbidden", "x", EXTRA, 1)],
        ),
    ],
)
def test_server_answers_malformed_frames_and_keeps_the_session(
    frame: str, code: str, message: str | None, errors: list[Any] | None
) -> None:
    """2.6: every validation branch, answered as an OpenEnv server answers it."""
    server = server_with(frame)
    reply = only_frame(server)
    assert reply["type"] == "error"
    assert reply["data"]["code"] == code
    if message is not None:
        assert reply["data"]["message"] == message
    assert reply["data"].get("errors") == errors
    assert list(reply["data"])[:2] == ["message", "code"]
    assert server.events_received() == []
    assert not server.closed
    assert server.pending is None
    server.receive_data('{"type":"state"}')  # the session goes on
    assert server.events_received() == [StateRequest()]


@pytest.mark.parametrize("frame", [b'{"type":"state"}', bytearray(b"x"), memoryview(b"")])
def test_server_binary_frame_is_a_session_error(frame: bytes) -> None:
    """2.1/2.6: a binary frame is answered with SESSION_ERROR and the session ends."""
    server = server_with(frame)
    assert only_frame(server) == {
        "type": "error",
        "data": {"message": "Binary frames are not supported", "code": "SESSION_ERROR"},
    }
    assert server.closed
    assert server.events_received() == []


def test_server_echo_of_an_input_too_deep_to_encode_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2.6: if the ``errors`` cannot be encoded, the frame still goes, without them."""
    monkeypatch.setattr(openenv_messages, "_error", lambda *args: {"input": float("nan")})
    server = server_with('{"type":"step"}')
    assert only_frame(server) == {
        "type": "error",
        "data": {"message": "Invalid message", "code": "VALIDATION_ERROR"},
    }
    assert not server.closed


def test_server_never_raises_on_deeply_nested_input() -> None:
    """2.6: around the parser's recursion limit, every frame gets an answer."""
    limit = sys.getrecursionlimit()
    for depth in range(max(limit - 200, 1), limit + 20):
        inner = "[" * depth + "]" * depth
        server = server_with('{"type":"step","x":' + inner + "}")
        reply = only_frame(server)
        assert reply["data"]["code"] in ("VALIDATION_ERROR", "INVALID_JSON")
        assert not server.closed


# ------------------------------------------------------- 2.5 server state machine


def pending_server(frame: str) -> ServerSession:
    server = server_with(frame)
    server.events_received()
    return server


@pytest.mark.parametrize(
    ("frame", "call"),
    [
        ('{"type":"reset"}', lambda s: s.send_state({})),
        ('{"type":"step","data":{}}', lambda s: s.send_state({})),
        ('{"type":"state"}', lambda s: s.send_observation({}, 0.0, False)),
        ('{"type":"reset"}', lambda s: s.receive_data('{"type":"state"}')),
        ('{"type":"state"}', lambda s: s.receive_data(b"binary")),
        ('{"type":"close"}', lambda s: s.receive_data('{"type":"state"}')),
        ('{"type":"close"}', lambda s: s.send_observation({}, 0.0, False)),
        ('{"type":"close"}', lambda s: s.send_error(ErrorCode.EXECUTION_ERROR, "x")),
        ('{"type":"close"}', lambda s: s.send_error(ErrorCode.SESSION_ERROR, "x")),
        ('{"type":"reset"}', lambda s: s.send_observation({"x": float("nan")}, 0.0, False)),
        ('{"type":"reset"}', lambda s: s.send_observation({}, float("inf"), False)),
        ('{"type":"state"}', lambda s: s.send_state({"x": object()})),
        ('{"type":"state"}', lambda s: s.send_error(ErrorCode.EXECUTION_ERROR, "x", y={1})),
        ('{"type":"state"}', lambda s: s.send_error(ErrorCode.FACTORY_ERROR, "x", y={1})),
        ('"bad"', lambda s: s.send_error(ErrorCode.EXECUTION_ERROR, "nothing pending")),
        ('"bad"', lambda s: s.send_state({})),
    ],
)
def test_server_illegal_calls_leave_state_unchanged(frame: str, call: Any) -> None:
    """2.5: answering nothing, answering twice, or after close raises LocalProtocolError."""
    server = pending_server(frame)
    server.data_to_send()
    before = snapshot(server)
    with pytest.raises(LocalProtocolError):
        call(server)
    assert snapshot(server) == before


def test_server_answers_each_kind_of_request() -> None:
    server = pending_server('{"type":"reset","data":{"seed":1}}')
    server.send_observation({"o": 1}, None, False)
    server.receive_data('{"type":"step","data":{"a":1}}')
    server.send_error(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=[])
    server.receive_data('{"type":"state"}')
    server.send_error(ErrorCode.EXECUTION_ERROR, "boom")
    server.receive_data('{"type":"state"}')
    server.send_state({"step_count": 0})
    assert len(server.data_to_send()) == 4
    assert not server.closed


def test_server_fatal_error_while_a_request_is_pending_closes() -> None:
    server = pending_server('{"type":"step","data":{}}')
    server.send_error(ErrorCode.SESSION_ERROR, "gone")
    assert server.closed
    assert server.pending is None
    assert json.loads(server.data_to_send()[0])["data"]["code"] == "SESSION_ERROR"


# ---------------------------------------------------------------- pair tests (2.5)


def pump_request(client: ClientSession, server: ServerSession) -> list[Any]:
    for frame in client.data_to_send():
        server.receive_data(frame)
    return server.events_received()


def pump_reply(server: ServerSession, client: ClientSession) -> list[Any]:
    for frame in server.data_to_send():
        client.receive_data(frame)
    return client.events_received()


def test_pair_episode() -> None:
    """2.5: a whole session between our client and our server, in memory."""
    client, server = ClientSession(), ServerSession()
    client.send_reset(seed=7, episode_id="ep-1")
    assert pump_request(client, server) == [ResetRequest({"seed": 7, "episode_id": "ep-1"})]
    server.send_observation({"board": "....."}, None, False, {"turn": 0})
    assert pump_reply(server, client) == [
        ObservationReceived({"board": "....."}, None, False, {"turn": 0})
    ]
    for turn in range(3):
        client.send_step({"guess": f"w{turn}"})
        [request] = pump_request(client, server)
        assert request == StepRequest({"guess": f"w{turn}"})
        server.send_observation({"board": f"b{turn}"}, 1.0 * turn, turn == 2)
        [event] = pump_reply(server, client)
        assert event == ObservationReceived({"board": f"b{turn}"}, 1.0 * turn, turn == 2)
    client.send_state()
    assert pump_request(client, server) == [StateRequest()]
    server.send_state({"episode_id": "ep-1", "step_count": 3})
    assert pump_reply(server, client) == [StateReceived({"episode_id": "ep-1", "step_count": 3})]
    client.send_close()
    assert pump_request(client, server) == [CloseRequest()]
    assert server.closed
    assert client.state is SessionState.CLOSED
    assert server.data_to_send() == []


def test_pair_soft_errors_keep_both_sides_going() -> None:
    client, server = ClientSession(), ServerSession()
    client.send_step({"bad": True})
    pump_request(client, server)
    server.send_error(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=[{"loc": ["bad"]}])
    [event] = pump_reply(server, client)
    assert event == ErrorReceived(
        "VALIDATION_ERROR", "Invalid message", {"errors": [{"loc": ["bad"]}]}, False
    )
    assert client.state is SessionState.IDLE
    assert not server.closed


def test_pair_capacity_reached_right_after_the_upgrade() -> None:
    """2.4: the server pushes CAPACITY_REACHED before any request and closes."""
    client, server = ClientSession(), ServerSession()
    server.send_error(
        ErrorCode.CAPACITY_REACHED, "Server at capacity", active_sessions=8, max_sessions=8
    )
    [event] = pump_reply(server, client)
    assert event.code == "CAPACITY_REACHED"
    assert event.details == {"active_sessions": 8, "max_sessions": 8}
    assert event.ends_session
    assert client.state is SessionState.CLOSED
    assert server.closed


def test_pair_server_answers_malformed_client_frames_itself() -> None:
    server = ServerSession()
    client = ClientSession()
    client.send_state()
    client.data_to_send()
    server.receive_data("{oops")  # a frame some other client sent
    [event] = pump_reply(server, client)
    assert isinstance(event, ErrorReceived)
    assert event.code == "INVALID_JSON"
    assert client.state is SessionState.IDLE


# ----------------------------------------------------- 2.6 text frames that are not UTF-8


def test_server_answers_text_that_is_not_utf8_and_keeps_the_session() -> None:
    """2.6: RFC 6455 would fail the connection; we answer INVALID_JSON, as for any text
    that is not JSON, and the next request is served."""
    server = ServerSession()
    server.receive_invalid_text(b'{"type":"step","data":{"message":"\xff"}}')
    assert server.events_received() == []
    reply = only_frame(server)
    assert reply["type"] == "error"
    assert reply["data"]["code"] == "INVALID_JSON"
    assert reply["data"]["message"].startswith("Invalid JSON: text is not UTF-8: ")
    assert "0xff" in reply["data"]["message"]
    assert not server.closed
    server.receive_data('{"type":"state"}')
    assert server.events_received() == [StateRequest()]


def test_server_invalid_text_needs_invalid_text_and_an_open_idle_session() -> None:
    server = ServerSession()
    with pytest.raises(LocalProtocolError, match="receive_data"):
        server.receive_invalid_text(b'{"type":"state"}')
    server.receive_data('{"type":"state"}')
    before = snapshot(server)
    with pytest.raises(LocalProtocolError, match="not answered"):
        server.receive_invalid_text(b"\xff")
    assert snapshot(server) == before
    closed = server_with('{"type":"close"}')
    with pytest.raises(LocalProtocolError, match="closed"):
        closed.receive_invalid_text(b"\xff")
