"""The server's front door: HTTP/1.1 and WebSocket connections on asyncio, sans-I/O parsers.

Every TCP connection is an :class:`asyncio.Protocol` (:class:`Connection`). A plain
request is parsed with h11 and answered by the app's :meth:`App.handle_http` (now, or
later: while an awaitable answer is pending the connection reads nothing more); a WebSocket
upgrade hands the connection to a :class:`~openenv_gym.runtime.websocket.WebSocketStream`,
which gives websockets' sans-I/O ``ServerProtocol`` the bytes and the messages to the
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

The interfaces (:class:`Limits`, :class:`HttpRequest`, :class:`HttpResponse`,
:class:`App`, :class:`Channel`, :class:`Socket`) are :mod:`openenv_gym.runtime.interfaces`',
importable from here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import time
import urllib.parse
from collections.abc import Awaitable
from typing import Any, cast

import h11

from openenv_gym.runtime.interfaces import (
    MESSAGE_HEAD,
    App,
    Channel,
    HttpRequest,
    HttpResponse,
    Limits,
    Socket,
    detail,
    json_response,
)
from openenv_gym.runtime.websocket import KEEPALIVE_HEADER, WebSocketStream

__all__ = [
    "MESSAGE_HEAD",
    "App",
    "Channel",
    "Connection",
    "HttpRequest",
    "HttpResponse",
    "Limits",
    "Socket",
    "WebSocketServer",
    "json_response",
]

logger = logging.getLogger("openenv_gym.runtime")

_MAX_HEAD = 16 * 1024


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
        self.connections: set[Connection] = set()
        self.token_digest = hashlib.sha256((limits.token or "").encode("latin-1")).digest()
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        """Bind and listen."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self), host, port, reuse_address=True, backlog=1024
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


class Connection(asyncio.Protocol):
    """One TCP connection: HTTP requests, then maybe a WebSocket (see the module docstring).

    Attributes:
        closed: The connection is gone (or going): nothing more is read or written.
        writable: The peer takes what is written (False: the send buffer is full).
    """

    def __init__(self, server: WebSocketServer) -> None:
        self.server = server
        self.limits = server.limits
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.writable = True
        self._buffer = bytearray()  # HTTP: bytes not yet parsed
        self._ws: WebSocketStream | None = None
        self._timer: asyncio.TimerHandle | None = None  # the handshake timeout
        self._writable_event: asyncio.Event | None = None
        self._stalled_since: float | None = None
        self._reading_paused_by: set[str] = set()
        self._answering: asyncio.Task[None] | None = None  # an HTTP answer being awaited

    # ------------------------------------------------------------------ asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """asyncio: accepted (503 at once beyond ``max_connections``)."""
        # a stream transport (uvloop's does not subclass asyncio.Transport: no isinstance)
        self.transport = cast(asyncio.Transport, transport)
        limits = self.limits
        self.transport.set_write_buffer_limits(high=limits.max_send_buffer)
        if len(self.server.connections) >= limits.max_connections:
            self._reply_and_close(detail(503, "too many connections"))
            return
        self.server.connections.add(self)
        self._arm(limits.handshake_timeout)

    def data_received(self, data: bytes) -> None:
        """asyncio: bytes from the peer, to HTTP or to the WebSocket stream."""
        if self.closed:
            return
        if self._ws is None:
            self._http_data(data)
        else:
            self._ws.receive(data)

    def eof_received(self) -> bool | None:
        """asyncio: the peer closed its side."""
        if self._ws is not None:
            self._ws.receive_eof()
        self._finish()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        """asyncio: the connection is gone."""
        self._finish()

    def pause_writing(self) -> None:
        """asyncio: the send buffer is full: read nothing more, drop a peer stuck for long."""
        self.writable = False
        self._stalled_since = time.monotonic()
        self.pause_reading("writing")
        if self.limits.send_timeout is not None:
            self.loop.call_later(self.limits.send_timeout, self._check_stalled)

    def resume_writing(self) -> None:
        """asyncio: the send buffer drained."""
        self.writable = True
        self._stalled_since = None
        if self._writable_event is not None:
            self._writable_event.set()
        self.resume_reading("writing")

    # ------------------------------------------------------------------ helpers
    def _arm(self, seconds: float | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = (
            None if seconds is None else self.loop.call_later(seconds, self._handshake_expired)
        )

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
        """Stop reading until every ``why`` that paused it resumes it."""
        if not self._reading_paused_by and self.transport is not None and not self.closed:
            with contextlib.suppress(RuntimeError):
                self.transport.pause_reading()
        self._reading_paused_by.add(why)

    def resume_reading(self, why: str) -> None:
        """Read again, unless another reason still holds it."""
        self._reading_paused_by.discard(why)
        if not self._reading_paused_by and self.transport is not None and not self.closed:
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()

    def write(self, data: bytes) -> None:
        """Write ``data`` (nothing once closed)."""
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    async def wait_writable(self) -> None:
        """Wait until :attr:`writable` (or the connection is gone)."""
        while not self.writable and not self.closed:
            if self._writable_event is None:
                self._writable_event = asyncio.Event()
            self._writable_event.clear()
            await self._writable_event.wait()

    def abort(self) -> None:
        """Drop the connection now."""
        if self.transport is not None:
            self.transport.abort()
        self._finish()

    def shutdown(self) -> None:
        """Server closing: WebSockets get a ``1001 going away``, the rest is dropped."""
        if self._ws is not None and not self.closed and self._ws.shutdown():
            self.loop.call_later(2.0, self.abort)
        else:
            self.abort()

    def close_after_writing(self) -> None:
        """Close once what is written has gone."""
        if self.transport is not None:
            self.transport.close()  # flushes what is buffered first
        self._finish()

    def _finish(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        self.server.connections.discard(self)
        if self._writable_event is not None:
            self._writable_event.set()
        if self._answering is not None:
            self._answering.cancel()
        if self._ws is not None:
            self._ws.finish()
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ HTTP
    def _http_data(self, data: bytes) -> None:
        self._buffer += data
        while not self.closed and self._ws is None and self._answering is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD:
                    self._reply_and_close(detail(431, "request head too large"))
                return
            if end + 4 > _MAX_HEAD:
                self._reply_and_close(detail(431, "request head too large"))
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
            self._reply_and_close(detail(400, f"malformed request: {exc}"))
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
            self._reply_and_close(detail(411, "a request body needs a Content-Length"))
            return False
        if length > self.limits.max_body:
            self._reply_and_close(detail(413, f"request body over {self.limits.max_body} bytes"))
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
        self.write(_response_bytes(response, self.limits.server_name, keep_alive))
        if not keep_alive:
            self.close_after_writing()
            return False
        self._arm(self.limits.handshake_timeout)
        return True

    def _route(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        try:
            return self.server.app.handle_http(request)
        except RecursionError:
            return _too_deep(request)
        except Exception:
            logger.exception("answering %s %s failed", request.method, request.path)
            return detail(500, "internal error")

    def _await_answer(
        self, request: HttpRequest, pending: Awaitable[HttpResponse], keep_alive: bool
    ) -> None:
        """The app answers later: read nothing more (no timeout) until it has."""
        self._arm(None)
        self.pause_reading("answering")
        self._answering = self.loop.create_task(self._answer_later(request, pending, keep_alive))

    async def _answer_later(
        self, request: HttpRequest, pending: Awaitable[HttpResponse], keep_alive: bool
    ) -> None:
        try:
            response = await pending
        except RecursionError:
            response = _too_deep(request)
        except Exception:
            logger.exception("answering %s %s failed", request.method, request.path)
            response = detail(500, "internal error")
        self._answering = None
        if self.closed or not self._respond(response, keep_alive):
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
                return detail(401, "missing or wrong token", (("WWW-Authenticate", "Bearer"),))
        origin = request.headers.get("origin")
        if origin is not None and origin not in limits.allowed_origins:
            return detail(403, f"origin {origin[:100]!r} is not allowed")
        return None

    def _reply_and_close(self, response: HttpResponse) -> None:
        self.write(_response_bytes(response, self.limits.server_name, keep_alive=False))
        self.close_after_writing()

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
        self._arm(None)  # the stream's idle timeout takes over
        keepalive = request.headers.get(KEEPALIVE_HEADER.lower(), "").strip().lower()
        self._ws = stream = WebSocketStream(self, chosen, pings_count=keepalive == "ping")
        # the head only: frames sent right behind it are received once it is open
        head, rest = bytes(self._buffer[:head_end]), bytes(self._buffer[head_end:])
        self._buffer = bytearray()
        if not stream.accept(head, make_channel):
            self.close_after_writing()
            return
        if rest and not self.closed:
            stream.receive(rest)


# ----------------------------------------------------------------------------- HTTP


def _too_deep(request: HttpRequest) -> HttpResponse:
    """400 for a request whose input was nested too deeply to handle (no traceback logged)."""
    logger.info("%s %s refused: input nested too deeply", request.method, request.path)
    return detail(400, "input nested too deeply")


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
