"""Large WebSocket messages, read by the connection layer itself (``http.MESSAGE_HEAD``).

A data frame over 64 KiB is not buffered whole by websockets' parser: the connection
splits the peer's bytes at frame boundaries and unmasks such a frame chunk by chunk as
it arrives. These tests drive raw sockets, so that frame headers, masks and reads can be
cut anywhere, and check that every message still arrives whole and in order.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from typing import Any

import pytest
from openenv_gym_test_envs import PingEnv
from websockets.frames import Frame, Opcode

from openenv_gym.protocol.batch import SUBPROTOCOL, decode_frame, encode_frame
from openenv_gym.runtime.http import MESSAGE_HEAD

BIG = "m" * (3 * MESSAGE_HEAD + 5)  # several reads, and not a multiple of the mask's 4


def upgrade(port: int, path: str, *frames: bytes) -> socket.socket:
    """A raw WebSocket; ``frames`` are sent in the same write as the upgrade request."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    head = [
        f"GET {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    if path == "/batch":
        head.append(f"Sec-WebSocket-Protocol: {SUBPROTOCOL}")
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + b"".join(frames))
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(1)
        assert chunk, f"the server closed during the upgrade: {reply!r}"
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 101 "), reply
    return sock


def masked(opcode: Opcode, payload: bytes, fin: bool = True) -> bytes:
    return Frame(opcode, payload, fin).serialize(mask=True, extensions=[])


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """(opcode, payload) of one frame from the server."""

    def exactly(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return bytes(data)

    first, second = exactly(2)
    size = second & 0x7F
    if size >= 126:
        size = int.from_bytes(exactly(2 if size == 126 else 8), "big")
    return first & 0x0F, exactly(size)


def reply(sock: socket.socket) -> Any:
    opcode, payload = read_frame(sock)
    return json.loads(payload) if opcode == Opcode.TEXT else decode_frame(payload)


def json_step(message: str) -> bytes:
    return json.dumps({"type": "step", "data": {"message": message}}).encode()


def batch(message: dict[str, Any]) -> bytes:
    return masked(Opcode.BINARY, encode_frame(message))


HELLO = batch({"op": "hello", "id": 0, "versions": [1]})
OPEN = batch({"op": "open", "id": 1, "slots": [0, 1]})


def step(rid: int, *messages: str) -> bytes:
    args = [{"message": m} for m in messages]
    return batch({"op": "step", "id": rid, "slots": list(range(len(messages))), "args": args})


@pytest.mark.parametrize(
    "cuts",
    [
        [1, 2, 3, 5, 7, 11],  # the header cut everywhere, then odd payload pieces
        [MESSAGE_HEAD - 3, 1, 1, 2 * MESSAGE_HEAD + 1],  # cut around the head's end
        [10**9],  # one write
    ],
    ids=["header-bytes", "around-head", "whole"],
)
@pytest.mark.parametrize("path", ["/ws", "/batch"])
def test_large_message_arrives_whole_however_its_bytes_are_cut(env_server, path, cuts):
    server = env_server()
    if path == "/ws":
        frame = masked(Opcode.TEXT, json_step(BIG))
        setup: list[bytes] = []
    else:
        frame = step(2, BIG, "small")
        setup = [HELLO, OPEN]
    with upgrade(server.server.port, path, *setup) as sock:
        for _ in setup:
            reply(sock)
        pos = 0
        for cut in cuts:
            sock.sendall(frame[pos : pos + cut])
            pos += cut
            time.sleep(0.005)  # separate reads, as far as TCP lets us
        sock.sendall(frame[pos:])
        answer = reply(sock)
        if path == "/ws":
            assert answer["data"]["observation"]["echoed"] == BIG
        else:
            assert [o["echoed"] for o in answer["obs"]] == [BIG, "small"]
        sock.sendall(
            step(3, "after", "it") if path == "/batch" else masked(Opcode.TEXT, json_step("after"))
        )
        after = reply(sock)
        echoed = (
            after["data"]["observation"]["echoed"] if path == "/ws" else after["obs"][0]["echoed"]
        )
        assert echoed == "after"


def test_frames_around_a_large_one_keep_their_order(env_server):
    """Small frames before and after a large one, a ping among them, in one write."""
    server = env_server()
    with upgrade(server.server.port, "/batch", HELLO, OPEN) as sock:
        reply(sock), reply(sock)
        sock.sendall(
            step(2, "a", "b")
            + masked(Opcode.PING, b"p1")
            + step(3, BIG, "c")
            + step(4, "d", "e")
            + masked(Opcode.PING, b"p2")
        )
        seen = []
        while len(seen) < 5:
            opcode, payload = read_frame(sock)
            if opcode == Opcode.PONG:
                seen.append(payload.decode())
            else:
                answer = decode_frame(payload)
                seen.append((answer["id"], [o["echoed"][:1] for o in answer["obs"]]))
        # replies in order (pongs are websockets' to time: it answers a ping as it parses it)
        assert [s for s in seen if isinstance(s, tuple)] == [
            (2, ["a", "b"]),
            (3, ["m", "c"]),
            (4, ["d", "e"]),
        ]
        assert [s for s in seen if isinstance(s, str)] == ["p1", "p2"]


class _BuiltOnTheLoop(PingEnv):
    """PingEnv built on the event loop: ``open`` is answered before the next frame is read.

    (An instance built off the loop keeps its ``open``'s slots in flight until it exists,
    and a request naming them meanwhile is refused: ``docs/protocol.md`` section 3.5.)
    """

    REQUIRES_SINGLE_THREAD_EXECUTOR = True


def test_large_frame_sent_with_the_upgrade_request(env_server):
    server = env_server(_BuiltOnTheLoop)
    with upgrade(server.server.port, "/batch", HELLO, OPEN, step(2, BIG, "x")) as sock:
        assert reply(sock)["op"] == "hello"
        assert reply(sock)["op"] == "open"
        assert [o["echoed"] for o in reply(sock)["obs"]] == [BIG, "x"]


@pytest.mark.parametrize("apart", [False, True], ids=["one-write", "fragment-by-fragment"])
@pytest.mark.parametrize("cut", [4, -20], ids=["large-continuation", "large-first"])
def test_fragmented_message_with_a_large_fragment_is_assembled(env_server, cut, apart):
    """Fragments stay websockets' to assemble, however large (RFC 6455 5.4)."""
    server = env_server()
    payload = json_step(BIG)
    fragments = [
        masked(Opcode.TEXT, payload[:cut], fin=False),
        masked(Opcode.PING, b"in between"),
        masked(Opcode.CONT, payload[cut:]),
    ]
    with upgrade(server.server.port, "/ws") as sock:
        if apart:
            for fragment in fragments:
                sock.sendall(fragment)
                time.sleep(0.02)
        else:
            sock.sendall(b"".join(fragments))
        assert read_frame(sock) == (Opcode.PONG, b"in between")
        assert reply(sock)["data"]["observation"]["echoed"] == BIG
        sock.sendall(masked(Opcode.TEXT, json_step(BIG[:-1])))  # a large one after them
        assert reply(sock)["data"]["observation"]["echoed"] == BIG[:-1]


def test_large_text_that_is_not_utf8_is_answered(env_server):
    server = env_server()
    with upgrade(server.server.port, "/ws") as sock:
        sock.sendall(masked(Opcode.TEXT, json_step(BIG)[:-3] + b'\xff"}}'))
        assert reply(sock)["data"]["code"] == "INVALID_JSON"
        sock.sendall(masked(Opcode.TEXT, json_step("still")))
        assert reply(sock)["data"]["observation"]["echoed"] == "still"


def test_large_frame_over_max_frame_still_closes_with_1009(env_server):
    server = env_server(max_frame=2 * MESSAGE_HEAD)
    with upgrade(server.server.port, "/ws") as sock:
        sock.sendall(masked(Opcode.TEXT, json_step(BIG))[: 4 * MESSAGE_HEAD])
        opcode, payload = read_frame(sock)
        assert (opcode, int.from_bytes(payload[:2], "big")) == (Opcode.CLOSE, 1009)


def test_unmasked_large_frame_fails_the_connection(env_server):
    """RFC 6455 5.1: left to websockets' parser, which closes with 1002."""
    server = env_server()
    with upgrade(server.server.port, "/ws") as sock:
        sock.sendall(Frame(Opcode.TEXT, json_step(BIG)).serialize(mask=False, extensions=[]))
        opcode, payload = read_frame(sock)
        assert (opcode, int.from_bytes(payload[:2], "big")) == (Opcode.CLOSE, 1002)


@pytest.mark.parametrize("apart", [False, True], ids=["one-write", "frame-by-frame"])
def test_large_new_message_inside_a_fragmented_one_fails_the_connection(env_server, apart):
    """RFC 6455 5.4: a data frame while a fragmented message is under way is a protocol
    error (1002), large or not: the connection layer leaves it to websockets' parser."""
    server = env_server()
    frames = [masked(Opcode.TEXT, b'{"type":', fin=False), masked(Opcode.TEXT, json_step(BIG))]
    with upgrade(server.server.port, "/ws") as sock:
        if apart:
            for frame in frames:
                sock.sendall(frame)
                time.sleep(0.02)
        else:
            sock.sendall(b"".join(frames))
        opcode, payload = read_frame(sock)
        assert (opcode, int.from_bytes(payload[:2], "big")) == (Opcode.CLOSE, 1002)


def test_large_compressed_messages_are_left_to_websockets(env_server):
    """permessage-deflate: compressed frames (RSV1), however large once deflated, go to
    websockets' parser to inflate; they arrive whole."""
    from websockets.sync.client import connect

    server = env_server(compression=True)
    noise = base64.b64encode(os.urandom(150_000)).decode()  # still > 64 KiB deflated
    with connect(server.ws(), compression="deflate", max_size=None, proxy=None) as conn:
        assert conn.protocol.extensions  # negotiated
        for message in (noise, BIG):
            conn.send(json_step(message).decode())
            assert json.loads(conn.recv(timeout=10))["data"]["observation"]["echoed"] == message


def test_a_trickled_large_message_is_held_in_one_buffer():
    """A peer that sends a large frame a byte at a time costs the server its size, not ~40x.

    Each read's bytes are unmasked into one buffer; kept as a list of per-read chunks, 1-byte
    reads held ~42 bytes of object per payload byte (found in review).
    """
    import tracemalloc

    from openenv_gym.runtime.websocket import _LargeMessage

    size = 256 * 1024
    mask = b"\x01\x02\x03\x04"
    payload = bytes(range(256)) * (size // 256)
    masked_payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    message = _LargeMessage(size, mask, text=False)
    tracemalloc.start()
    try:
        view = memoryview(masked_payload)
        for i in range(size):
            message.take(view[i : i + 1])
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message.left == 0
    assert message.got == size
    assert bytes(message.buf) == payload  # unmasked right, however the reads were cut
    assert held < 3 * size, f"{held} bytes held for a {size}-byte payload"
