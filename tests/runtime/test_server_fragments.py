"""Fragments, frame floods and the idle timeout (docs/security.md, issue 22 items 2 and 6).

A message may come in at most ``max_fragments`` frames (empty continuation frames count);
one connection's read is handled at most ``FRAMES_PER_TURN`` frames at a time, the rest on
the loop's next turn; only messages (and, when the client asks, its pings) are activity.
Raw sockets, so that every frame is the test's own.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import pytest
from test_server_large_messages import json_step, masked, read_frame, reply, upgrade
from test_server_limits import close_code, ws
from websockets.frames import Opcode

from openenv_gym.protocol.batch import decode_frame, encode_frame
from openenv_gym.runtime.websocket import FRAMES_PER_TURN, IDLE_TIMEOUT_HEADER, KEEPALIVE_HEADER


def closed_with(sock: socket.socket) -> tuple[int, str]:
    """The close code and reason the server fails the connection with, then EOF."""
    while True:
        opcode, payload = read_frame(sock)
        if opcode == Opcode.CLOSE:
            break
    # and the server closes the TCP connection (a reset if it left bytes unread)
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""
    return int.from_bytes(payload[:2], "big"), payload[2:].decode()


def fragments(payload: bytes, count: int, opcode: Opcode = Opcode.TEXT) -> bytes:
    """``payload`` as one message of ``count`` frames: all of it first, then empty ones."""
    frames = [masked(opcode, payload, fin=count == 1)]
    frames += [masked(Opcode.CONT, b"", fin=k == count - 1) for k in range(1, count)]
    return b"".join(frames)


@pytest.mark.parametrize("path", ["/ws", "/batch"])
def test_a_message_of_max_fragments_frames_arrives_whole(env_server, path):
    server = env_server(max_fragments=8)
    with upgrade(server.server.port, path) as sock:
        if path == "/ws":
            sock.sendall(fragments(json_step("hi"), 8))
            assert reply(sock)["data"]["observation"]["echoed"] == "hi"
        else:
            hello = encode_frame({"op": "hello", "id": 0, "versions": [1]})
            sock.sendall(fragments(hello, 8, Opcode.BINARY))
            assert reply(sock)["op"] == "hello"


@pytest.mark.parametrize("apart", [False, True], ids=["one-write", "frame-by-frame"])
def test_one_fragment_more_fails_the_connection_with_1009(env_server, apart):
    server = env_server(max_fragments=8)
    with upgrade(server.server.port, "/ws") as sock:
        flood = fragments(json_step("hi"), 9)
        if apart:
            step = len(masked(Opcode.CONT, b""))
            sock.sendall(flood[:-step])
            time.sleep(0.05)
            sock.sendall(flood[-step:])
        else:
            sock.sendall(flood)
        assert closed_with(sock) == (1009, "a message of more than 8 fragments")
    with upgrade(server.server.port, "/ws") as sock:  # and others are served
        sock.sendall(masked(Opcode.TEXT, json_step("next")))
        assert reply(sock)["data"]["observation"]["echoed"] == "next"
    assert server.server.wait_active(0)


def test_a_flood_of_empty_continuation_frames_is_cut_at_the_limit(env_server):
    """Issue 22, 2: 3 M empty fragments froze the server for 21.9 s. Now the connection
    is failed at the default limit, and what came behind is never parsed."""
    server = env_server()
    with upgrade(server.server.port, "/ws") as sock:
        empty = masked(Opcode.CONT, b"", fin=False)
        sock.sendall(masked(Opcode.TEXT, b"{", fin=False) + empty * 20_000)
        assert closed_with(sock) == (1009, "a message of more than 1024 fragments")


def test_empty_continuation_frames_are_not_activity(env_server):
    server = env_server(idle_timeout=0.6, max_fragments=10**6)
    with upgrade(server.server.port, "/ws") as sock:
        sock.sendall(masked(Opcode.TEXT, b"{", fin=False))
        start = time.monotonic()
        stop = threading.Event()

        def trickle() -> None:
            with contextlib.suppress(OSError):
                while not stop.wait(0.05):
                    sock.sendall(masked(Opcode.CONT, b"", fin=False))

        thread = threading.Thread(target=trickle)
        thread.start()
        try:
            opcode, payload = read_frame(sock)
        finally:
            stop.set()
            thread.join()
        assert (opcode, payload[2:]) == (Opcode.CLOSE, b"idle timeout")
        assert time.monotonic() - start > 0.5  # not before the idle timeout


@pytest.mark.parametrize("count", [FRAMES_PER_TURN + 1, 5 * FRAMES_PER_TURN + 7])
def test_a_read_of_many_frames_is_answered_whole_and_in_order_over_turns(env_server, count):
    """One write of many small requests: answered over several turns of the loop, in order,
    whether the read is all whole frames or ends in a cut one."""
    server = env_server()
    with upgrade(server.server.port, "/batch") as sock:
        requests = [masked(Opcode.BINARY, encode_frame({"op": "hello", "id": 0, "versions": [1]}))]
        requests += [
            masked(Opcode.BINARY, encode_frame({"op": "state", "id": rid, "slots": [0]}))
            for rid in range(1, count)
        ]
        data = b"".join(requests)
        sock.sendall(data[:-3])  # the last frame cut: the slow path counts turns too
        time.sleep(0.05)
        sock.sendall(data[-3:])
        ids = [decode_frame(read_frame(sock)[1])["id"] for _ in range(count)]
        assert ids == list(range(count))


def test_json_requests_behind_pings_over_turns(env_server):
    server = env_server()
    with upgrade(server.server.port, "/ws") as sock:
        count = 2 * FRAMES_PER_TURN
        sock.sendall(
            b"".join(
                masked(Opcode.PING, b"p") + masked(Opcode.TEXT, json_step(str(k)))
                for k in range(count)
            )
        )
        echoed = []
        while len(echoed) < count:
            opcode, payload = read_frame(sock)
            if opcode == Opcode.TEXT:
                echoed.append(decode_json(payload))
        assert echoed == [str(k) for k in range(count)]


def decode_json(payload: bytes) -> str:
    return json.loads(payload)["data"]["observation"]["echoed"]


# ------------------------------------------------------------------ keepalive (item 6)


def test_an_accepted_upgrade_says_the_idle_timeout(env_server):
    server = env_server(idle_timeout=42.5)
    with ws(server.ws()) as conn:
        assert conn.response.headers[IDLE_TIMEOUT_HEADER] == "42.5"
    server = env_server(idle_timeout=None)
    with ws(server.ws("/batch")) as conn:
        assert conn.response.headers[IDLE_TIMEOUT_HEADER] == "none"


def test_a_client_that_asks_keeps_its_session_with_its_pings(env_server):
    """Issue 22, 6: a training loop paused past the idle timeout kept nothing. A client that
    sends the keepalive header and pings keeps its session as long as it pings."""
    server = env_server(idle_timeout=0.5, ping_interval=None)
    headers = {KEEPALIVE_HEADER: "ping"}
    with ws(server.ws(), additional_headers=headers, ping_interval=0.1) as conn:
        conn.send('{"type":"reset"}')
        conn.recv(timeout=5)
        time.sleep(1.5)  # three idle timeouts without a message
        conn.send('{"type":"state"}')
        assert "data" in conn.recv(timeout=5)
        assert server.server.active == 1


def test_the_opt_in_needs_the_pings_themselves(env_server):
    server = env_server(idle_timeout=0.5, ping_interval=0.1, ping_timeout=5)
    headers = {KEEPALIVE_HEADER: "ping"}
    with ws(server.ws(), additional_headers=headers, ping_interval=None) as conn:
        conn.send('{"type":"reset"}')
        conn.recv(timeout=5)
        start = time.monotonic()
        assert close_code(conn) == 1001  # its pongs to the server's pings do not count
        assert time.monotonic() - start > 0.4  # not before the idle timeout
    assert server.server.wait_active(0)
