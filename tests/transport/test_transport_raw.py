"""``openenv_gym.transport.raw``: the raw socket and the one close / abort, on 127.0.0.1.

Against our own server (``/ws`` and ``/batch``) and websockets' asyncio server with
handlers that echo, close with a code, stay silent, or never answer a close.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from openenv_gym_test_envs import quietly
from websockets.asyncio.server import ServerConnection

import openenv_gym.transport
from openenv_gym.exceptions import (
    AuthenticationError,
    ConnectError,
    ConnectionLostError,
    RequestTimeoutError,
)
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.transport import CloseFrame, RawSocket
from openenv_gym.transport.handshake import HandshakeRefused
from openenv_gym.transport.raw import abort_websocket, close_websocket

SOON = 20.0
"""Seconds a test waits for something that should happen (bounds a hang)."""


def soon() -> float:
    return time.monotonic() + SOON


@pytest.fixture
def ws_server(ws_server: Callable[..., str]) -> Callable[..., str]:
    """conftest's ``ws_server``, its handlers wrapped with :func:`quietly`."""

    def start(handler: Callable[..., Any], **kwargs: Any) -> str:
        return ws_server(quietly(handler), **kwargs)

    return start


def test_the_package_exports_the_raw_api():
    for name in ("RawSocket", "CloseFrame", "BatchConnection", "BatchUnsupportedError"):
        assert name in openenv_gym.transport.__all__
        assert getattr(openenv_gym.transport, name) is not None


# ------------------------------------------------------------------ our server


def test_json_ws_round_trip_bad_frames_and_close_with_goodbye(ping_server):
    with RawSocket.connect(ping_server.url, timeout=SOON) as sock:
        assert sock.url == ping_server.ws("/ws")
        assert sock.subprotocol is None
        sock.send(op.encode_request(op.ResetRequest({"seed": 3})), soon())
        reply = op.decode_reply(sock.receive(soon()))
        assert isinstance(reply, op.ObservationReceived)
        sock.send("this is not JSON", soon())
        reply = op.decode_reply(sock.receive(soon()))
        assert isinstance(reply, op.ErrorReceived)
        assert reply.code == op.ErrorCode.INVALID_JSON
        assert not sock.closed
        sock.close(SOON, goodbye=[op.encode_request(op.CloseRequest())])
        assert sock.closed
        assert ping_server.server.wait_active(0)
        with pytest.raises(ConnectionLostError):
            sock.receive(soon())


def test_the_server_closes_on_a_close_request_with_code_1000(ping_server):
    sock = RawSocket.connect(ping_server.url, timeout=SOON)
    try:
        sock.send(op.encode_request(op.CloseRequest()), soon())
        assert sock.wait_closed(soon())
        assert sock.close_frame == CloseFrame(1000, sock.close_frame.reason)
        with pytest.raises(ConnectionLostError):
            sock.receive(soon())
    finally:
        sock.close()


def test_batched_path_with_a_subprotocol(ping_server):
    offered = [bp.SUBPROTOCOLS[v] for v in sorted(bp.SUBPROTOCOLS, reverse=True)]
    with RawSocket.connect(ping_server.url, "/batch", subprotocols=offered, timeout=SOON) as sock:
        assert sock.url == ping_server.ws("/batch")
        version = bp.version_of(sock.subprotocol)
        assert version == max(bp.SUBPROTOCOLS)
        client = bp.BatchClient("raw-test", version=version)
        client.send_hello()
        for frame in client.data_to_send():
            sock.send(frame, soon())
        message = sock.receive(soon())
        assert isinstance(message, bytes)
        client.receive_data(message)
        events = client.events_received()
        assert [type(e) for e in events] == [bp.HelloReceived]


def test_a_refused_path_is_a_handshake_refusal(ping_server):
    with pytest.raises(HandshakeRefused) as caught:
        RawSocket.connect(ping_server.url, "/no-such-path", timeout=SOON)
    assert caught.value.status == 404


def test_a_missing_token_is_an_authentication_error(env_server):
    server = env_server(token="s3cret")
    with pytest.raises(AuthenticationError):
        RawSocket.connect(server.url, timeout=SOON)
    with RawSocket.connect(
        server.url, headers={"Authorization": "Bearer s3cret"}, timeout=SOON
    ) as sock:
        sock.send(op.encode_request(op.StateRequest()), soon())
        assert isinstance(op.decode_reply(sock.receive(soon())), op.StateReceived)


def test_nothing_listening_is_a_connect_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectError):
        RawSocket.connect(f"127.0.0.1:{port}", timeout=SOON)


# ------------------------------------------------------------------ websockets servers


async def echo(ws: ServerConnection) -> None:
    async for message in ws:
        await ws.send(message)


def test_text_and_binary_come_back_as_they_were_sent(ws_server):
    with RawSocket.connect(ws_server(echo), timeout=SOON) as sock:
        sock.send("héllo", soon())
        sock.send(b"\x00\xff", soon())
        assert sock.receive(soon()) == "héllo"
        assert sock.receive(soon()) == b"\x00\xff"


def test_a_receive_timeout_leaves_the_socket_open_until_aborted(ws_server):
    with RawSocket.connect(ws_server(echo), timeout=SOON) as sock:
        with pytest.raises(RequestTimeoutError):
            sock.receive(time.monotonic() + 0.05)
        assert not sock.closed
        assert not sock.wait_closed(time.monotonic() + 0.05)
        sock.send("still here", soon())
        assert sock.receive(soon()) == "still here"
        sock.abort()
        assert sock.closed
        assert sock.close_frame is None
        with pytest.raises(ConnectionLostError):
            sock.send("gone", soon())
        sock.abort()  # idempotent
        sock.close()  # and close after abort never raises


def test_the_last_message_before_the_servers_close_is_still_received(ws_server):
    async def last_words(ws: ServerConnection) -> None:
        await ws.send("last")
        await ws.close(4000, "bye")

    sock = RawSocket.connect(ws_server(last_words), timeout=SOON)
    try:
        assert sock.wait_closed(soon())
        assert sock.close_frame == CloseFrame(4000, "bye")
        assert str(sock.close_frame) == "close code 4000 'bye'"
        assert sock.receive(soon()) == "last"
        with pytest.raises(ConnectionLostError):
            sock.receive(soon())
    finally:
        sock.close()


def test_close_sends_the_goodbye_then_a_close_frame(ws_server):
    seen: list[Any] = []
    done = threading.Event()

    async def record(ws: ServerConnection) -> None:
        try:
            async for message in ws:
                seen.append(message)
        finally:
            seen.append(ws.close_code)
            done.set()

    sock = RawSocket.connect(ws_server(record), timeout=SOON)
    sock.close(SOON, goodbye=["see you", b"\x01"])
    assert sock.closed
    assert done.wait(SOON)
    assert seen[:2] == ["see you", b"\x01"]
    assert seen[2] != 1006  # a closing handshake, not a dropped connection


def deaf_server() -> tuple[socket.socket, threading.Thread]:
    """A TCP server that completes one upgrade, then only reads: a close is never answered."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            key = re.search(rb"Sec-WebSocket-Key: *(\S+)", head, re.IGNORECASE)
            assert key is not None
            digest = hashlib.sha1(key.group(1) + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
            conn.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
                + base64.b64encode(digest.digest())
                + b"\r\n\r\n"
            )
            with contextlib.suppress(OSError):
                while conn.recv(65536):  # until the client goes
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener, thread


def test_close_is_bounded_when_the_server_never_answers_it():
    listener, thread = deaf_server()
    with listener:
        sock = RawSocket.connect(f"127.0.0.1:{listener.getsockname()[1]}", timeout=SOON)
        started = time.monotonic()
        sock.close(0.2, goodbye=["bye"])
        elapsed = time.monotonic() - started
    thread.join(SOON)
    assert not thread.is_alive()  # the client dropped the socket
    assert sock.closed
    assert sock.close_frame is None
    assert elapsed >= 0.2  # it waited its close timeout before it dropped the socket


def test_the_helpers_close_and_abort_any_websocket(ws_server):
    url = ws_server(echo)
    first = RawSocket.connect(url, timeout=SOON)
    second = RawSocket.connect(url, timeout=SOON)
    close_websocket(first._ws, SOON, [json.dumps({"bye": 1})])
    abort_websocket(second._ws)
    assert first.closed
    assert second.closed
    assert first.close_frame is not None  # the server answered the close
    assert second.close_frame is None  # dropped: no handshake
