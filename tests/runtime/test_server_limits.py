"""The limits of ``ServerConfig`` (docs/security.md), each shown on a real server.

Small limits, raw sockets and the plain ``websockets`` client: what a peer sees when it
reaches each limit, and that the server goes on serving others.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from openenv_gym_test_envs import PingEnv
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.protocol.batch import SUBPROTOCOL, decode_frame, encode_frame
from openenv_gym.runtime.app import ServerConfig


def raw_socket(port: int, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (or the socket times out)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def http(port: int, head: str, body: bytes = b"") -> bytes:
    with raw_socket(port) as sock:
        sock.sendall(head.encode() + body)
        return read_all(sock)


def ws(url: str, **kwargs) -> ClientConnection:
    return connect(url, proxy=None, open_timeout=5, close_timeout=5, max_size=None, **kwargs)


def drain(conn: ClientConnection, timeout: float) -> None:
    while True:
        conn.recv(timeout=timeout)


def send_forever(sock: socket.socket, data: bytes, pause: float = 0.0) -> None:
    """Send ``data`` again and again (until the peer drops us: OSError), 20 s at most."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sock.sendall(data)
        time.sleep(pause)


def close_code(conn: ClientConnection, timeout: float = 10.0) -> int:
    with pytest.raises(ConnectionClosed) as info:
        drain(conn, timeout)
    assert info.value.rcvd is not None
    return info.value.rcvd.code


# ------------------------------------------------------------------------- the config


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"port": 70000}, "port must be in 0..65535, got 70000"),
        ({"port": True}, "port must be in 0..65535"),
        ({"max_sessions": -5}, "max_sessions must be a positive integer, got -5"),
        ({"max_frame": 0}, "max_frame must be a positive integer, got 0"),
        ({"max_connections": 1.5}, "max_connections must be a positive integer"),
        ({"max_request_slots": 0}, "max_request_slots must be a positive integer"),
        ({"max_connection_slots": False}, "max_connection_slots must be a positive integer"),
        ({"max_body": 0}, "max_body must be a positive integer"),
        ({"max_queue_bytes": -1}, "max_queue_bytes must be a positive integer"),
        ({"max_send_buffer": 0}, "max_send_buffer must be a positive integer"),
        ({"idle_timeout": 0}, "idle_timeout must be > 0 seconds or None, got 0"),
        ({"handshake_timeout": -1.0}, "handshake_timeout must be > 0 seconds"),
        ({"send_timeout": float("nan")}, "send_timeout must be > 0 seconds"),
        ({"ping_interval": float("inf")}, "ping_interval must be > 0 seconds"),
        ({"ping_timeout": "20"}, "ping_timeout must be > 0 seconds"),
        ({"token": ""}, "token must be a non-empty string"),
        ({"token": "t\u00e9"}, "token must be a non-empty string of visible ASCII"),
        ({"allowed_origins": "http://a"}, "allowed_origins must be a tuple of strings"),
        ({"host": "0.0.0.0"}, "refusing to serve on '0.0.0.0' without a token"),
        ({"host": ""}, "refusing to serve on 'every address' without a token"),
    ],
)
def test_server_config_refuses_what_would_refuse_every_client(fields, message):
    with pytest.raises(ConfigurationError) as info:
        ServerConfig(**fields)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_server_config_accepts_exposed_hosts_with_a_token_or_insecure():
    assert not ServerConfig(host="0.0.0.0", token="t0k3n").exposed
    assert ServerConfig(host="0.0.0.0", insecure=True).exposed
    assert ServerConfig(allowed_origins=["http://a"]).allowed_origins == ("http://a",)
    assert ServerConfig(idle_timeout=None, port=65535).idle_timeout is None


def test_server_config_from_env(monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_MAX_CONNECTIONS", "12")
    monkeypatch.setenv("OPENENV_GYM_SEND_TIMEOUT", "off")
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "abc")
    config = ServerConfig.from_env(max_frame=99)
    assert (config.max_connections, config.send_timeout) == (12, None)
    assert (config.token, config.max_frame) == ("abc", 99)
    assert ServerConfig.from_env(max_connections=3).max_connections == 3  # overrides win
    monkeypatch.setenv("OPENENV_GYM_MAX_BODY", "big")
    with pytest.raises(ConfigurationError, match="OPENENV_GYM_MAX_BODY='big' is not an integer"):
        ServerConfig.from_env()


# ------------------------------------------------------------------------ connections


def test_connections_beyond_max_connections_get_503_then_a_freed_place(env_server):
    server = env_server(max_connections=3)
    port = server.server.port
    held = [raw_socket(port) for _ in range(3)]
    try:
        # no wait: the server accepts connections in the order they were made, so these
        # three are counted before the fourth is
        with raw_socket(port) as sock:  # answered at once, before any request is read
            refused = read_all(sock)
        assert refused.startswith(b"HTTP/1.1 503 ")
        assert b"too many connections" in refused
        held.pop().close()
        deadline = time.monotonic() + 5
        reply = b""
        while not reply.startswith(b"HTTP/1.1 200 ") and time.monotonic() < deadline:
            time.sleep(0.05)  # the place is freed once the server saw the close
            with contextlib.suppress(OSError):  # reset: refused while still full
                reply = http(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 200 ")
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: x\r\n"])
def test_connection_without_a_complete_head_is_dropped_after_handshake_timeout(env_server, sent):
    server = env_server(handshake_timeout=0.3)
    with raw_socket(server.server.port) as sock:
        start = time.monotonic()
        sock.sendall(sent)
        assert read_all(sock) == b""  # dropped without an answer
        assert time.monotonic() - start > 0.25  # not before the handshake timeout


def test_slowloris_head_is_dropped_even_while_bytes_trickle_in(env_server):
    server = env_server(handshake_timeout=0.5)
    # reset or broken pipe once the server dropped us (send_forever gives up after 20 s)
    with raw_socket(server.server.port) as sock, pytest.raises(OSError):
        send_forever(sock, b"X-Slow: 1\r\n", pause=0.05)


def test_idle_websocket_is_closed_and_its_session_freed_pings_do_not_count(env_server):
    server = env_server(idle_timeout=0.6, ping_interval=0.1, ping_timeout=5)
    with ws(server.ws(), ping_interval=0.1) as conn:  # both sides ping all along
        conn.send('{"type":"reset"}')
        conn.recv(timeout=5)
        assert server.server.wait_active(1)
        start = time.monotonic()
        assert close_code(conn) == 1001  # going away: idle timeout
        assert time.monotonic() - start > 0.5  # not before it: pings do not count
        assert conn.close_reason == "idle timeout"
    assert server.server.wait_active(0)


def test_a_websocket_that_keeps_asking_is_never_idle(env_server):
    server = env_server(idle_timeout=0.5)
    with ws(server.ws("/batch"), subprotocols=[SUBPROTOCOL]) as conn:
        conn.send(encode_frame({"op": "hello", "id": 0, "versions": [1], "client": "t"}))
        conn.recv(timeout=5)
        for rid in range(1, 16):  # 1.5 s in all, a request every 0.1 s
            conn.send(encode_frame({"op": "state", "id": rid, "slots": [0]}))
            assert decode_frame(conn.recv(timeout=5))["id"] == rid
            time.sleep(0.1)


# ------------------------------------------------------------------------------ sizes


@pytest.mark.parametrize(("path", "message"), [("/ws", "x" * 2000), ("/batch", b"\x80" * 2000)])
def test_message_over_max_frame_closes_with_1009(env_server, path, message):
    server = env_server(max_frame=1000)
    with ws(server.ws(path)) as conn:
        conn.send(message)
        assert close_code(conn) == 1009
    with ws(server.ws()) as conn:  # the next connection is served
        conn.send('{"type":"reset"}')
        assert '"observation"' in conn.recv(timeout=5)


def test_request_body_over_max_body_is_413_before_it_is_read(env_server):
    server = env_server(max_body=1000)
    reply = http(
        server.server.port, "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
    )
    assert reply.startswith(b"HTTP/1.1 413 ")


def test_request_head_over_16_kib_is_431(ping_server):
    head = "GET /health HTTP/1.1\r\nHost: x\r\n" + "X-Pad: " + "p" * 20000 + "\r\n\r\n"
    assert http(ping_server.server.port, head).startswith(b"HTTP/1.1 431 ")


def test_unread_replies_pause_the_connection_then_drop_it(env_server):
    """A peer that sends and never reads: its replies fill the send buffer, the server
    stops reading from it, and drops it after send_timeout (docs/security.md)."""
    server = env_server(max_send_buffer=2**16, max_queue_bytes=2**16, send_timeout=0.5)
    with raw_socket(server.server.port, timeout=10) as sock:
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        sock.sendall(
            b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key.encode() + b"\r\n\r\n"
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101 ")
        text = b'{"type":"step","data":{"message":"' + b"m" * 60000 + b'"}}'
        frame = b"\x81\xff" + len(text).to_bytes(8, "big") + b"\x00" * 4 + text  # mask 0
        with pytest.raises(OSError):  # dropped (send_forever gives up after 20 s)
            send_forever(sock, frame)
    assert server.server.wait_active(0)


# ---------------------------------------------------------------------- batched slots


@contextlib.contextmanager
def batch(url: str) -> Iterator[ClientConnection]:
    with ws(url, subprotocols=[SUBPROTOCOL]) as conn:
        conn.send(encode_frame({"op": "hello", "id": 0, "versions": [1], "client": "t"}))
        conn.recv(timeout=5)
        yield conn


def ask(conn: ClientConnection, message: dict) -> dict:
    conn.send(encode_frame(message))
    return decode_frame(conn.recv(timeout=10))


def test_request_naming_more_than_max_request_slots_is_refused_whole(env_server):
    server = env_server(max_request_slots=4)
    with batch(server.ws("/batch")) as conn:
        reply = ask(conn, {"op": "open", "id": 1, "slots": [0, 1, 2, 3, 4]})
        assert (reply["op"], reply["id"], reply["code"]) == ("error", 1, "INVALID_REQUEST")
        assert "names 5 slots" in reply["message"]
        assert server.server.active == 0  # nothing was opened
        assert "errors" not in ask(conn, {"op": "open", "id": 2, "slots": [0, 1, 2, 3]})


def test_connection_beyond_max_connection_slots_gets_capacity_errors(env_server):
    server = env_server(max_connection_slots=3)
    with batch(server.ws("/batch")) as conn, batch(server.ws("/batch")) as other:
        reply = ask(conn, {"op": "open", "id": 1, "slots": [0, 1, 2, 3, 4]})
        assert sorted(reply["errors"]) == [3, 4]
        code, message, details = reply["errors"][3]
        assert code == "CAPACITY_REACHED"
        assert message == "Connection at capacity: 3/3 slots open."
        assert details == {"open_slots": 3, "max_connection_slots": 3}
        assert "errors" not in ask(other, {"op": "open", "id": 1, "slots": [0, 1, 2]})
    assert server.server.wait_active(0)


def test_large_requests_are_answered_in_chunks_that_let_others_step(env_server):
    """A 4,096-slot state request on unopened slots: the other connection's steps are
    answered while it is worked through (chunks of 64 slots give the loop away)."""
    server = env_server(PingEnv)
    with batch(server.ws("/batch")) as big, ws(server.ws()) as small:
        small.send('{"type":"reset"}')
        small.recv(timeout=5)
        replies: list[dict] = []
        worker = threading.Thread(
            target=lambda: replies.append(
                ask(big, {"op": "state", "id": 1, "slots": list(range(4096))})
            )
        )
        worker.start()
        for _ in range(20):
            small.send('{"type":"step","data":{"message":"hi"}}')
            assert '"echoed":"hi"' in small.recv(timeout=5)
        worker.join(30)
    [reply] = replies
    assert len(reply["errors"]) == 4096
    assert reply["errors"][4095][0] == "NO_SUCH_SLOT"
