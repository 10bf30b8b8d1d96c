"""How the transport fails: timeouts, fallbacks, refused and lost connections, garbage.

Every failure must surface as an ``openenv_gym.exceptions`` error, promptly, and leave a
session that can no longer be trusted closed.
"""

from __future__ import annotations

import concurrent.futures
import socket

import pytest
from openenv_gym_test_envs import SLEEP_MARKER
from websockets.asyncio.server import ServerConnection

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    ConnectError,
    ConnectionLostError,
    RemoteProtocolError,
    RequestTimeoutError,
    TransportError,
    UsageError,
)
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.transport.connection import BatchUnsupportedError, ws_url
from openenv_gym.transport.session import open_session

TIMEOUTS = Timeouts(connect=5.0, step=5.0, close=5.0)
PROTOCOLS = ["batch", "json"]


# ----------------------------------------------------------------------------- fakes


async def json_only_handler(ws: ServerConnection) -> None:
    """A minimal OpenEnv-like /ws server (one counter per connection)."""
    session = op.ServerSession()
    steps = 0
    async for frame in ws:
        session.receive_data(frame)
        for request in session.events_received():
            if isinstance(request, op.ResetRequest):
                steps = 0
                session.send_observation({"count": steps}, 0.0, False)
            elif isinstance(request, op.StepRequest):
                steps += 1
                session.send_observation(
                    {"count": steps, "action": dict(request.action)}, 1.0, False
                )
            elif isinstance(request, op.StateRequest):
                session.send_state({"step_count": steps})
        for out in session.data_to_send():
            await ws.send(out)
        if session.closed:
            break


def only_ws(status: int):
    """``process_request`` that refuses every path but /ws, as FastAPI/uvicorn do."""

    def process_request(connection, request):
        if request.path.split("?", 1)[0] != "/ws":
            return connection.respond(status, "Not Found\n")
        return None

    return process_request


def select_batch(connection, offered):
    """Select our subprotocol when offered; accept plain /ws clients too."""
    return bp.SUBPROTOCOL if bp.SUBPROTOCOL in offered else None


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------- timeouts


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_step_timeout_closes_the_session(ping_server, protocol):
    session = open_session(
        ping_server.url, protocol=protocol, timeouts=Timeouts(connect=5, step=0.3)
    )
    try:
        with pytest.raises(RequestTimeoutError) as info:
            # The env blocks the server for up to 2 s (released at teardown).
            session.step({"message": "sleep"})
        assert isinstance(info.value, TimeoutError)
        assert isinstance(info.value, TransportError)
        assert "0.3" in str(info.value)
        assert session.closed
        with pytest.raises(UsageError):
            session.step({"message": "late"})
        with pytest.raises(UsageError):
            session.state()
    finally:
        session.close()
        session.close()


# ------------------------------------------------------------------ protocol fallback


@pytest.mark.parametrize("status", [404, 403])
def test_auto_falls_back_to_json_when_batch_is_refused(ws_server, status):
    url = ws_server(json_only_handler, process_request=only_ws(status))
    session = open_session(url, protocol="auto", timeouts=TIMEOUTS)
    try:
        assert session.protocol == "json"
        assert session.reset().observation == {"count": 0}
        reply = session.step({"x": 1})
        assert (reply.observation, reply.reward, reply.done) == (
            {"count": 1, "action": {"x": 1}},
            1.0,
            False,
        )
        assert session.state() == {"step_count": 1}
    finally:
        session.close()


def test_auto_falls_back_when_the_subprotocol_is_not_selected(ws_server):
    # This server upgrades any path, /batch included, but never selects our subprotocol.
    url = ws_server(json_only_handler)
    session = open_session(url, protocol="auto", timeouts=TIMEOUTS)
    try:
        assert session.protocol == "json"
        assert session.step({"y": 2}).observation["count"] == 1
    finally:
        session.close()


def test_auto_falls_back_when_hello_is_refused(ws_server):
    async def refuse_hello_or_serve_json(ws):
        if ws.subprotocol != bp.SUBPROTOCOL:
            await json_only_handler(ws)
            return
        async for _ in ws:
            frame = {"op": "error", "id": 0, "code": "INVALID_REQUEST", "message": "no v1"}
            await ws.send(bp.encode_frame(frame))

    url = ws_server(refuse_hello_or_serve_json, select_subprotocol=select_batch)
    session = open_session(url, protocol="auto", timeouts=TIMEOUTS)
    try:
        assert session.protocol == "json"
        assert session.reset().observation == {"count": 0}
    finally:
        session.close()
    with pytest.raises(BatchUnsupportedError, match="hello refused"):
        open_session(url, protocol="batch", timeouts=TIMEOUTS)


@pytest.mark.parametrize("process_request", [only_ws(404), None])
def test_batch_on_a_json_only_server_raises(ws_server, process_request):
    url = ws_server(json_only_handler, process_request=process_request)
    with pytest.raises(BatchUnsupportedError) as info:
        open_session(url, protocol="batch", timeouts=TIMEOUTS)
    assert isinstance(info.value, ConnectError)


def test_json_on_a_json_only_server(ws_server):
    url = ws_server(json_only_handler, process_request=only_ws(404))
    session = open_session(url, protocol="json", timeouts=TIMEOUTS)
    try:
        assert session.reset().observation == {"count": 0}
    finally:
        session.close()


# -------------------------------------------------------------------- connect errors


@pytest.mark.parametrize("protocol", ["auto", *PROTOCOLS])
def test_connect_to_closed_port(protocol):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectError) as info:
        open_session(url, protocol=protocol, timeouts=Timeouts(connect=5))
    assert not isinstance(info.value, BatchUnsupportedError)
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_upgrade_refused_on_every_path(ws_server, protocol):
    def refuse(connection, request):
        return connection.respond(500, "nope\n")

    async def never(ws):
        await ws.close()

    url = ws_server(never, process_request=refuse)
    with pytest.raises(ConnectError, match="500"):
        open_session(url, protocol=protocol, timeouts=TIMEOUTS)


@pytest.mark.parametrize("protocol", ["auto", *PROTOCOLS])
def test_connect_timeout_when_the_upgrade_is_never_answered(protocol):
    # The kernel accepts the TCP connection into the backlog; nobody ever answers.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(ConnectError, match="timed out") as info:
            open_session(url, protocol=protocol, timeouts=Timeouts(connect=0.3))
    assert not isinstance(info.value, BatchUnsupportedError)


def test_invalid_url_is_a_connect_error():
    with pytest.raises(ConnectError):
        open_session("http://127.0.0.1:notaport", protocol="json", timeouts=TIMEOUTS)


# ----------------------------------------------------------------- garbage from server


def test_json_garbage_reply_is_a_remote_protocol_error(ws_server):
    async def garbage(ws):
        async for _ in ws:
            await ws.send("this is not json {")

    url = ws_server(garbage, process_request=only_ws(404))
    session = open_session(url, protocol="auto", timeouts=TIMEOUTS)
    try:
        with pytest.raises(RemoteProtocolError, match="invalid JSON"):
            session.reset()
        assert session.closed
        with pytest.raises(UsageError):
            session.reset()
    finally:
        session.close()


@pytest.mark.parametrize(
    "reply",
    [
        b'{"type":"observation"}',  # binary frame on /ws
        '{"type":"state","data":{}}',  # answers a reset with a state
        '{"type":"observation","data":{"observation":{},"reward":"lots","done":false}}',
        '{"type":"observation","data":{"observation":{},"done":"no"}}',
        '{"type":"error","data":{"code":7}}',
        '{"type":"teapot","data":{}}',
    ],
)
def test_json_malformed_replies(ws_server, reply):
    async def bad(ws):
        async for _ in ws:
            await ws.send(reply)

    url = ws_server(bad)
    session = open_session(url, protocol="json", timeouts=TIMEOUTS)
    try:
        with pytest.raises(RemoteProtocolError):
            session.reset()
        assert session.closed
    finally:
        session.close()


@pytest.mark.parametrize("protocol", ["auto", "batch"])
def test_batch_garbage_hello_reply(ws_server, protocol):
    async def garbage(ws):
        async for _ in ws:
            await ws.send(b"\xc1\xc1\xc1")

    url = ws_server(garbage, subprotocols=[bp.SUBPROTOCOL])
    with pytest.raises(RemoteProtocolError):
        open_session(url, protocol=protocol, timeouts=TIMEOUTS)


def fake_batch_handler(poison: bytes):
    """A batched server that answers hello and open properly, then ``poison`` to anything."""

    async def handler(ws):
        conn = bp.BatchServer()
        async for frame in ws:
            conn.receive_data(frame)
            for event in conn.events_received():
                if isinstance(event, bp.HelloRequestReceived):
                    conn.send_hello(server="fake", env="fake", max_slots=4)
                elif event.op is bp.Op.OPEN:
                    conn.send_results(event, [None] * len(event.slots))
                else:
                    await ws.send(poison)
            for out in conn.data_to_send():
                await ws.send(out)

    return handler


@pytest.mark.parametrize(
    "poison",
    [
        b"\xc1",
        bp.encode_frame({"op": "step", "id": 999, "obs": [{}]}),  # unknown request id
        bp.encode_frame({"op": "state", "id": 2, "state": [{}]}),  # wrong op for the id
        bp.encode_frame({"op": "reset", "id": 2, "obs": [{}], "reward": [0.0], "done": [False]}),
    ],
)
def test_batch_garbage_after_open(ws_server, poison):
    url = ws_server(fake_batch_handler(poison), subprotocols=[bp.SUBPROTOCOL])
    session = open_session(url, protocol="batch", timeouts=TIMEOUTS)
    try:
        with pytest.raises(RemoteProtocolError):
            session.reset()
        assert session.closed
        with pytest.raises(UsageError):
            session.reset()
    finally:
        session.close()


def test_batch_frame_rejected_by_server_is_a_remote_protocol_error(ws_server):
    async def handler(ws):
        conn = bp.BatchServer()
        async for frame in ws:
            conn.receive_data(frame)
            for event in conn.events_received():
                if isinstance(event, bp.HelloRequestReceived):
                    conn.send_hello(server="fake", env="fake", max_slots=4)
                elif event.op is bp.Op.OPEN:
                    conn.send_results(event, [None] * len(event.slots))
                else:
                    await ws.send(
                        bp.encode_frame(
                            {
                                "op": "error",
                                "id": event.request_id,
                                "code": "INVALID_REQUEST",
                                "message": "no",
                            }
                        )
                    )
            for out in conn.data_to_send():
                await ws.send(out)

    url = ws_server(handler, subprotocols=[bp.SUBPROTOCOL])
    session = open_session(url, protocol="batch", timeouts=TIMEOUTS)
    try:
        with pytest.raises(RemoteProtocolError, match="INVALID_REQUEST"):
            session.state()
    finally:
        session.close()


# ------------------------------------------------------------ server closes or dies


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_closing_mid_request_is_connection_lost(ws_server, protocol):
    async def close_on_request(ws):
        if ws.subprotocol == bp.SUBPROTOCOL:
            conn = bp.BatchServer()
            async for frame in ws:
                conn.receive_data(frame)
                for event in conn.events_received():
                    if isinstance(event, bp.HelloRequestReceived):
                        conn.send_hello(server="fake", env="fake", max_slots=4)
                    elif event.op is bp.Op.OPEN:
                        conn.send_results(event, [None])
                    else:
                        await ws.close(1011, "going away")
                        return
                for out in conn.data_to_send():
                    await ws.send(out)
        else:
            async for _ in ws:
                await ws.close(1011, "going away")
                return

    url = ws_server(close_on_request, select_subprotocol=select_batch)
    session = open_session(url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        with pytest.raises(ConnectionLostError):
            session.reset()
        assert session.closed
        with pytest.raises(UsageError):
            session.reset()
    finally:
        session.close()


@pytest.mark.integration
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_killed_during_a_step(cli_server, protocol):
    server = cli_server("openenv_gym_test_envs:PingEnv")
    session = open_session(server.url, protocol=protocol, timeouts=Timeouts(connect=5, step=10))
    try:
        session.reset()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(session.step, {"message": "sleep"})
            server.wait_for_stderr(SLEEP_MARKER)  # the server is inside env.step
            server.proc.kill()
            with pytest.raises((ConnectionLostError, RequestTimeoutError)):
                pending.result(timeout=30)
        assert session.closed
        with pytest.raises(UsageError):
            session.step({"message": "x"})
    finally:
        session.close()
    server.proc.wait(15)


@pytest.mark.integration
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_killed_between_requests(cli_server, protocol):
    server = cli_server("openenv_gym_test_envs:PingEnv")
    session = open_session(server.url, protocol=protocol, timeouts=Timeouts(connect=5, step=10))
    try:
        session.reset()
        server.proc.kill()
        server.proc.wait(15)
        # The first call after the loss reports it; later ones say the session is closed.
        with pytest.raises(ConnectionLostError):
            session.step({"message": "x"})
        assert session.closed
        with pytest.raises(UsageError):
            session.step({"message": "x"})
    finally:
        session.close()


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["auto", *PROTOCOLS])
def test_connect_after_server_is_gone(cli_server, protocol):
    server = cli_server("openenv_gym_test_envs:PingEnv")
    server.proc.kill()
    server.proc.wait(15)
    with pytest.raises(ConnectError):
        open_session(server.url, protocol=protocol, timeouts=Timeouts(connect=5))


# ------------------------------------------------------------------ helpers


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        ("http://127.0.0.1:8000", "/ws", "ws://127.0.0.1:8000/ws"),
        ("http://127.0.0.1:8000/", "/batch", "ws://127.0.0.1:8000/batch"),
        ("https://x.hf.space", "/ws", "wss://x.hf.space/ws"),
        ("https://host/prefix/env/", "/ws", "wss://host/prefix/env/ws"),
        ("ws://h:1", "/ws", "ws://h:1/ws"),
        ("wss://h/p", "/batch", "wss://h/p/batch"),
        ("localhost:9000", "/ws", "ws://localhost:9000/ws"),
        ("  http://h:1/  ", "/ws", "ws://h:1/ws"),
    ],
)
def test_ws_url(base, path, expected):
    assert ws_url(base, path) == expected
