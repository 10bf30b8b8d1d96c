"""The client's own frame reader and writer (``WebSocket._receive``, ``WebSocket._frame``).

The client parses whole plain frames itself and hands every other byte to websockets'
parser. These tests feed the same bytes, cut into reads at arbitrary places, through a
real socket pair to two clients, one with the fast path and one without (websockets
parses everything), and require the same messages, pongs and failures; frames the client
writes must be what websockets' own server-side parser reads back.
"""

from __future__ import annotations

import itertools
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side, State
from websockets.uri import parse_uri

from openenv_gym.transport.wire import Pong, WebSocket


def client(max_size: int = 2**24, *, fast: bool = True) -> tuple[WebSocket, socket.socket]:
    """An open client WebSocket on one end of a socket pair, and the other end."""
    ours, theirs = socket.socketpair()
    protocol = ClientProtocol(parse_uri("ws://test/"), state=State.OPEN, max_size=max_size)
    ws = WebSocket(ours, protocol, "ws://test/")
    ws.track_pongs = True
    ws._plain_rx = fast
    return ws, theirs


def feed(ws: WebSocket, peer: socket.socket, chunks: list[bytes]) -> list[object]:
    """Send each chunk, then let the client read it (one read per chunk; a chunk over
    what the socket pair buffers goes in slices of 32 KiB, each read on its own)."""
    for chunk in chunks:
        for at in range(0, len(chunk), 32 * 1024):
            if ws.failure is not None:
                return list(ws.messages)
            peer.sendall(chunk[at : at + 32 * 1024])
            ws.read()
    return list(ws.messages)


def summary(messages: list[object]) -> list[tuple[str, int]]:
    """Kinds and sizes (what a failure prints, rather than megabytes of payload)."""
    return [
        (type(m).__name__, len(m.data if isinstance(m, Pong) else m))  # type: ignore[arg-type]
        for m in messages
    ]


def cut(data: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(marks) if b > a]


def frame(opcode: Opcode, data: bytes, fin: bool = True) -> bytes:
    return Frame(opcode, data, fin).serialize(mask=False)


def raw(first: int, payload: bytes) -> bytes:
    """An unmasked frame of fewer than 126 bytes, first byte as given (checks nothing)."""
    return bytes((first, len(payload))) + payload


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[object]]:
    """Server frames (some messages fragmented, control frames between fragments) and
    the messages a client must make of them."""
    sizes = st.sampled_from([0, 1, 7, 125, 126, 127, 300, 65535, 65536, 70000])
    out: list[bytes] = []
    expected: list[object] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["text", "binary", "pong", "ping", "fragmented"]))
        size = draw(sizes)
        payload = bytes((65 + k % 26) for k in range(size))
        if kind == "text":
            out.append(frame(Opcode.TEXT, payload))
            expected.append(payload.decode())
        elif kind == "binary":
            out.append(frame(Opcode.BINARY, payload))
            expected.append(payload)
        elif kind in ("pong", "ping"):
            control = payload[:125]
            out.append(frame(Opcode.PONG if kind == "pong" else Opcode.PING, control))
            if kind == "pong":
                expected.append(Pong(control))
        else:
            parts = draw(st.integers(2, 4))
            step = max(1, size // parts)
            pieces = [payload[k : k + step] for k in range(0, size, step)] or [b""]
            pieces = pieces if len(pieces) > 1 else [*pieces, b""]
            for k, piece in enumerate(pieces):
                opcode = Opcode.BINARY if k == 0 else Opcode.CONT
                out.append(frame(opcode, piece, fin=k == len(pieces) - 1))
                if k < len(pieces) - 1 and draw(st.booleans()):  # between two fragments
                    out.append(frame(Opcode.PONG, b"between"))
                    expected.append(Pong(b"between"))
            expected.append(payload)
    return b"".join(out), expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.lists(st.integers(0, 2**20), max_size=8))
def test_any_cut_of_any_stream_reads_as_websockets_reads_it(stream, points):
    data, expected = stream
    fast, fast_peer = client()
    slow, slow_peer = client(fast=False)
    try:
        chunks = cut(data, points)
        got = feed(fast, fast_peer, chunks)
        assert summary(got) == summary(expected)
        assert got == expected
        assert feed(slow, slow_peer, chunks) == expected  # the oracle agrees
        assert fast.failure is None
    finally:
        for sock in (fast.sock, fast_peer, slow.sock, slow_peer):
            sock.close()


BAD = {
    "masked": Frame(Opcode.TEXT, b"hello").serialize(mask=True),
    "rsv1": raw(0xC1, b"hello"),
    "control-too-long": b"\x8a\x7e\x00\x80" + b"x" * 128,
    "control-not-final": raw(0x0A, b"p"),
    "continuation-first": frame(Opcode.CONT, b"x"),
    "new-message-in-fragmented": frame(Opcode.TEXT, b"a", fin=False) + frame(Opcode.TEXT, b"b"),
    "over-max-size": frame(Opcode.BINARY, b"x" * 2000),
    "not-utf8": frame(Opcode.TEXT, b"\xff\xfe"),
    "unknown-opcode": b"\x83\x01x",
}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("whole", [True, False], ids=["one-read", "byte-by-byte"])
def test_bad_frames_fail_the_connection_as_websockets_does(name, whole):
    good = frame(Opcode.TEXT, b"before")
    data = good + BAD[name] + frame(Opcode.TEXT, b"after")
    chunks = [data] if whole else [data[k : k + 1] for k in range(len(data))]
    results = []
    for fast in (True, False):
        ws, peer = client(max_size=1000, fast=fast)
        try:
            messages = feed(ws, peer, chunks)
            results.append((messages, type(ws.failure)))
            assert ws.failure is not None, "a bad frame must end the connection"
            assert "after" not in messages
        finally:
            ws.sock.close()
            peer.close()
    assert results[0] == results[1]


def test_a_close_frame_hands_the_rest_to_websockets():
    ws, peer = client()
    try:
        close = Frame(Opcode.CLOSE, b"\x03\xe8bye").serialize(mask=False)
        messages = feed(ws, peer, [frame(Opcode.TEXT, b"one") + close + frame(Opcode.TEXT, b"x")])
        assert messages == ["one"]
        assert ws.failure is not None
        assert "1000" in str(ws.failure) or "bye" in str(ws.failure)
    finally:
        ws.sock.close()
        peer.close()


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536, 100_000])
@pytest.mark.parametrize("kind", ["text", "binary", "ping"])
def test_frames_written_here_are_read_by_websockets_server_parser(size, kind):
    ws, peer = client()
    server = Protocol(Side.SERVER, state=State.OPEN, max_size=2**24)
    payload = bytes((97 + k % 26) for k in range(size))
    try:
        if kind == "ping":
            payload = payload[:125]
            ws.queue_ping(payload)
        else:
            ws.queue(payload.decode() if kind == "text" else payload)
        ws.queue("second")
        assert ws.flush()
        received = b""
        peer.settimeout(5.0)
        frames: list[Frame] = []
        while len(frames) < 2:
            received = peer.recv(2**20)
            assert received, "the client wrote nothing"
            server.receive_data(received)
            frames += [e for e in server.events_received() if isinstance(e, Frame)]
        assert server.parser_exc is None
        opcode = {"text": Opcode.TEXT, "binary": Opcode.BINARY, "ping": Opcode.PING}[kind]
        assert (frames[0].opcode, frames[0].data, frames[0].fin) == (opcode, payload, True)
        assert (frames[1].opcode, frames[1].data) == (Opcode.TEXT, b"second")
    finally:
        ws.sock.close()
        peer.close()


def test_masking_keys_differ_from_frame_to_frame():
    ws, peer = client()
    try:
        for _ in range(600):  # more than one draw of keys
            ws.queue_ping(b"")
        keys = {bytes(ws._out[k + 2 : k + 6]) for k in range(0, len(ws._out), 6)}
        assert len(keys) > 590  # 32-bit random keys: a repeat among 600 is rare
    finally:
        ws.sock.close()
        peer.close()
