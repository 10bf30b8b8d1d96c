"""``openenv_gym.transport.wire`` and ``keepalive`` against real servers on 127.0.0.1.

The WebSocket does its socket I/O on the caller's thread: these tests drive it directly
(``open_websocket``, ``send``, ``receive``...) against websockets' asyncio server running
on a thread of its own (the ``ws_server`` fixture), a TLS variant of it, raw sockets that
misbehave, and a tiny real HTTP ``CONNECT`` proxy.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import os
import select
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from blocked import wait_until_blocked
from openenv_gym_test_envs import ServerThread, quietly
from websockets.asyncio.server import ServerConnection, serve

from openenv_gym.exceptions import (
    ConnectError,
    ConnectionLostError,
    RemoteProtocolError,
    RequestTimeoutError,
    TransportError,
)
from openenv_gym.transport import handshake, keepalive, waiting
from openenv_gym.transport.handshake import HandshakeRefused, ws_url
from openenv_gym.transport.waiting import deadline_after
from openenv_gym.transport.wire import WebSocket, open_websocket

# A hang is bounded by these; no test expects anything to be fast.
SOON = 20.0
"""Seconds a test waits for something that should happen (bounds a hang)."""

HANG_BOUND = 10.0
"""Upper bound, in seconds, for "promptly": far above any healthy time, far below SOON."""

MB = 2**20


# ------------------------------------------------------------------------ TLS material
# A test CA and a leaf certificate it signed, for localhost, 127.0.0.1 and
# gym-target.invalid; valid from 2000 to 2100. Made once with ``openssl ca`` (P-256).

TEST_CA_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBcDCCARagAwIBAgICEAAwCgYIKoZIzj0EAwIwHjEcMBoGA1UEAwwTb3BlbmVu
di1neW0gdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMTAwMDEwMTAwMDAwMFow
HjEcMBoGA1UEAwwTb3BlbmVudi1neW0gdGVzdCBDQTBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABD1K4HqkmHdHbHQNSPnWjseyZn3IB/GPrAVdlqk0yvZyAD5DCdnW
DTyVtpzdByLTxbIAn8wubSYyp4BT+jgJw1+jQjBAMA8GA1UdEwEB/wQFMAMBAf8w
DgYDVR0PAQH/BAQDAgEGMB0GA1UdDgQWBBTfN0ln2TiPsLuQ9eFvDHh2WYRXSDAK
BggqhkjOPQQDAgNIADBFAiBqbDJPZf12KNKGisKE32wO2gAUyCXrYf3tdL6wOBu5
3QIhAIFc0Uk2EEvBZjDzcf/qCpph4ngd/mUj+Bf3yQBNv25d
-----END CERTIFICATE-----
"""

TEST_LEAF_PEM = """\
-----BEGIN CERTIFICATE-----
MIIByzCCAXGgAwIBAgICEAEwCgYIKoZIzj0EAwIwHjEcMBoGA1UEAwwTb3BlbmVu
di1neW0gdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMTAwMDEwMTAwMDAwMFow
FDESMBAGA1UEAwwJbG9jYWxob3N0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
YLknM7RYg3s9l6ZiBGbcxQEVQBmWOxO4lM0xshIqai2wowJnKJ/dZe1grdxIZOTK
86ujGyM8DxxpcnVtNrkEQ6OBpjCBozAMBgNVHRMBAf8EAjAAMA4GA1UdDwEB/wQE
AwIHgDATBgNVHSUEDDAKBggrBgEFBQcDATAuBgNVHREEJzAlgglsb2NhbGhvc3SC
Emd5bS10YXJnZXQuaW52YWxpZIcEfwAAATAdBgNVHQ4EFgQU4Pa1odIBx7wGrTh+
ifbfm6j7DL8wHwYDVR0jBBgwFoAU3zdJZ9k4j7C7kPXhbwx4dlmEV0gwCgYIKoZI
zj0EAwIDSAAwRQIhAM2lHNhMpoyDfXDF2DyvWOjxr4tjPYFAK3PYUOHcjHfkAiBX
7WFQhucJhmnoiDWEBe+IWyjyCwG8PoBlHOIaxQeRiQ==
-----END CERTIFICATE-----
"""

TEST_LEAF_KEY_PEM = """\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgdnbTej7dI+YH+zHk
cJDhx3WkJriDiS1s+vkxUrK8jVqhRANCAARguScztFiDez2XpmIEZtzFARVAGZY7
E7iUzTGyEipqLbCjAmcon91l7WCt3Ehk5Mrzq6MbIzwPHGlydW02uQRD
-----END PRIVATE KEY-----
"""


@pytest.fixture
def tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """The server side's TLS context; the client trusts the test CA (``SSL_CERT_FILE``)."""
    ca = tmp_path / "ca.pem"
    ca.write_text(TEST_CA_PEM)
    chain = tmp_path / "leaf.pem"
    chain.write_text(TEST_LEAF_PEM)
    key = tmp_path / "leaf-key.pem"
    key.write_text(TEST_LEAF_KEY_PEM)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # read by ssl.create_default_context()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain, key)
    return context


# ------------------------------------------------------------------------ helpers


async def echo(ws: ServerConnection) -> None:
    """Send every message back as it came (text as text, binary as binary)."""
    async for message in ws:
        await ws.send(message)


@pytest.fixture
def ws_server(ws_server: Callable[..., str]) -> Callable[..., str]:
    """conftest's ``ws_server``, its handlers wrapped with :func:`quietly`."""

    def start(handler: Callable[..., Any], **kwargs: Any) -> str:
        return ws_server(quietly(handler), **kwargs)

    return start


def port_of(url: str) -> int:
    """The port of ``http://127.0.0.1:PORT``."""
    return int(url.rsplit(":", 1)[1])


@pytest.fixture
def connect(ws_server: Any) -> Iterator[Callable[..., WebSocket]]:
    """``open_websocket`` whose sockets are dropped at teardown (before the servers stop)."""
    opened: list[WebSocket] = []

    def open_(url: str, **kwargs: Any) -> WebSocket:
        kwargs.setdefault("timeout", 5.0)
        ws = open_websocket(url, **kwargs)
        opened.append(ws)
        return ws

    yield open_
    for ws in opened:
        with ws.lock:  # the keepalive thread may be reading a tracked one
            ws.abort()


@pytest.fixture(params=["ws", "wss"])
def scheme(request: pytest.FixtureRequest) -> str:
    """Plain and TLS."""
    return request.param


@pytest.fixture
def serve_ws(ws_server: Any, scheme: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``serve_ws(handler, path, **serve_kwargs)`` -> the ws:// or wss:// URL of ``path``."""

    def start(handler: Callable[..., Any], path: str = "/", **kwargs: Any) -> str:
        if scheme == "wss":
            kwargs["ssl"] = request.getfixturevalue("tls")
            return f"wss://localhost:{port_of(ws_server(handler, **kwargs))}{path}"
        return ws_url(ws_server(handler, **kwargs), path)

    return start


@dataclass
class SmallBufferServer:
    """What :func:`small_buffer_server` yields."""

    port: int
    connections: list[ServerConnection]  # server side, in the order they came
    loop: asyncio.AbstractEventLoop  # the server's: touch connections only from there


@contextlib.contextmanager
def small_buffer_server(
    handler: Callable[..., Any], **serve_kwargs: Any
) -> Iterator[SmallBufferServer]:
    """A websockets server whose sockets have 64 KiB kernel buffers (no autotuning).

    With small buffers, a peer that stops reading blocks its writer after a few hundred
    KiB, whatever the machine's TCP settings.
    """
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    connections: list[ServerConnection] = []

    async def handle(ws: ServerConnection) -> None:
        connections.append(ws)
        await quietly(handler)(ws)

    thread = ServerThread()
    try:

        async def start() -> Any:
            return await serve(handle, sock=listener, **serve_kwargs)

        server = thread.run(start())
        try:
            yield SmallBufferServer(port, connections, thread.loop)
        finally:

            async def stop() -> None:
                server.close()
                await server.wait_closed()

            thread.run(stop())
    finally:
        thread.stop()
        listener.close()


def run_in_thread(fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """Run ``fn`` on a fresh daemon thread; its result or exception in a future."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def target() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the test through the future
            future.set_exception(exc)

    threading.Thread(target=target, daemon=True).start()
    return future


def messages_of(ws: WebSocket) -> list[bytes | str]:
    """The messages waiting on ``ws`` (taken under its lock: the keepalive thread adds)."""
    with ws.lock:
        return list(ws.messages)


def waiting_in_wire(thread_id: int) -> bool:
    """Whether thread ``thread_id`` is blocked in ``wire``'s poll (a snapshot of its stack)."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame.f_code is waiting.wait_one.__code__:
            return True
        frame = frame.f_back
    return False


def wait_until(condition: Callable[[], bool], timeout: float = SOON) -> bool:
    """Poll ``condition`` every 10 ms until it holds or ``timeout`` passes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


# ------------------------------------------------------------------------- handshake


def test_upgrade_selects_a_subprotocol_and_sends_extra_headers(ws_server, connect):
    seen: dict[str, Any] = {}

    def record(connection, request):
        seen["path"] = request.path
        seen["headers"] = request.headers
        return None

    def select(connection, offered):
        seen["offered"] = list(offered)
        return "gym.v2" if "gym.v2" in offered else None

    url = ws_server(echo, process_request=record, select_subprotocol=select)
    ws = connect(
        ws_url(url, "/ws?x=1"),
        subprotocols=["gym.v9", "gym.v2"],
        headers={"Authorization": "Bearer s3cret", "X-Trace": "t-1", "User-Agent": "mine/2"},
    )
    assert ws.subprotocol == "gym.v2"
    assert seen["offered"] == ["gym.v9", "gym.v2"]
    assert seen["path"] == "/ws?x=1"
    headers = seen["headers"]
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["X-Trace"] == "t-1"
    assert headers.get_all("User-Agent") == ["mine/2"]  # replaced, not added
    ws.send("still works", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "still works"


def test_upgrade_without_subprotocol_sends_our_user_agent(ws_server, connect):
    seen: dict[str, Any] = {}

    def record(connection, request):
        seen["headers"] = request.headers
        return None

    ws = connect(ws_url(ws_server(echo, process_request=record), "/ws"))
    assert ws.subprotocol is None
    assert seen["headers"].get_all("User-Agent") == [handshake.USER_AGENT]
    assert "Sec-WebSocket-Protocol" not in seen["headers"]


def test_subprotocol_not_selected_by_the_server(ws_server, connect):
    ws = connect(ws_url(ws_server(echo), "/ws"), subprotocols=["gym.v2"])
    assert ws.subprotocol is None


@pytest.mark.parametrize("status", [403, 404, 500, 302])
def test_refused_upgrade_raises_handshake_refused_with_the_status(ws_server, status):
    def refuse(connection, request):
        return connection.respond(status, "no\n")  # a 302 without Location: not followed

    url = ws_url(ws_server(echo, process_request=refuse), "/ws")
    with pytest.raises(HandshakeRefused) as info:
        open_websocket(url, timeout=5)
    assert info.value.status == status
    assert isinstance(info.value, ConnectError)
    assert f"HTTP {status}" in str(info.value)
    assert url in str(info.value)


def test_connect_timeout_when_nobody_answers_the_upgrade():
    # The kernel completes the TCP handshake into the backlog; nothing ever reads.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"ws://127.0.0.1:{listener.getsockname()[1]}/ws"
        with pytest.raises(ConnectError, match="timed out") as info:
            open_websocket(url, timeout=0.3)
    assert not isinstance(info.value, HandshakeRefused)


def test_connect_to_a_closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(ConnectError) as info:
            open_websocket(f"ws://127.0.0.1:{port}/ws", timeout=5)
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize("url", ["ws://127.0.0.1:notaport/ws", "http://127.0.0.1:1/ws", "ws://"])
def test_bad_url_is_a_connect_error(url):
    with pytest.raises(ConnectError):
        open_websocket(url, timeout=5)


def test_server_closing_during_the_handshake(ws_server):
    def hang_up(connection, request):
        connection.transport.abort()  # drop the TCP connection instead of answering

    url = ws_url(ws_server(echo, process_request=hang_up), "/ws")
    with pytest.raises(ConnectError) as info:
        open_websocket(url, timeout=5)
    assert not isinstance(info.value, HandshakeRefused)


def raw_http_server(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A TCP server that reads one request head, writes ``answer``, and stays connected."""
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
            conn.sendall(answer)
            with contextlib.suppress(OSError):
                while conn.recv(65536):  # until the client goes
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener, thread


def test_invalid_101_response_is_not_a_refusal():
    listener, thread = raw_http_server(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: bm90IHRoZSByaWdodCBrZXk=\r\n\r\n"
    )
    with listener:
        url = f"ws://127.0.0.1:{listener.getsockname()[1]}/ws"
        with pytest.raises(ConnectError) as info:
            open_websocket(url, timeout=5)
    thread.join(HANG_BOUND)
    assert not isinstance(info.value, HandshakeRefused)


def test_non_http_answer_is_reported_as_such():
    listener, thread = raw_http_server(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    with listener:
        url = f"ws://127.0.0.1:{listener.getsockname()[1]}/ws"
        with pytest.raises(ConnectError) as info:
            open_websocket(url, timeout=3)
    thread.join(HANG_BOUND)
    assert "timed out" not in str(info.value)


# ------------------------------------------------------------------------- redirects


def redirect(routes: dict[str, tuple[int, str]]) -> Callable[..., Any]:
    """``process_request`` answering ``routes[path]`` = (status, Location)."""

    def process_request(connection, request):
        if request.path in routes:
            status, location = routes[request.path]
            response = connection.respond(status, "moved\n")
            response.headers["Location"] = location
            return response
        return None

    return process_request


async def greet_with_path(ws: ServerConnection) -> None:
    """Say which path was upgraded, then echo."""
    assert ws.request is not None
    await ws.send(ws.request.path)
    await echo(ws)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_to_another_path_is_followed(ws_server, connect, status):
    url = ws_server(greet_with_path, process_request=redirect({"/old": (status, "/new?k=v")}))
    ws = connect(ws_url(url, "/old"), subprotocols=None)
    assert ws.url == ws_url(url, "/new?k=v")
    assert ws.receive(deadline_after(SOON)) == "/new?k=v"


def test_redirect_chain_to_another_server(ws_server, connect):
    target = ws_server(greet_with_path)
    first = ws_server(
        greet_with_path,
        process_request=redirect(
            {"/a": (302, "/b"), "/b": (307, f"{target}/landed")}  # absolute http:// URL
        ),
    )
    ws = connect(ws_url(first, "/a"))
    assert ws.url == ws_url(target, "/landed")
    assert ws.receive(deadline_after(SOON)) == "/landed"
    ws.send(b"\x01\x02", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == b"\x01\x02"


def test_redirect_loop_is_a_connect_error(ws_server):
    url = ws_server(echo, process_request=redirect({"/x": (302, "/y"), "/y": (302, "/x")}))
    with pytest.raises(ConnectError, match="too many redirects"):
        open_websocket(ws_url(url, "/x"), timeout=5)


# ------------------------------------------------------------------------- messages


def test_text_and_binary_messages_round_trip(serve_ws, connect):
    ws = connect(serve_ws(echo, "/echo"))
    deadline = deadline_after(SOON)
    messages: list[bytes | str] = ["héllo ✓ 漢字", b"\x00\x01\xff\xfe", "", b"", "{}" * 1000]
    for message in messages:
        ws.send(message, deadline)
        got = ws.receive(deadline)
        assert got == message
        assert type(got) is type(message)


def test_queued_messages_are_written_together_and_answered_in_order(serve_ws, connect):
    ws = connect(serve_ws(echo))
    for k in range(50):
        ws.queue(f"m{k}" if k % 2 else f"m{k}".encode())
    ws.flush_by(deadline_after(SOON))
    assert not ws.wants_write
    got = [ws.receive(deadline_after(SOON)) for _ in range(50)]
    assert got == [f"m{k}" if k % 2 else f"m{k}".encode() for k in range(50)]


def test_receive_timeout_keeps_the_connection(serve_ws, connect):
    async def answer_late(ws):
        async for message in ws:
            if message == "now":
                await ws.send("answer")

    ws = connect(serve_ws(answer_late))
    ws.send("not answered", deadline_after(SOON))
    with pytest.raises(RequestTimeoutError):
        ws.receive(deadline_after(0.2))
    assert not ws.closed
    ws.send("now", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "answer"


def test_fragmented_messages_are_reassembled(serve_ws, connect):
    async def fragments(ws):
        await ws.recv()
        await ws.send(["frag-1 ", "frag-2 ", "", "frag-3"])
        await ws.send([b"\x00\x01", b"", b"\x02", b"\x03" * 70_000])
        # a character split between two fragments: decoded only once reassembled
        await ws.send([b"caf\xc3", b"\xa9 \xe2\x9c", b"\x93"], text=True)

        async def with_a_ping():  # a ping between the fragments of a message
            yield "before the ping, "
            pong = await ws.ping(b"mid-message")
            await asyncio.wait_for(pong, SOON)
            yield "after the pong"

        await ws.send(with_a_ping())
        await echo(ws)

    ws = connect(serve_ws(fragments))
    deadline = deadline_after(SOON)
    ws.send("go", deadline)
    assert ws.receive(deadline) == "frag-1 frag-2 frag-3"
    assert ws.receive(deadline) == b"\x00\x01\x02" + b"\x03" * 70_000
    assert ws.receive(deadline) == "café ✓"
    assert ws.receive(deadline) == "before the ping, after the pong"
    ws.send("the connection is fine", deadline)
    assert ws.receive(deadline) == "the connection is fine"


def test_server_ping_is_answered_while_waiting_in_receive(serve_ws, connect):
    async def ping_then_answer(ws):
        async for _ in ws:
            pong = await ws.ping(b"are you there")
            try:
                await asyncio.wait_for(pong, SOON)
            except TimeoutError:
                await ws.send("no pong")
            else:
                await ws.send("pong received")

    ws = connect(serve_ws(ping_then_answer))
    ws.send("go", deadline_after(SOON))
    assert ws.receive(deadline_after(2 * SOON)) == "pong received"


def test_large_messages_both_ways_while_the_buffers_are_full(scheme, request):
    # The server echoes each message, stops reading while its echo waits to be read
    # (max_queue=1), and its sockets have small kernel buffers: a client that did not read
    # while it writes would block forever on its fourth message (here: time out).
    ssl_context = request.getfixturevalue("tls") if scheme == "wss" else None
    with small_buffer_server(
        echo, max_size=None, max_queue=1, ssl=ssl_context, close_timeout=1
    ) as server:
        port = server.port
        host = "localhost" if scheme == "wss" else "127.0.0.1"
        ws = open_websocket(f"{scheme}://{host}:{port}/big", timeout=5)
        try:
            payloads: list[bytes | str] = [
                os.urandom(16) + bytes([k]) * (3 * MB) if k % 3 else "é" * (MB + k)
                for k in range(8)
            ]
            deadline = deadline_after(30)
            for payload in payloads:
                ws.send(payload, deadline)
            got = [ws.receive(deadline) for _ in payloads]
            assert [len(g) for g in got] == [len(p) for p in payloads]
            assert got == payloads
        finally:
            ws.abort()


def test_server_closing_is_connection_lost_closed_by_the_server(serve_ws, connect):
    async def say_bye(ws):
        await ws.recv()
        await ws.send("last words")
        await ws.close(4001, "bye now")

    ws = connect(serve_ws(say_bye))
    ws.send("hello", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "last words"  # what came before the close
    with pytest.raises(ConnectionLostError, match="closed by the server") as info:
        ws.receive(deadline_after(SOON))
    assert "4001" in str(info.value)
    assert ws.closed
    assert ws.close_received.code == 4001
    assert ws.close_received.reason == "bye now"
    with pytest.raises(ConnectionLostError):
        ws.send("too late", deadline_after(SOON))
    ws.close()  # never raises once closed


def test_server_dropping_tcp_is_connection_lost(serve_ws, connect):
    async def drop(ws):
        await ws.recv()
        ws.transport.abort()

    ws = connect(serve_ws(drop))
    ws.send("hello", deadline_after(SOON))
    with pytest.raises(ConnectionLostError, match=r"closed by the server|lost"):
        ws.receive(deadline_after(SOON))
    assert ws.close_received is None


def test_close_is_polite(ws_server):
    closed: concurrent.futures.Future[Any] = concurrent.futures.Future()

    async def watch(ws):
        await ws.wait_closed()
        closed.set_result((ws.close_code, ws.close_reason))

    ws = open_websocket(ws_url(ws_server(watch), "/"), timeout=5)
    ws.close(timeout=SOON)
    code, _ = closed.result(SOON)
    assert code != 1006  # 1006: the TCP connection ended without a closing handshake
    assert ws.close_received is not None  # the server's answer was waited for
    assert ws.closed
    with pytest.raises(ConnectionLostError, match="closed by the client"):
        ws.check()
    ws.close()
    ws.abort()


def test_invalid_utf8_text_frame_is_a_remote_protocol_error(ws_server, connect):
    async def bad_text(ws):
        await ws.recv()
        await ws.send(b"ok \xff\xfe not utf-8", text=True)
        await echo(ws)

    ws = connect(ws_url(ws_server(bad_text), "/"))
    ws.send("go", deadline_after(SOON))
    with pytest.raises(RemoteProtocolError, match="not UTF-8"):
        ws.receive(deadline_after(SOON))
    assert ws.closed
    with pytest.raises(RemoteProtocolError):
        ws.send("after", deadline_after(SOON))


def test_message_over_max_size_is_reported_as_such(ws_server, connect):
    async def too_big(ws):
        await ws.recv()
        await ws.send(b"x" * 5000)
        await echo(ws)

    ws = connect(ws_url(ws_server(too_big), "/"), max_size=1000)
    ws.send("go", deadline_after(SOON))
    with pytest.raises(TransportError) as info:
        ws.receive(deadline_after(SOON))
    assert "closed by the server" not in str(info.value)
    assert "1000" in str(info.value) or "too big" in str(info.value)


def test_client_side_protocol_failure_ends_the_connection_at_once():
    async def too_big_then_deaf(ws):
        # stop reading (max_queue=1: two unread messages pause the transport), then send
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SOON
        while ws.transport.is_reading() and loop.time() < deadline:  # noqa: ASYNC110 (a poll)
            await asyncio.sleep(0.05)
        await ws.send(b"x" * 5000)
        await ws.wait_closed()

    with small_buffer_server(too_big_then_deaf, max_queue=1, close_timeout=1) as server:
        ws = open_websocket(f"ws://127.0.0.1:{server.port}/", timeout=5, max_size=1000)
        try:
            for k in range(4):
                ws.send(f"unread {k}", deadline_after(SOON))
            with pytest.raises((ConnectionLostError, RemoteProtocolError)):
                ws.receive(deadline_after(3))
            with pytest.raises((ConnectionLostError, RemoteProtocolError)):
                ws.queue("after the failure")
            ws.close(timeout=1)  # documented: never raises
        finally:
            ws.abort()


# ------------------------------------------------------------------------- interrupting


def test_interrupt_ends_a_blocked_receive(serve_ws, connect):
    async def silent(ws):
        await ws.wait_closed()

    ws = connect(serve_ws(silent))
    interrupted = threading.Event()
    ended: list[BaseException | bool] = []  # how receive ended; whether after the interrupt

    def receive() -> None:
        try:
            ws.receive(deadline_after(60))
        except BaseException as exc:  # handed to the test
            ended.append(exc)
        ended.append(interrupted.is_set())

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    wait_until_blocked(receiver)  # in poll(): the path under test, not an earlier one
    interrupted.set()
    ws.interrupt()
    receiver.join(SOON)
    error, after_the_interrupt = ended
    assert isinstance(error, ConnectionLostError)
    assert "closed by the client" in str(error)
    assert after_the_interrupt is True
    assert ws.closed
    ws.close()  # never raises, returns at once


@pytest.mark.parametrize("how", ["interrupt", "server reset"])
def test_send_blocked_on_a_full_socket_raises_when_the_connection_ends(how):
    async def deaf(ws):  # never reads: after two queued frames the transport pauses
        await ws.wait_closed()

    with small_buffer_server(deaf, max_size=None, max_queue=1, close_timeout=1) as server:
        connections = server.connections
        ws = open_websocket(f"ws://127.0.0.1:{server.port}/", timeout=5)
        try:
            writer_ids: list[int] = []

            def writer() -> str:
                writer_ids.append(threading.get_ident())
                for _ in range(3):
                    ws.send(b"f" * 4096, deadline_after(SOON))
                ws.send(b"x" * (16 * MB), deadline_after(60))  # cannot all be written
                return "send returned normally"

            pending = run_in_thread(writer)
            # wait until the writer is stuck: the server stopped reading, the client's
            # send buffer is full (so stays full), and the writer waits in poll()
            assert wait_until(
                lambda: (
                    bool(connections)
                    and not connections[0].transport.is_reading()
                    and not select.select([], [ws.sock], [], 0)[1]
                    and bool(writer_ids)
                    and waiting_in_wire(writer_ids[0])
                )
            )
            assert ws.wants_write
            if how == "interrupt":
                ws.interrupt()
            else:
                server.loop.call_soon_threadsafe(connections[0].transport.abort)
            with pytest.raises(ConnectionLostError):
                pending.result(SOON)
        finally:
            ws.abort()


# ------------------------------------------------------------------------- keepalive


@pytest.fixture
def fast_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds every 50 ms; wakes the thread now if an earlier test started it."""
    monkeypatch.setattr(keepalive, "INTERVAL", 0.05)
    keepalive._wake.set()


def test_keepalive_answers_a_ping_on_an_idle_socket(serve_ws, connect, fast_keepalive):
    ponged = threading.Event()

    async def ping_idle(ws):
        await ws.recv()
        pong = await ws.ping(b"idle?")
        await asyncio.wait_for(pong, SOON)
        ponged.set()
        await ws.send("after the pong")
        await ws.wait_closed()

    ws = connect(serve_ws(ping_idle))
    keepalive.track(ws)
    keepalive._wake.set()
    with ws.lock:  # as every caller does: the keepalive thread keeps off meanwhile
        ws.send("go", deadline_after(SOON))
    # the client does nothing with ws from here on: only the keepalive thread reads it
    assert ponged.wait(SOON)
    assert wait_until(lambda: messages_of(ws) == ["after the pong"])  # kept for the caller
    with ws.lock:
        assert ws.receive(deadline_after(SOON)) == "after the pong"


def test_idle_connection_survives_server_keepalive(serve_ws, connect, fast_keepalive):
    # The server pings every 0.2 s and drops a connection whose pong is 1.5 s late.
    ws = connect(serve_ws(echo, ping_interval=0.2, ping_timeout=1.5))
    keepalive.track(ws)
    keepalive._wake.set()
    idle_until = time.monotonic() + 4.0  # twice interval + timeout: dead without the thread
    while time.monotonic() < idle_until:
        time.sleep(0.1)
    with ws.lock:
        assert not ws.closed
        ws.send("still there?", deadline_after(SOON))
        assert ws.receive(deadline_after(SOON)) == "still there?"


def test_without_keepalive_an_idle_connection_is_dropped_by_the_server(ws_server, connect):
    # The counterpart of the test above: the server does drop a peer that does not pong.
    dropped = threading.Event()

    async def watch(ws):
        await ws.wait_closed()
        dropped.set()

    url = ws_server(watch, ping_interval=0.1, ping_timeout=0.3, close_timeout=1)
    ws = connect(ws_url(url, "/"))  # not tracked: nobody reads it
    assert dropped.wait(SOON)
    with pytest.raises(ConnectionLostError, match="closed by the server"):
        ws.receive(deadline_after(SOON))


def test_keepalive_keeps_off_a_socket_whose_lock_is_held(ws_server, connect, fast_keepalive):
    checked = threading.Event()

    async def ping_and_report(ws):
        await ws.recv()
        pong = await ws.ping()
        try:
            await asyncio.wait_for(asyncio.shield(pong), 1.0)
            early = True
        except TimeoutError:
            early = False
        checked.set()
        await asyncio.wait_for(pong, SOON)
        await ws.send("early" if early else "late")
        await ws.wait_closed()

    ws = connect(ws_url(ws_server(ping_and_report), "/"))
    keepalive.track(ws)
    keepalive._wake.set()
    with ws.lock:  # a call is using the socket: the keepalive thread must not read it
        ws.send("go", deadline_after(SOON))
        assert checked.wait(SOON)
    # released: the next round answers the ping
    with ws.lock:
        assert ws.receive(deadline_after(SOON)) == "late"


def test_keepalive_notices_a_close_on_an_idle_socket(ws_server, connect, fast_keepalive):
    async def leave(ws):
        await ws.recv()
        await ws.send("unsolicited")
        await ws.close(1001, "going away")

    ws = connect(ws_url(ws_server(leave), "/"))
    keepalive.track(ws)
    keepalive._wake.set()
    with ws.lock:
        ws.send("go", deadline_after(SOON))
    assert wait_until(lambda: ws.closed)  # noticed without any call on ws
    with ws.lock:
        assert ws.receive(deadline_after(SOON)) == "unsolicited"  # data kept for the caller
        with pytest.raises(ConnectionLostError, match=r"closed by the server.*1001"):
            ws.receive(deadline_after(SOON))


# ------------------------------------------------------------------------- waiting


def test_wait_reports_the_socket_with_something_to_read(ws_server, connect):
    async def answer_on_command(ws):
        async for message in ws:
            if message == "speak":
                await ws.send("spoken")

    url = ws_url(ws_server(answer_on_command), "/")
    quiet, talker = connect(url), connect(url)
    assert waiting.wait([quiet, talker], deadline_after(0.2)) is False
    assert waiting.readable([quiet, talker]) == []
    talker.send("speak", deadline_after(SOON))
    assert waiting.wait([quiet, talker], deadline_after(SOON)) is True
    assert wait_until(lambda: waiting.readable([quiet, talker]) == [talker])
    talker.read()
    assert list(talker.messages) == ["spoken"]
    assert waiting.wait([quiet, talker], None) is True  # a message waits: no blocking
    quiet.abort()
    assert waiting.wait([quiet], None) is True  # closed sockets count as ready


# ------------------------------------------------------------------------- proxies

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy variable from the outside; set the ones a test needs."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("REQUEST_METHOD", raising=False)  # CGI: would hide HTTP_PROXY
    return monkeypatch


class ConnectProxy:
    """A tiny real HTTP ``CONNECT`` proxy on 127.0.0.1, one thread per tunnel direction.

    Every target host is reached on 127.0.0.1 (so a test can use a name that does not
    resolve, which the client must not try to resolve itself).

    Args:
        answer: None to open tunnels (``200``); else the bytes to answer instead, after
            which the client connection is closed; ``b""``: close without answering;
            ``"silent"``: never answer.
    """

    def __init__(self, answer: bytes | str | None = None) -> None:
        self.answer = answer
        self.requests: list[list[str]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._spawn(self._accept_loop)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            self._sockets.append(client)
            self._spawn(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        head = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            self.requests.append(head.split(b"\r\n\r\n", 1)[0].decode().split("\r\n"))
            if self.answer == "silent":
                self._stop.wait()
                return
            if self.answer is not None:
                client.sendall(self.answer)  # type: ignore[arg-type]
                client.close()
                return
            _, target, _ = self.requests[-1][0].split(" ")
            upstream = socket.create_connection(("127.0.0.1", int(target.rsplit(":", 1)[1])))
            self._sockets.append(upstream)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._spawn(self._pipe, upstream, client)
            self._pipe(client, upstream)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def header(self, k: int, name: str) -> str | None:
        """Header ``name`` of the ``k``-th CONNECT request."""
        for line in self.requests[k][1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None

    def close(self) -> None:
        self._stop.set()
        for sock in [self.listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(HANG_BOUND)
        assert not any(t.is_alive() for t in self._threads)


@pytest.fixture
def proxy() -> Iterator[Callable[..., ConnectProxy]]:
    """Factory of :class:`ConnectProxy`; all are closed at teardown."""
    made: list[ConnectProxy] = []

    def make(answer: bytes | str | None = None) -> ConnectProxy:
        made.append(ConnectProxy(answer))
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_websocket_through_an_http_connect_proxy(ws_server, connect, proxy, proxy_env):
    tunnel = proxy()
    port = port_of(ws_server(greet_with_path))
    proxy_env.setenv("http_proxy", tunnel.url)
    ws = connect(f"ws://gym-target.invalid:{port}/through")  # resolvable by the proxy only
    assert ws.receive(deadline_after(SOON)) == "/through"
    ws.send("round trip", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "round trip"
    assert len(tunnel.requests) == 1
    assert tunnel.requests[0][0] == f"CONNECT gym-target.invalid:{port} HTTP/1.1"
    assert tunnel.header(0, "Host") == f"gym-target.invalid:{port}"
    assert tunnel.header(0, "User-Agent") == handshake.USER_AGENT
    assert tunnel.header(0, "Proxy-Authorization") is None


def test_proxy_credentials_are_sent(ws_server, connect, proxy, proxy_env):
    tunnel = proxy()
    port = port_of(ws_server(echo))
    proxy_env.setenv("HTTP_PROXY", f"http://gym%20user:p%40ss:word@127.0.0.1:{tunnel.port}")
    ws = connect(f"ws://gym-target.invalid:{port}/")
    ws.send("hi", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "hi"
    expected = base64.b64encode(b"gym user:p@ss:word").decode()
    assert tunnel.header(0, "Proxy-Authorization") == f"Basic {expected}"


def test_all_proxy_is_the_fallback(ws_server, connect, proxy, proxy_env):
    tunnel = proxy()
    port = port_of(ws_server(echo))
    proxy_env.setenv("all_proxy", tunnel.url)
    ws = connect(f"ws://gym-target.invalid:{port}/")
    ws.send("hi", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "hi"
    assert tunnel.requests[0][0].startswith("CONNECT gym-target.invalid:")


def test_wss_through_the_https_proxy(ws_server, connect, proxy, proxy_env, tls):
    tunnel = proxy()
    port = port_of(ws_server(echo, ssl=tls, max_size=None))
    proxy_env.setenv("https_proxy", tunnel.url)
    proxy_env.setenv("http_proxy", "http://127.0.0.1:9")  # for ws:// only: must not be used
    ws = connect(f"wss://gym-target.invalid:{port}/tls")
    payload = os.urandom(3 * MB)
    ws.send(payload, deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == payload
    assert tunnel.requests[0][0] == f"CONNECT gym-target.invalid:{port} HTTP/1.1"


def test_loopback_hosts_skip_the_proxy(ws_server, connect, proxy, proxy_env):
    tunnel = proxy()
    url = ws_server(echo)
    proxy_env.setenv("http_proxy", tunnel.url)
    for host in ("127.0.0.1", "localhost"):
        ws = connect(f"ws://{host}:{port_of(url)}/")
        ws.send(host, deadline_after(SOON))
        assert ws.receive(deadline_after(SOON)) == host
    assert tunnel.requests == []


def test_no_proxy_is_honoured(proxy_env):
    proxy_env.setenv("http_proxy", "http://127.0.0.1:3128")
    proxy_env.setenv("no_proxy", "example.org,.internal")
    assert handshake._proxy_for("ws://example.org:80/ws") is None
    assert handshake._proxy_for("ws://env.internal/ws") is None
    assert handshake._proxy_for("ws://elsewhere.test/ws") == "http://127.0.0.1:3128"
    assert handshake._proxy_for("wss://elsewhere.test/ws") is None  # https_proxy unset


def test_tunnel_to_a_loopback_target(ws_server, proxy, proxy_env):
    # _tunnel itself, with a target on 127.0.0.1 (which open_websocket reaches directly)
    tunnel = proxy()
    port = port_of(ws_server(echo))
    sock = handshake._tunnel(tunnel.url, "127.0.0.1", port, deadline_after(5), "ws://x/")
    with sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP, through the tunnel
        sock.settimeout(5)
        assert sock.recv(4096).startswith(b"HTTP/1.1 ")
    assert tunnel.requests[0][0] == f"CONNECT 127.0.0.1:{port} HTTP/1.1"


@pytest.mark.parametrize("variable", ["all_proxy", "http_proxy", "HTTP_PROXY"])
@pytest.mark.parametrize("setting", ["socks5://127.0.0.1:1080", "socks5h://proxy:1080"])
def test_socks_proxy_is_refused_clearly(proxy_env, variable, setting):
    proxy_env.setenv(variable, setting)
    with pytest.raises(ConnectError, match="not an http:// proxy") as info:
        open_websocket("ws://gym-target.invalid:8000/ws", timeout=5)
    assert setting in str(info.value)
    assert "no_proxy" in str(info.value)  # says how to go direct


def test_https_proxy_url_is_refused_clearly(proxy_env):
    proxy_env.setenv("https_proxy", "https://127.0.0.1:3129")
    with pytest.raises(ConnectError, match="not an http:// proxy"):
        open_websocket("wss://gym-target.invalid/ws", timeout=5)


def test_proxy_without_a_scheme_is_http(ws_server, connect, proxy, proxy_env):
    tunnel = proxy()
    port = port_of(ws_server(echo))
    proxy_env.setenv("http_proxy", f"127.0.0.1:{tunnel.port}")
    ws = connect(f"ws://gym-target.invalid:{port}/")
    ws.send("hi", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "hi"


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", "refused the tunnel.*407"),
        (b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", "refused the tunnel.*502"),
        (b"", "closed the tunnel"),
        ("silent", "timed out"),
    ],
)
def test_proxy_failures_are_connect_errors(proxy, proxy_env, answer, match):
    tunnel = proxy(answer)
    proxy_env.setenv("http_proxy", tunnel.url)
    with pytest.raises(ConnectError, match=match):
        open_websocket("ws://gym-target.invalid:8000/ws", timeout=0.5)
    assert len(tunnel.requests) == 1


def test_unreachable_proxy_is_a_connect_error(proxy_env):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        proxy_env.setenv("http_proxy", f"http://127.0.0.1:{sock.getsockname()[1]}")
        with pytest.raises(ConnectError):
            open_websocket("ws://gym-target.invalid:8000/ws", timeout=5)


# ------------------------------------------------------------------------- TLS


def test_untrusted_certificate_is_a_connect_error(ws_server, tls, monkeypatch):
    port = port_of(ws_server(echo, ssl=tls))
    monkeypatch.delenv("SSL_CERT_FILE")  # the system's CAs do not know the test CA
    with pytest.raises(ConnectError) as info:
        open_websocket(f"wss://localhost:{port}/", timeout=5)
    assert isinstance(info.value.__cause__, ssl.SSLError)


def test_wrong_host_name_is_a_connect_error(ws_server, tls, proxy, proxy_env):
    # the certificate names localhost, 127.0.0.1 and gym-target.invalid: not this name
    tunnel = proxy()
    port = port_of(ws_server(echo, ssl=tls))
    proxy_env.setenv("https_proxy", tunnel.url)
    with pytest.raises(ConnectError) as info:
        open_websocket(f"wss://other-name.invalid:{port}/", timeout=5)
    assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)


# ------------------------------------------------------------------------ spinning waits
@pytest.mark.parametrize(
    ("raw", "cpus", "expected"),
    [
        ("", 2, 1e-3),  # the default
        ("0", 2, 0.0),  # off
        ("80", 4, 80e-6),
        (" 1e3 ", 2, 1e-3),
        ("1e9", 2, 0.01),  # capped: a wait that long should sleep
        ("250", 1, 0.0),  # one usable CPU: the server needs it, never spin
    ],
)
def test_spin_budget_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, cpus: int, expected: float
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert waiting._spin_budget(raw) == pytest.approx(expected)


@pytest.mark.parametrize(("raw", "expected"), [("fast", 1e-3), ("-1", 0.0), ("nan", 0.0)])
def test_a_bad_spin_budget_is_logged_not_raised(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str, expected: float
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    with caplog.at_level("WARNING", logger="openenv_gym.transport"):
        assert waiting._spin_budget(raw) == pytest.approx(expected)
    assert "OPENENV_GYM_SPIN_US" in caplog.text


def _spy_spins(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record every spin that ``wait_readable`` starts (the ``until`` it was given), and
    check that it spins no longer than the budget ``waiting.SPIN_S``."""
    spins: list[float] = []
    real = waiting._spin_readable

    def spy(sock: socket.socket, until: float) -> bool:
        # an upper bound on what the code asked for: a slow machine only makes it smaller
        assert until - time.perf_counter() <= waiting.SPIN_S, "a spin beyond the budget"
        spins.append(until)
        return real(sock, until)

    monkeypatch.setattr(waiting, "_spin_readable", spy)
    return spins


def test_a_quick_reply_is_awaited_by_spinning_and_still_arrives(
    ws_server, connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "SPIN_S", 0.005)
    ws = connect(ws_url(ws_server(echo), "/ws"))
    spins = _spy_spins(monkeypatch)
    for k in range(20):
        ws.send(f"m{k}", deadline_after(SOON))
        assert ws.receive(deadline_after(SOON)) == f"m{k}"
    assert spins, "a wait for a loopback echo never spun"


def test_waits_longer_than_the_budget_stop_spinning(
    ws_server, connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def slow_echo(ws: ServerConnection) -> None:
        async for message in ws:
            await asyncio.sleep(0.03)
            await ws.send(message)

    monkeypatch.setattr(waiting, "SPIN_S", 0.002)
    ws = connect(ws_url(ws_server(slow_echo), "/ws"))
    for k in range(4):  # each reply takes ~30 ms: the average climbs far above 2 ms
        ws.send(f"m{k}", deadline_after(SOON))
        assert ws.receive(deadline_after(SOON)) == f"m{k}"
    spins = _spy_spins(monkeypatch)
    ws.send("last", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "last"
    assert spins == []


def test_spinning_off_never_spins(ws_server, connect, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "SPIN_S", 0.0)
    ws = connect(ws_url(ws_server(echo), "/ws"))
    spins = _spy_spins(monkeypatch)
    ws.send("m", deadline_after(SOON))
    assert ws.receive(deadline_after(SOON)) == "m"
    assert spins == []


def test_a_spinning_wait_keeps_its_timeout(ws_server, connect, monkeypatch) -> None:
    async def silent(ws: ServerConnection) -> None:
        async for _ in ws:
            pass

    monkeypatch.setattr(waiting, "SPIN_S", 0.01)
    ws = connect(ws_url(ws_server(silent), "/ws"))
    ws.send("anyone?", deadline_after(SOON))
    spins = _spy_spins(monkeypatch)
    assert ws.wait_readable(0.05) is False  # nothing comes: spin, then sleep, then give up
    assert spins  # each within the budget (checked as it started)
    assert ws.wait_readable(0.0) is False
