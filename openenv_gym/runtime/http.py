"""The server's front door: HTTP/1.1 and WebSocket connections on asyncio, sans-I/O parsers.

Every TCP connection is an :class:`asyncio.Protocol` (:class:`_Connection`). A plain
request is parsed with h11 and answered by the app's :meth:`App.handle_http` (now, or
later: while an awaitable answer is pending the connection reads nothing more); a WebSocket
upgrade hands the bytes to websockets' sans-I/O ``ServerProtocol`` and the messages to the
:class:`Channel` the app opens for that path. No task or future per message: a frame is
parsed where it arrives (``data_received``), and a channel answers it or queues it.
Nothing here knows environments.

Everything that listens must survive hostile input, so every limit is checked before the
work it bounds (:class:`Limits`):

* connections: at most ``max_connections`` at once (503 beyond), each with
  ``handshake_timeout`` to send a complete request head (16 KiB at most) and
  ``idle_timeout`` between two WebSocket messages (pings do not count);
* sizes: request bodies up to ``max_body``, WebSocket messages up to ``max_frame``;
  the bytes received and not yet handled, per connection, up to ``max_queue_bytes``
  (reading pauses beyond), and the bytes written and not yet taken by the peer up to
  ``max_send_buffer`` (the connection stops handling requests beyond; a peer that takes
  nothing for ``send_timeout`` seconds is dropped);
* who: with a ``token``, every request needs ``Authorization: Bearer <token>`` (401
  otherwise, compared in constant time); a request carrying an ``Origin`` header (a web
  browser) is refused (403) unless that origin is in ``allowed_origins``. A refused
  request's body is never read.

A message is never a reason to fail the connection: a text message whose bytes are not
UTF-8 goes to the channel's :meth:`Channel.on_invalid_text` to be answered (RFC 6455
would fail the connection with 1007).

One cohesive concern, over 600 lines: the server's connection layer. Every limit is
checked next to the connection state it bounds, which is why they are not split apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import h11
from websockets.exceptions import InvalidState
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request as WsRequest
from websockets.http11 import Response as WsResponse
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from openenv_gym.protocol.frames import frame_head, parse_head

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - websockets built without its C extension
    from websockets.utils import apply_mask

__all__ = [
    "App",
    "Channel",
    "HttpRequest",
    "HttpResponse",
    "Limits",
    "Socket",
    "WebSocketServer",
    "json_response",
]

logger = logging.getLogger("openenv_gym.runtime")

_MAX_HEAD = 16 * 1024

MESSAGE_HEAD = 64 * 1024
"""WebSocket messages larger than this are read by the connection itself, as they arrive.

websockets' parser buffers a frame whole, then copies and unmasks it in one go; a data
frame over this size (unfragmented, uncompressed, within ``max_frame``) is instead
unmasked chunk by chunk as it is read, so no read costs more than its own bytes, and it
may be answered from its first ``MESSAGE_HEAD`` bytes (``Channel.on_message_head``)."""
_HOLD_BYTES = 256 * 1024
"""Replies held for the one write at the end of a read, at most (bytes); then written."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one server accepts (see the module docstring); None disables a timeout.

    Attributes:
        max_connections: Open connections at once, HTTP and WebSocket.
        handshake_timeout: Seconds for a connection to send a complete request head.
        idle_timeout: Seconds a WebSocket may stay without a message from the peer.
        max_frame: Largest WebSocket message, bytes.
        max_body: Largest HTTP request body, bytes.
        max_queue_bytes: Received bytes a connection may have waiting to be handled.
        max_send_buffer: Written bytes a connection may have waiting for the peer.
        send_timeout: Seconds a peer may leave the send buffer full before it is dropped.
        ping_interval: Seconds between two pings on an idle WebSocket (None: none).
        ping_timeout: Seconds to wait for the pong.
        token: The bearer token every request must carry, or None.
        allowed_origins: ``Origin`` values accepted (browsers send one; others do not).
        server_name: The ``Server`` header.
        compression: Accept permessage-deflate when a client offers it (``max_frame``
            bounds the inflated size).
    """

    max_connections: int = 8192
    handshake_timeout: float | None = 10.0
    idle_timeout: float | None = 900.0
    max_frame: int = 16 * 2**20
    max_body: int = 2**20
    max_queue_bytes: int = 16 * 2**20
    max_send_buffer: int = 16 * 2**20
    send_timeout: float | None = 60.0
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    token: str | None = None
    allowed_origins: tuple[str, ...] = ()
    server_name: str = "openenv-gym"
    compression: bool = False


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One request, its body read.

    Attributes:
        method: ``GET``, ``POST``...
        path: The path, without the query.
        query: The query parameters (last value wins).
        headers: Lower-case name -> value (the last one of a repeated header).
        body: The body.
    """

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""

    @property
    def wants_websocket(self) -> bool:
        """Whether it asks for a WebSocket upgrade."""
        return self.headers.get("upgrade", "").lower() == "websocket"


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """One response.

    Attributes:
        status: The status code.
        body: The body bytes.
        content_type: The ``Content-Type``.
        headers: Other headers.
    """

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def json_response(
    status: int, payload: Any, headers: Sequence[tuple[str, str]] = ()
) -> HttpResponse:
    """A JSON response (compact, UTF-8); ``payload`` may already be serialised text."""
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return HttpResponse(status, text.encode(), "application/json", tuple(headers))


def _detail(status: int, text: str, headers: Sequence[tuple[str, str]] = ()) -> HttpResponse:
    return json_response(status, {"detail": text}, headers)


class Socket(Protocol):
    """What a :class:`Channel` may do with its WebSocket."""

    def send(self, message: bytes | str) -> None:
        """Queue a message (bytes: binary, str: text) and write it."""

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Start the closing handshake; the channel's ``on_close`` follows."""

    @property
    def writable(self) -> bool:
        """Whether the peer takes what is written (False: the send buffer is full)."""

    def wait_writable(self) -> Awaitable[None]:
        """Wait until :attr:`writable` (or the connection is gone)."""

    def pause_reading(self) -> None:
        """Stop taking messages until :meth:`resume_reading` (backpressure)."""

    def resume_reading(self) -> None:
        """Take messages again."""


class Channel(Protocol):
    """One WebSocket's messages, handled by the app.

    A channel may also have ``on_message_head(head: bytes, size: int) -> bool``: called
    when the first :data:`MESSAGE_HEAD` bytes of a binary message of ``size`` bytes
    (larger than that) have arrived. True means the channel has answered the message from
    them: the rest of it is read and dropped as it arrives (never buffered, never
    unmasked) and ``on_message`` is not called for it.
    """

    def on_message(self, message: bytes | str) -> None:
        """A whole message arrived (bytes: binary frame, str: text frame)."""

    def on_invalid_text(self, data: bytes) -> None:
        """A text message arrived whose bytes are not UTF-8 (answer it; the socket stays)."""

    def on_close(self) -> None:
        """The connection is gone; free what it held. Called once."""


class App(Protocol):
    """What the front door serves."""

    def handle_http(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        """Answer a plain request: now, or an awaitable (the connection waits for it)."""

    def open_channel(
        self, request: HttpRequest, offered: Sequence[str]
    ) -> tuple[Callable[[Socket], Channel], str | None] | HttpResponse:
        """For an upgrade: a channel factory and the subprotocol chosen, or a refusal."""


# --------------------------------------------------------------------------- server


class WebSocketServer:
    """Listens and serves ``app`` over HTTP/1.1 and WebSocket. Create, then :meth:`start`.

    Args:
        app: What to serve.
        limits: The limits (:class:`Limits`).
    """

    def __init__(self, app: App, limits: Limits) -> None:
        self.app = app
        self.limits = limits
        self.connections: set[_Connection] = set()
        self.token_digest = hashlib.sha256((limits.token or "").encode("latin-1")).digest()
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        """Bind and listen."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), host, port, reuse_address=True, backlog=1024
        )

    @property
    def sockets(self) -> list[Any]:
        """The listening sockets."""
        return list(self._server.sockets) if self._server is not None else []

    async def serve_forever(self) -> None:
        """Serve until cancelled."""
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop listening, close every connection (going away) and wait for them."""
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.shutdown()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        deadline = time.monotonic() + 5.0
        while self.connections and time.monotonic() < deadline:  # noqa: ASYNC110 (a poll with a deadline)
            await asyncio.sleep(0.01)
        for connection in list(self.connections):
            connection.abort()


# ----------------------------------------------------------------------- connections


class _Connection(asyncio.Protocol):
    """One TCP connection: HTTP requests, then maybe a WebSocket (see the module docstring)."""

    def __init__(self, server: WebSocketServer) -> None:
        self.server = server
        self.limits = server.limits
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()  # HTTP: bytes not yet parsed
        self._ws: ServerProtocol | None = None
        self._channel: Channel | None = None
        self._fragments: list[bytes] = []
        self._fragment_text = False
        # the receive path splits the peer's bytes at frame boundaries (see _ws_data)
        self._rx_cut = b""  # the start of a frame header, cut by the end of a read
        self._rx_pass = 0  # bytes of the current frame still to give websockets' parser
        self._rx_fragmented = False  # a fragmented message is under way
        self._rx_message: _LargeMessage | None = None  # a large message read here
        self._timer: asyncio.TimerHandle | None = None
        self._seen = 0.0  # loop time of the last WebSocket message (see _idle_expired)
        self._ping_timer: asyncio.TimerHandle | None = None
        self._ping_waiter: bytes | None = None
        self._writable = True
        self._writable_event: asyncio.Event | None = None
        self._stalled_since: float | None = None
        self._reading_paused_by: set[str] = set()
        self._closed = False
        self._queued = 0  # bytes received and not handled (WebSocket)
        self._holding = False  # handling received frames: replies wait for one write
        self._held = 0  # bytes of messages queued while holding
        self._out: list[bytes] = []  # frames serialised here, to write before the protocol's
        self._answering: asyncio.Task[None] | None = None  # an HTTP answer being awaited

    # ------------------------------------------------------------------ asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's does not subclass asyncio.Transport: no isinstance)
        self.transport = cast(asyncio.Transport, transport)
        limits = self.limits
        self.transport.set_write_buffer_limits(high=limits.max_send_buffer)
        if len(self.server.connections) >= limits.max_connections:
            self._reply_and_close(_detail(503, "too many connections"))
            return
        self.server.connections.add(self)
        self._arm(limits.handshake_timeout, self._handshake_expired)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        if self._ws is None:
            self._http_data(data)
        else:
            self._ws_data(data)

    def eof_received(self) -> bool | None:
        if self._ws is not None:
            self._ws.receive_eof()
            self._flush_ws()
        self._finish()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def pause_writing(self) -> None:
        self._writable = False
        self._stalled_since = time.monotonic()
        self.pause_reading("writing")
        if self.limits.send_timeout is not None:
            self.loop.call_later(self.limits.send_timeout, self._check_stalled)

    def resume_writing(self) -> None:
        self._writable = True
        self._stalled_since = None
        if self._writable_event is not None:
            self._writable_event.set()
        self.resume_reading("writing")

    # ------------------------------------------------------------------ helpers
    def _arm(self, seconds: float | None, callback: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None if seconds is None else self.loop.call_later(seconds, callback)

    def _handshake_expired(self) -> None:
        logger.debug("connection dropped: no complete request within the handshake timeout")
        self.abort()

    def _check_stalled(self) -> None:
        timeout = self.limits.send_timeout
        since = self._stalled_since
        if since is not None and timeout is not None and time.monotonic() - since >= timeout * 0.99:
            logger.info("connection dropped: the peer took nothing for %s s", timeout)
            self.abort()

    def pause_reading(self, why: str) -> None:
        if not self._reading_paused_by and self.transport is not None and not self._closed:
            with contextlib.suppress(RuntimeError):
                self.transport.pause_reading()
        self._reading_paused_by.add(why)

    def resume_reading(self, why: str) -> None:
        self._reading_paused_by.discard(why)
        if not self._reading_paused_by and self.transport is not None and not self._closed:
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self._closed:
            self.transport.write(data)

    def abort(self) -> None:
        """Drop the connection now."""
        if self.transport is not None:
            self.transport.abort()
        self._finish()

    def shutdown(self) -> None:
        """Server closing: WebSockets get a ``1001 going away``, the rest is dropped."""
        if self._ws is not None and self._channel is not None and not self._closed:
            self.close_ws(CloseCode.GOING_AWAY, "server shutting down")
            self.loop.call_later(2.0, self.abort)
        else:
            self.abort()

    def _finish(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._rx_message = None  # what was read of a large message goes now
        for timer in (self._timer, self._ping_timer):
            if timer is not None:
                timer.cancel()
        self.server.connections.discard(self)
        if self._writable_event is not None:
            self._writable_event.set()
        if self._answering is not None:
            self._answering.cancel()
        channel, self._channel = self._channel, None
        if channel is not None:
            try:
                channel.on_close()
            except Exception:
                logger.exception("closing a channel failed")
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ HTTP
    def _http_data(self, data: bytes) -> None:
        self._buffer += data
        while not self._closed and self._ws is None and self._answering is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD:
                    self._reply_and_close(_detail(431, "request head too large"))
                return
            if end + 4 > _MAX_HEAD:
                self._reply_and_close(_detail(431, "request head too large"))
                return
            if not self._http_request(end + 4):
                return

    def _http_request(self, head_end: int) -> bool:
        """Handle the request whose head ends at ``head_end``; False: wait for more bytes."""
        parser = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        parser.receive_data(bytes(self._buffer))
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError as exc:
            self._reply_and_close(_detail(400, f"malformed request: {exc}"))
            return False
        assert isinstance(event, h11.Request)
        request = _request_of(event)
        problem = self._refusal(request)
        if request.wants_websocket and problem is None:
            self._upgrade(request, head_end)
            return False
        length = _content_length(event)
        if problem is not None and length != 0:
            self._reply_and_close(problem)  # refused: its body is never read
            return False
        if length is None:
            self._reply_and_close(_detail(411, "a request body needs a Content-Length"))
            return False
        if length > self.limits.max_body:
            self._reply_and_close(_detail(413, f"request body over {self.limits.max_body} bytes"))
            return False
        if len(self._buffer) < head_end + length:
            return False  # the body is still coming
        body = bytes(self._buffer[head_end : head_end + length])
        del self._buffer[: head_end + length]
        request = HttpRequest(request.method, request.path, request.query, request.headers, body)
        response = problem or self._route(request)
        if not isinstance(response, HttpResponse):
            self._await_answer(request, response, _keep_alive(event))
            return False
        return self._respond(response, _keep_alive(event))

    def _respond(self, response: HttpResponse, keep_alive: bool) -> bool:
        """Write the response; False if the connection closes after it."""
        keep_alive = keep_alive and response.status < 500
        self._write(_response_bytes(response, self.limits.server_name, keep_alive))
        if not keep_alive:
            self._close_after_writing()
            return False
        self._arm(self.limits.handshake_timeout, self._handshake_expired)
        return True

    def _route(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        try:
            return self.server.app.handle_http(request)
        except Exception:
            logger.exception("answering %s %s failed", request.method, request.path)
            return _detail(500, "internal error")

    def _await_answer(
        self, request: HttpRequest, pending: Awaitable[HttpResponse], keep_alive: bool
    ) -> None:
        """The app answers later: read nothing more (no timeout) until it has."""
        self._arm(None, self._handshake_expired)
        self.pause_reading("answering")
        self._answering = self.loop.create_task(self._answer_later(request, pending, keep_alive))

    async def _answer_later(
        self, request: HttpRequest, pending: Awaitable[HttpResponse], keep_alive: bool
    ) -> None:
        try:
            response = await pending
        except Exception:
            logger.exception("answering %s %s failed", request.method, request.path)
            response = _detail(500, "internal error")
        self._answering = None
        if self._closed or not self._respond(response, keep_alive):
            return
        self.resume_reading("answering")
        self._http_data(b"")  # a request that came in the meantime

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        """Why this request is refused before any work (auth, origin), or None."""
        limits = self.limits
        if limits.token is not None:
            scheme, _, value = request.headers.get("authorization", "").strip().partition(" ")
            # compare digests, of equal length: the time taken tells nothing of the token
            given = hashlib.sha256(value.strip().encode("latin-1")).digest()
            matches = hmac.compare_digest(given, self.server.token_digest)
            if not matches or scheme.lower() != "bearer":
                return _detail(401, "missing or wrong token", (("WWW-Authenticate", "Bearer"),))
        origin = request.headers.get("origin")
        if origin is not None and origin not in limits.allowed_origins:
            return _detail(403, f"origin {origin[:100]!r} is not allowed")
        return None

    def _reply_and_close(self, response: HttpResponse) -> None:
        self._write(_response_bytes(response, self.limits.server_name, keep_alive=False))
        self._close_after_writing()

    def _close_after_writing(self) -> None:
        if self.transport is not None:
            self.transport.close()  # flushes what is buffered first
        self._finish()

    # ------------------------------------------------------------------ upgrade
    def _upgrade(self, request: HttpRequest, head_end: int) -> None:
        offered = [
            s.strip()
            for value in request.headers.get("sec-websocket-protocol", "").split(",")
            if (s := value.strip())
        ]
        opened = self.server.app.open_channel(request, offered)
        if isinstance(opened, HttpResponse):
            self._reply_and_close(opened)
            return
        make_channel, chosen = opened
        protocol = ServerProtocol(
            subprotocols=[Subprotocol(chosen)] if chosen else None,
            select_subprotocol=(lambda _p, _offered: Subprotocol(chosen)) if chosen else None,
            max_size=self.limits.max_frame,
            extensions=[ServerPerMessageDeflateFactory()] if self.limits.compression else None,
        )
        self._ws = protocol
        # the head only: frames sent right behind it go through _ws_data once open
        head, rest = bytes(self._buffer[:head_end]), bytes(self._buffer[head_end:])
        self._buffer = bytearray()
        protocol.receive_data(head)
        events = protocol.events_received()
        if not events or not isinstance(events[0], WsRequest):  # cannot happen: h11 read it
            self.abort()
            return
        response = protocol.accept(events[0])
        if isinstance(response, WsResponse):
            response.headers["Server"] = self.limits.server_name
        protocol.send_response(response)
        if response.status_code != 101:
            self._flush_ws()
            self._close_after_writing()
            return
        self._seen = self.loop.time()
        self._arm(self.limits.idle_timeout, self._idle_expired)
        self._schedule_ping()
        self._channel = make_channel(_Socket(self))
        self._flush_ws()
        if rest and not self._closed:
            self._ws_data(rest)

    # ------------------------------------------------------------------ WebSocket
    def _ws_data(self, data: bytes) -> None:
        """Give websockets' parser the peer's bytes, except large data frames (read here).

        The bytes are split at frame boundaries; frames before a large one are handled
        before it, so messages keep their order. See :data:`MESSAGE_HEAD`.
        """
        if self._rx_message is None:
            if self._rx_pass >= len(data):  # inside a frame
                self._rx_pass -= len(data)
                self._ws_frames(data)
                return
            if not self._rx_pass and not self._rx_cut:
                start = _whole_data_frame(data)
                if start and self._parser_idle():  # a batched request: one data frame
                    self._ws_message(data, start)
                    return
                # the usual read: one whole small masked frame (a JSON client's request
                # comes behind its ping: two)
                fragmented = _small_frames(data, self._rx_fragmented)
                if fragmented is not None:
                    self._rx_fragmented = fragmented
                    self._ws_frames(data)
                    return
        if self._rx_cut:
            data, self._rx_cut = self._rx_cut + data, b""
        view = memoryview(data)
        end = len(data)
        pos = run = 0  # bytes from `run` to `pos` are websockets', not given yet
        while pos < end:
            message = self._rx_message
            if message is not None:
                n = min(message.left, end - pos)
                message.take(view[pos : pos + n])
                pos = run = pos + n
                if not message.asked and message.got >= MESSAGE_HEAD:
                    self._offer_head(message)
                if message.left == 0:
                    self._rx_message = None
                    self._end_message(message)
                if self._closed:
                    return
                continue
            if self._rx_pass:
                n = min(self._rx_pass, end - pos)
                self._rx_pass -= n
                pos += n
                continue
            header = _frame_header(view, pos)
            if header is None:  # cut by the end of this read: wait for the rest
                self._rx_cut = bytes(view[pos:])
                end = pos
                break
            first, length, size, mask = header
            opcode = first & 0x0F
            if (
                first & 0xF0 == 0x80  # final, no extension bits (not compressed)
                and opcode in (Opcode.TEXT.value, Opcode.BINARY.value)
                and mask
                and MESSAGE_HEAD < length <= self.limits.max_frame
                and not self._rx_fragmented
            ):
                if run < pos:  # what came before first, and the protocol's state is current
                    self._ws_frames(bytes(view[run:pos]) if run or pos < len(data) else data)
                    run = pos
                protocol = self._ws
                if self._closed or protocol is None:
                    return
                if protocol.state is State.OPEN and self._channel is not None:
                    text = opcode == Opcode.TEXT.value
                    self._rx_message = _LargeMessage(length, mask, text)
                    pos = run = pos + size
                    continue
            if opcode in (Opcode.TEXT.value, Opcode.BINARY.value):
                self._rx_fragmented = not first & 0x80
            elif opcode == Opcode.CONT.value and first & 0x80:
                self._rx_fragmented = False
            self._rx_pass = length
            pos += size
        if run < end:
            self._ws_frames(bytes(view[run:end]) if run or end < len(data) else data)

    def _offer_head(self, message: _LargeMessage) -> None:
        """The message's first bytes have arrived: may the channel answer from them?"""
        message.asked = True
        hook = getattr(self._channel, "on_message_head", None)
        if hook is None:
            return
        try:
            answered = hook(bytes(message.buf[:MESSAGE_HEAD]), message.size)
        except Exception:
            logger.exception("a channel failed on a message's first bytes")
            self.close_ws(CloseCode.INTERNAL_ERROR, "internal error")
            return
        if answered:
            message.drop()
            self._seen = self.loop.time()
            logger.debug(
                "message of %d bytes answered from its first %d bytes, %.3f ms after its "
                "first bytes were read; dropping the rest",
                message.size,
                message.got,
                (time.perf_counter() - message.started) * 1e3,
            )

    def _end_message(self, message: _LargeMessage) -> None:
        """A large message is read: deliver it, unless it was answered from its head."""
        if message.dropping:
            logger.debug(
                "dropped the rest of a message of %d bytes, %.3f ms after its first bytes",
                message.size,
                (time.perf_counter() - message.started) * 1e3,
            )
            return
        data = bytes(message.buf)
        message.buf = bytearray()
        if message.text:  # decoded here, so that its bytes are gone while it is handled
            try:
                decoded = data.decode()
            except UnicodeDecodeError:
                pass
            else:
                del data
                self._deliver(decoded, True)
                self._flush_ws()
                return
        self._deliver(data, message.text)
        self._flush_ws()

    def _parser_idle(self) -> bool:
        """Whether a data frame may skip websockets' parser: open, plain, no message under way.

        Then the frame changes nothing in the protocol's state (websockets keeps none for
        a final data frame), so handling it here is handling it there.
        """
        protocol = self._ws
        return (
            protocol is not None
            and protocol.state is State.OPEN
            and not protocol.extensions
            and not self._rx_fragmented
            and len(self._fragments) == 0
        )

    def _ws_message(self, frame: bytes, start: int) -> None:
        """One whole data frame, its payload at ``start`` (:func:`_whole_data_frame`)."""
        if len(frame) - start > self.limits.max_frame:
            self._ws_frames(frame)  # websockets refuses it (1009)
            return
        payload = apply_mask(frame[start:], frame[start - 4 : start])
        self._hold(self._deliver, payload, frame[0] == _WHOLE_TEXT)

    def _ws_frames(self, data: bytes) -> None:
        """Feed websockets' parser; handle the frames it completes."""
        protocol = self._ws
        assert protocol is not None
        protocol.receive_data(data)
        self._hold(self._handle_frames, protocol.events_received())

    def _hold(self, handle: Callable[..., None], *args: Any) -> None:
        """``handle(*args)``, then one write of what it produced.

        What the frames of one read produce (pongs, replies) leaves in one write: one
        syscall and one TCP segment, not one per frame (see send_ws).
        """
        self._holding = True
        try:
            handle(*args)
        finally:
            self._holding = False
            self._held = 0
        self._flush_ws()

    def _handle_frames(self, events: list[Any]) -> None:
        for frame in events:
            if not isinstance(frame, Frame):
                continue
            opcode = frame.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
                if frame.fin:
                    self._deliver(bytes(frame.data), opcode is Opcode.TEXT)
                else:
                    self._fragments = [bytes(frame.data)]
                    self._fragment_text = opcode is Opcode.TEXT
            elif opcode is Opcode.CONT:
                self._fragments.append(bytes(frame.data))
                if frame.fin:
                    whole, self._fragments = b"".join(self._fragments), []
                    self._deliver(whole, self._fragment_text)
            elif (
                opcode is Opcode.PONG
                and self._ping_waiter is not None
                and bytes(frame.data) == self._ping_waiter
            ):
                self._ping_waiter = None
            if self._closed:
                return
        if self._ws is not None and self._ws.close_expected():
            self._flush_ws()

    def _deliver(self, data: bytes | str, text: bool) -> None:
        """Hand a whole message to the channel (``data`` may be text already decoded)."""
        self._seen = self.loop.time()  # the idle timer is not re-armed per message
        channel = self._channel
        if channel is None:
            return
        try:
            if not text or isinstance(data, str):
                channel.on_message(data)
                return
            try:
                message = data.decode()
            except UnicodeDecodeError:
                channel.on_invalid_text(data)  # RFC 6455 fails the connection; we answer
                return
            channel.on_message(message)
        except Exception:
            logger.exception("a channel failed on a message")
            self.close_ws(CloseCode.INTERNAL_ERROR, "internal error")

    def _flush_ws(self) -> None:
        """Write what is queued (here, then by the protocol), in one write."""
        protocol = self._ws
        if protocol is None:
            return
        chunks = protocol.data_to_send()
        if self._out:
            chunks, self._out = self._out + chunks, []
        if not chunks:
            return
        if len(chunks) == 1 and chunks[0]:
            self._write(chunks[0])
            return
        out: list[bytes] = []
        for data in chunks:
            if data:
                out.append(data)
                continue
            if out:  # then the protocol asks to close the TCP connection
                self._write_joined(out)
            if self.transport is not None:
                self.transport.close()
                self._finish()
            return
        self._write_joined(out)

    def _write_joined(self, chunks: list[bytes]) -> None:
        """The small chunks in one write; a large one on its own, never copied into a join.

        A large reply held once more in a joined copy is what a peer that never reads
        makes the server hold (``docs/security.md``).
        """
        small: list[bytes] = []
        for data in chunks:
            if len(data) < _HOLD_BYTES:
                small.append(data)
                continue
            if small:
                self._write(small[0] if len(small) == 1 else b"".join(small))
                small = []
            self._write(data)
        if small:
            self._write(small[0] if len(small) == 1 else b"".join(small))

    def send_ws(self, message: bytes | str) -> None:
        protocol = self._ws
        if protocol is None or self._closed:
            return
        text = isinstance(message, str)
        data = message.encode() if isinstance(message, str) else message
        if (
            protocol.state is State.OPEN
            and not protocol.extensions
            and not protocol.expect_continuation_frame
        ):
            # framed here (RFC 6455 5.2, unmasked): websockets' Frame and BytesIO cost
            # about as much as encoding a small reply. The protocol keeps no state of the
            # data frames it sends; what it queued (a pong) goes first, in order.
            out = self._out
            out += protocol.data_to_send()
            out.append(frame_head(0x1 if text else 0x2, len(data)))
            out.append(data)
        else:
            try:
                if text:
                    protocol.send_text(data)
                else:
                    protocol.send_binary(data)
            except InvalidState:  # closing
                return
        if self._holding:  # written with the rest of this read's output, unless it grows
            self._held += len(message)
            if self._held < _HOLD_BYTES:
                return
            self._held = 0
        self._flush_ws()

    def close_ws(self, code: int, reason: str) -> None:
        protocol = self._ws
        if protocol is None or self._closed:
            return
        with contextlib.suppress(InvalidState):
            protocol.send_close(code, reason)
        self._flush_ws()
        self.loop.call_later(5.0, self.abort)  # the peer has this long to answer

    def _idle_expired(self) -> None:
        timeout = self.limits.idle_timeout
        assert timeout is not None
        left = self._seen + timeout - self.loop.time()
        if left > 0:  # a message came since the timer was armed: wait for the rest
            self._arm(left, self._idle_expired)
            return
        logger.info("WebSocket closed: idle for %s s", self.limits.idle_timeout)
        self.close_ws(CloseCode.GOING_AWAY, "idle timeout")

    def _schedule_ping(self) -> None:
        interval = self.limits.ping_interval
        if interval is not None:
            self._ping_timer = self.loop.call_later(interval, self._ping)

    def _ping(self) -> None:
        protocol = self._ws
        if protocol is None or self._closed:
            return
        if self._ping_waiter is not None:
            return  # the previous one is still unanswered: its timeout decides
        self._ping_waiter = os.urandom(4)
        with contextlib.suppress(InvalidState):
            protocol.send_ping(self._ping_waiter)
        self._flush_ws()
        timeout = self.limits.ping_timeout
        if timeout is not None:
            waiter = self._ping_waiter
            self.loop.call_later(timeout, self._pong_expired, waiter)
        self._schedule_ping()

    def _pong_expired(self, waiter: bytes) -> None:
        if self._ping_waiter is waiter and not self._closed:
            logger.info("WebSocket dropped: no pong within %s s", self.limits.ping_timeout)
            self.abort()

    async def wait_writable(self) -> None:
        while not self._writable and not self._closed:
            if self._writable_event is None:
                self._writable_event = asyncio.Event()
            self._writable_event.clear()
            await self._writable_event.wait()


class _Socket:
    """The :class:`Socket` a channel gets: a thin view of its connection."""

    __slots__ = ("_connection",)

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    def send(self, message: bytes | str) -> None:
        self._connection.send_ws(message)

    def close(self, code: int = 1000, reason: str = "") -> None:
        self._connection.close_ws(code, reason)

    @property
    def writable(self) -> bool:
        connection = self._connection
        return connection._writable and not connection._closed

    @property
    def closed(self) -> bool:
        return self._connection._closed

    def wait_writable(self) -> Awaitable[None]:
        return self._connection.wait_writable()

    def pause_reading(self) -> None:
        self._connection.pause_reading("channel")

    def resume_reading(self) -> None:
        self._connection.resume_reading("channel")


class _LargeMessage:
    """A data frame over :data:`MESSAGE_HEAD` bytes, read by the connection itself."""

    __slots__ = ("asked", "buf", "dropping", "got", "left", "mask", "size", "started", "text")

    def __init__(self, size: int, mask: bytes, text: bool) -> None:
        self.size = self.left = size
        self.mask = mask
        self.text = text
        self.got = 0  # payload bytes kept
        # the unmasked payload so far, in one buffer: a list of chunks would cost ~40 bytes
        # of object per read, and a peer that trickles its bytes makes reads tiny
        self.buf = bytearray()
        self.asked = text  # only binary messages are offered to on_message_head
        self.dropping = False
        self.started = time.perf_counter()

    def take(self, chunk: memoryview) -> None:
        """The next bytes of the payload: unmasked and kept, or dropped."""
        self.left -= len(chunk)
        if self.dropping:
            return
        k = self.got % 4
        self.buf += apply_mask(chunk, self.mask[k:] + self.mask[:k])
        self.got += len(chunk)

    def drop(self) -> None:
        """Keep nothing more (the message was answered from its head)."""
        self.dropping = True
        self.buf = bytearray()


_WHOLE_TEXT = 0x80 | Opcode.TEXT.value  # final, no extension bits
_WHOLE_DATA = (_WHOLE_TEXT, 0x80 | Opcode.BINARY.value)


def _whole_data_frame(data: bytes) -> int:
    """Where the payload starts if ``data`` is exactly one frame, else 0.

    The frame: final, text or binary, no extension bits, masked, at most 65,535 bytes.
    """
    if len(data) < 6 or data[0] not in _WHOLE_DATA or not data[1] & 0x80:
        return 0
    head = parse_head(data, 0)
    if head is None:
        return 0
    _, length, size = head
    return size if size <= 8 and size + length == len(data) else 0


def _small_frames(data: bytes, fragmented: bool) -> bool | None:
    """Whether a fragmented message is open after ``data`` (``fragmented``: before it).

    None unless ``data`` is whole masked frames of at most 65,535 bytes of payload each.
    """
    pos, end = 0, len(data)
    while pos < end:
        head = parse_head(data, pos)
        if head is None or not data[pos + 1] & 0x80:
            return None
        first, length, size = head
        if size > 8:  # a 64-bit length
            return None
        pos += size + length
        opcode = first & 0x0F
        if opcode in (0x1, 0x2):  # text, binary: a fragmented message opens unless final
            fragmented = not first & 0x80
        elif opcode == 0x0 and first & 0x80:  # a final continuation frame
            fragmented = False
    return fragmented if pos == end else None


def _frame_header(data: memoryview, pos: int) -> tuple[int, int, int, bytes] | None:
    """The frame at ``pos``: (first byte, payload length, header length, mask); None if cut.

    The mask is ``b""`` for an unmasked frame (which websockets' parser refuses).
    """
    head = parse_head(data, pos)
    if head is None:
        return None
    first, length, size = head
    mask = bytes(data[pos + size - 4 : pos + size]) if data[pos + 1] & 0x80 else b""
    return first, length, size, mask


# ----------------------------------------------------------------------------- HTTP


def _request_of(event: h11.Request) -> HttpRequest:
    target = event.target.decode("latin-1")
    path, _, query = target.partition("?")
    headers = {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers
    }
    return HttpRequest(
        event.method.decode("ascii", "replace"),
        urllib.parse.unquote(path),
        dict(urllib.parse.parse_qsl(query)),
        headers,
    )


def _content_length(event: h11.Request) -> int | None:
    """The body's length: 0 without a body, None when chunked (not accepted here)."""
    length = 0
    for name, value in event.headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            return None
        if lowered == b"content-length":
            length = int(value)
    return length


def _keep_alive(event: h11.Request) -> bool:
    for name, value in event.headers:
        if name.lower() == b"connection" and b"close" in value.lower():
            return False
    return event.http_version == b"1.1"


_REASONS = {
    101: "Switching Protocols",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    422: "Unprocessable Content",
    426: "Upgrade Required",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _response_bytes(response: HttpResponse, server: str, keep_alive: bool) -> bytes:
    reason = _REASONS.get(response.status, "")
    lines = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Server: {server}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    lines += [f"{name}: {value}" for name, value in response.headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body
