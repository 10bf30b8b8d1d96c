"""Walk every (state, event) pair of the four state machines against their tables.

``docs/protocol.md`` sections 2.5 and 3.7: each machine's state is one enum member, and
one table gives the next state of each legal (state, event) pair. Here every pair of
states x events is driven through the public calls: a legal pair reaches the table's
state; an illegal one raises the machine's typed error (with nothing changed, except
that a frame the client cannot take closes its session or connection). The tables in
the docs are the tables in the code, and every transition goes through ``states.fire``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.protocol import states

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def snapshot(obj: object) -> dict[str, Any]:
    """Everything a protocol object holds, to check that an illegal call changed nothing."""
    return copy.deepcopy(dict(vars(obj)))


def pairs(states: Iterable[Any], events: Iterable[Any]) -> list[tuple[Any, Any]]:
    return [(state, event) for state in states for event in events]


def pair_id(value: Any) -> str:
    return str(value.name)


# ------------------------------------------------------------------ 2.5 JSON client

CE = states.JsonClientEvent
S = op.SessionState
OBS = '{"type":"observation","data":{"observation":{},"reward":null,"done":false}}'
STATE = '{"type":"state","data":{}}'
SOFT_ERROR = '{"type":"error","data":{"message":"m","code":"EXECUTION_ERROR"}}'
FATAL_ERROR = '{"type":"error","data":{"message":"m","code":"CAPACITY_REACHED"}}'


def json_client_in(state: op.SessionState) -> op.ClientSession:
    client = op.ClientSession()
    {
        S.IDLE: lambda: None,
        S.AWAITING_OBSERVATION: client.send_reset,
        S.AWAITING_STATE: client.send_state,
        S.CLOSED: client.send_close,
    }[state]()
    client.data_to_send()
    assert client.state is state
    return client


JSON_CLIENT_CALLS: dict[states.JsonClientEvent, Callable[[op.ClientSession], None]] = {
    CE.SEND_RESET: lambda c: c.send_reset(seed=1),
    CE.SEND_STEP: lambda c: c.send_step({"a": 1}),
    CE.SEND_STATE: lambda c: c.send_state(),
    CE.SEND_CLOSE: lambda c: c.send_close(),
    CE.RECEIVE_OBSERVATION: lambda c: c.receive_data(OBS),
    CE.RECEIVE_STATE: lambda c: c.receive_data(STATE),
    CE.RECEIVE_ERROR: lambda c: c.receive_data(SOFT_ERROR),
    CE.RECEIVE_FATAL_ERROR: lambda c: c.receive_data(FATAL_ERROR),
    CE.PROTOCOL_ERROR: lambda c: c.receive_data("not json"),
    CE.CONNECTION_LOST: lambda c: c.connection_lost(),
}
JSON_CLIENT_SENDS = {CE.SEND_RESET, CE.SEND_STEP, CE.SEND_STATE, CE.SEND_CLOSE}


def walk_client_table(
    client: Any,
    call: Any,
    table: dict[Any, Any],
    pair: tuple[Any, Any],
    *,
    sends: set[Any],
    lost: Any,
    protocol_error: Any,
) -> None:
    """Take one (state, event) pair on a client machine and check it against ``table``.

    A send reaches the table's state and queues one frame, or (illegal) raises
    ``LocalProtocolError`` and changes nothing; losing the connection reaches the table's
    state; a frame the machine cannot take raises ``RemoteProtocolError`` and leaves it
    where a protocol error leads (or where it was); any other frame reaches the table's
    state with one event.
    """
    state, event = pair
    expected = table.get(pair)
    if event in sends:
        if expected is None:
            before = snapshot(client)
            with pytest.raises(LocalProtocolError):
                call(client)
            assert snapshot(client) == before
        else:
            call(client)
            assert client.state is expected
            assert len(client.data_to_send()) == 1
    elif event is lost:
        call(client)
        assert client.state is expected
    elif expected is None or event is protocol_error:
        # a frame the machine cannot take: fatal, or refused once closed
        with pytest.raises(RemoteProtocolError):
            call(client)
        assert client.state is table.get((state, protocol_error), state)
        assert client.events_received() == []
    else:
        call(client)
        assert client.state is expected
        assert len(client.events_received()) == 1


def test_json_client_calls_cover_every_event() -> None:
    assert set(JSON_CLIENT_CALLS) == set(CE)


@pytest.mark.parametrize(("state", "event"), pairs(S, CE), ids=pair_id)
def test_json_client_walks_its_table(state: op.SessionState, event: states.JsonClientEvent) -> None:
    """2.5: a legal pair reaches the table's state; an illegal one raises."""
    walk_client_table(
        json_client_in(state),
        JSON_CLIENT_CALLS[event],
        states.JSON_CLIENT_TRANSITIONS,
        (state, event),
        sends=JSON_CLIENT_SENDS,
        lost=CE.CONNECTION_LOST,
        protocol_error=CE.PROTOCOL_ERROR,
    )


# ------------------------------------------------------------------ 2.5 JSON server

SE = states.JsonServerEvent


def json_server_in(state: op.SessionState) -> op.ServerSession:
    server = op.ServerSession()
    frame = {
        S.IDLE: None,
        S.AWAITING_OBSERVATION: '{"type":"reset"}',
        S.AWAITING_STATE: '{"type":"state"}',
        S.CLOSED: '{"type":"close"}',
    }[state]
    if frame is not None:
        server.receive_data(frame)
    server.events_received()
    assert server.state is state
    assert server.closed is (state is S.CLOSED)
    return server


JSON_SERVER_CALLS: dict[states.JsonServerEvent, list[Callable[[op.ServerSession], None]]] = {
    SE.RECEIVE_RESET: [lambda s: s.receive_data('{"type":"reset","data":{"seed":1}}')],
    SE.RECEIVE_STEP: [lambda s: s.receive_data('{"type":"step","data":{}}')],
    SE.RECEIVE_STATE: [lambda s: s.receive_data('{"type":"state"}')],
    SE.RECEIVE_CLOSE: [lambda s: s.receive_data('{"type":"close"}')],
    SE.RECEIVE_BAD_FRAME: [
        lambda s: s.receive_data("not json"),
        lambda s: s.receive_data('{"type":"dance"}'),
        lambda s: s.receive_invalid_text(b"\xff"),
    ],
    SE.RECEIVE_BINARY: [lambda s: s.receive_data(b'{"type":"state"}')],
    SE.SEND_OBSERVATION: [lambda s: s.send_observation({"o": 1}, 0.5, False)],
    SE.SEND_STATE: [lambda s: s.send_state({"step_count": 0})],
    SE.SEND_ERROR: [lambda s: s.send_error(op.ErrorCode.EXECUTION_ERROR, "boom")],
    SE.SEND_FATAL_ERROR: [
        lambda s: s.send_error(op.ErrorCode.SESSION_ERROR, "gone"),
        lambda s: s.send_error(op.ErrorCode.CAPACITY_REACHED, "full", max_sessions=1),
    ],
}
JSON_SERVER_CASES = [
    (state, event, k) for state, event in pairs(S, SE) for k in range(len(JSON_SERVER_CALLS[event]))
]


def test_json_server_calls_cover_every_event() -> None:
    assert set(JSON_SERVER_CALLS) == set(SE)


@pytest.mark.parametrize(
    ("state", "event", "k"), JSON_SERVER_CASES, ids=lambda v: v if isinstance(v, int) else v.name
)
def test_json_server_walks_its_table(
    state: op.SessionState, event: states.JsonServerEvent, k: int
) -> None:
    """2.5: a legal pair reaches the table's state; an illegal one raises, changing nothing."""
    server = json_server_in(state)
    call = JSON_SERVER_CALLS[event][k]
    expected = states.JSON_SERVER_TRANSITIONS.get((state, event))
    if expected is None:
        before = snapshot(server)
        with pytest.raises(LocalProtocolError):
            call(server)
        assert snapshot(server) == before
        return
    call(server)
    assert server.state is expected
    assert server.closed is (expected is S.CLOSED)
    requests = server.events_received()
    frames = server.data_to_send()
    if event in (SE.RECEIVE_RESET, SE.RECEIVE_STEP, SE.RECEIVE_STATE, SE.RECEIVE_CLOSE):
        assert len(requests) == 1
        assert frames == []
        assert server.pending == (None if event is SE.RECEIVE_CLOSE else requests[0])
    else:  # an answer, or an error frame answering the frame received
        assert requests == []
        assert server.pending is None
        assert [json.loads(frame)["type"] for frame in frames] == [FRAME_TYPES.get(event, "error")]


FRAME_TYPES = {SE.SEND_OBSERVATION: "observation", SE.SEND_STATE: "state"}


# --------------------------------------------------------------- 3.7 batched client

BCE = states.BatchClientEvent
C = bp.ConnectionState


def hello_reply(version: int = 1) -> bytes:
    return bp.encode_frame(
        {
            "op": "hello",
            "id": 0,
            "version": version,
            "server": "s",
            "env": "e",
            "max_slots": 8,
            "max_frame": 2**20,
        }
    )


def open_reply(rid: int) -> bytes:
    return bp.encode_frame({"op": "open", "id": rid})


def batch_client_in(state: bp.ConnectionState) -> bp.BatchClient:
    client = bp.BatchClient("walk")
    if state is not C.NEW:
        client.send_hello()
    if state is C.OPEN:
        client.receive_data(hello_reply())
        client.receive_data(open_reply(client.send_open([0])))
        assert client.open_slots == {0}
    if state is C.CLOSED:
        client.connection_lost()
    client.data_to_send()
    client.events_received()
    assert client.state is state
    return client


def receive_reply(client: bp.BatchClient) -> None:
    """A reply to a request in flight (one is sent first where the table allows it)."""
    if (client.state, BCE.SEND_REQUEST) in states.BATCH_CLIENT_TRANSITIONS:
        rid = client.send_open([7])
        client.data_to_send()
    else:
        rid = 1  # nothing can be in flight: the reply answers nothing
    client.receive_data(open_reply(rid))


BATCH_CLIENT_CALLS: dict[states.BatchClientEvent, Callable[[bp.BatchClient], Any]] = {
    BCE.SEND_HELLO: lambda c: c.send_hello(),
    BCE.SEND_REQUEST: lambda c: c.send_open([5]),
    BCE.RECEIVE_HELLO: lambda c: c.receive_data(hello_reply()),
    BCE.RECEIVE_REPLY: receive_reply,
    BCE.RECEIVE_FATAL_ERROR: lambda c: c.receive_data(
        bp.encode_frame({"op": "error", "id": None, "code": "INVALID_FRAME", "message": "m"})
    ),
    BCE.PROTOCOL_ERROR: lambda c: c.receive_data(b"\xc1 not msgpack"),
    BCE.CONNECTION_LOST: lambda c: c.connection_lost(),
}


def test_batch_client_calls_cover_every_event() -> None:
    assert set(BATCH_CLIENT_CALLS) == set(BCE)


@pytest.mark.parametrize(("state", "event"), pairs(C, BCE), ids=pair_id)
def test_batch_client_walks_its_table(
    state: bp.ConnectionState, event: states.BatchClientEvent
) -> None:
    """3.7: a legal pair reaches the table's state; an illegal one raises."""
    client = batch_client_in(state)
    walk_client_table(
        client,
        BATCH_CLIENT_CALLS[event],
        states.BATCH_CLIENT_TRANSITIONS,
        (state, event),
        sends={BCE.SEND_HELLO, BCE.SEND_REQUEST},
        lost=BCE.CONNECTION_LOST,
        protocol_error=BCE.PROTOCOL_ERROR,
    )
    if client.state is C.CLOSED:  # entering CLOSED forgets every slot and request
        assert (client.open_slots, client.in_flight) == (set(), 0)


# --------------------------------------------------------------- 3.7 batched server

BSE = states.BatchServerEvent
HELLO = bp.encode_frame({"op": "hello", "id": 0, "versions": [1], "client": "c"})


def batch_server_in(state: bp.ConnectionState) -> bp.BatchServer:
    server = bp.BatchServer()
    if state is C.OPEN:
        server.receive_data(HELLO)
        server.send_hello(server="s", env="e", max_slots=8)
    server.data_to_send()
    server.events_received()
    assert server.state is state
    return server


def send_reply(server: bp.BatchServer) -> None:
    """Answer a request in flight, received first (legal pairs only)."""
    server.receive_data(bp.encode_frame({"op": "open", "id": 5, "slots": [0]}))
    [request] = server.events_received()
    assert isinstance(request, bp.BatchRequestReceived)
    server.send_results(request, [None])


BATCH_SERVER_CALLS: dict[states.BatchServerEvent, Callable[[bp.BatchServer], Any]] = {
    BSE.RECEIVE_HELLO: lambda s: s.receive_data(HELLO),
    BSE.RECEIVE_REQUEST: lambda s: s.receive_data(
        bp.encode_frame({"op": "state", "id": 9, "slots": [3]})
    ),
    BSE.RECEIVE_BAD_FRAME: lambda s: s.receive_data(b"\xc1 not msgpack"),
    BSE.SEND_REPLY: send_reply,
}
SERVER_STATES = (C.NEW, C.OPEN)  # the server has no HELLO_SENT and no CLOSED


def test_batch_server_calls_cover_every_event() -> None:
    assert set(BATCH_SERVER_CALLS) == set(BSE)
    assert {state for state, _ in states.BATCH_SERVER_TRANSITIONS} == set(SERVER_STATES)


@pytest.mark.parametrize(("state", "event"), pairs(SERVER_STATES, BSE), ids=pair_id)
def test_batch_server_walks_its_table(
    state: bp.ConnectionState, event: states.BatchServerEvent
) -> None:
    """3.7: a legal pair reaches the table's state; an illegal frame is refused with
    ``INVALID_REQUEST`` (state unchanged), an illegal reply raises with nothing changed."""
    server = batch_server_in(state)
    expected = states.BATCH_SERVER_TRANSITIONS.get((state, event))
    if expected is not None:
        BATCH_SERVER_CALLS[event](server)
        assert server.state is expected
        replies = [bp.decode_frame(frame)["op"] for frame in server.data_to_send()]
        requests = server.events_received()
        if event is BSE.RECEIVE_BAD_FRAME:
            assert (replies, requests) == (["error"], [])
        elif event is BSE.SEND_REPLY:
            assert (replies, requests) == (["open"], [])
        else:
            assert (replies, len(requests)) == ([], 1)
    elif event is BSE.SEND_REPLY:  # nothing can be in flight: every answer is refused
        before = snapshot(server)
        with pytest.raises(LocalProtocolError):
            server.send_hello(server="s", env="e", max_slots=8)
        with pytest.raises(LocalProtocolError):
            server.send_results(bp.BatchRequestReceived(bp.Op.OPEN, 5, (0,)), [None])
        assert snapshot(server) == before
    else:
        BATCH_SERVER_CALLS[event](server)
        [frame] = server.data_to_send()
        reply = bp.decode_frame(frame)
        assert (reply["op"], reply["code"]) == ("error", "INVALID_REQUEST")
        assert server.events_received() == []
        assert server.state is state


# ------------------------------------------------------------------------- the docs

TABLE = re.compile(r"<!-- transitions: ([\w-]+) -->\n((?:\|.*\n)+)")
NAME = re.compile(r"`([A-Z_]+)`")


def documented_tables() -> dict[str, dict[tuple[str, str], str]]:
    """Table name -> {(state, event): next state} as docs/protocol.md draws it."""
    tables = {}
    for name, body in TABLE.findall(DOC.read_text(encoding="utf-8")):
        header, _rule, *rows = [line.strip("|").split("|") for line in body.splitlines()]
        states = [NAME.search(cell).group(1) for cell in header[1:]]
        table = {}
        for row in rows:
            event = NAME.search(row[0]).group(1)
            for state, cell in zip(states, row[1:], strict=True):
                target = NAME.search(cell)
                if target is not None:
                    table[(state, event)] = target.group(1)
                else:
                    assert cell.strip() == "—"
        tables[name] = table
    return tables


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("json-client", states.JSON_CLIENT_TRANSITIONS),
        ("json-server", states.JSON_SERVER_TRANSITIONS),
        ("batch-client", states.BATCH_CLIENT_TRANSITIONS),
        ("batch-server", states.BATCH_SERVER_TRANSITIONS),
    ],
)
def test_documented_tables_are_the_code_tables(name: str, code: dict[Any, Any]) -> None:
    """2.5 and 3.7 draw exactly the tables the state machines consult."""
    in_code = {(state.name, event.name): target.name for (state, event), target in code.items()}
    assert documented_tables()[name] == in_code


def test_every_documented_event_is_an_event() -> None:
    tables = documented_tables()
    for name, events in [
        ("json-client", CE),
        ("json-server", SE),
        ("batch-client", BCE),
        ("batch-server", BSE),
    ]:
        assert {event for _, event in tables[name]} == {e.name for e in events}
