"""What the server's front door serves, and with which limits: the interfaces of the runtime.

:class:`Limits` (every bound a connection is held to), the plain HTTP request and response
(:class:`HttpRequest`, :class:`HttpResponse`), and the three protocols that join the
connection layer (:mod:`openenv_gym.runtime.http`, :mod:`openenv_gym.runtime.websocket`) to
the application: an :class:`App` answers requests and opens a :class:`Channel` per
WebSocket, which talks through its :class:`Socket`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from openenv_gym.protocol.fragments import DEFAULT_MAX_FRAGMENTS

__all__ = [
    "MESSAGE_HEAD",
    "App",
    "Channel",
    "HttpRequest",
    "HttpResponse",
    "Limits",
    "Socket",
    "detail",
    "json_response",
]

MESSAGE_HEAD = 64 * 1024
"""WebSocket messages larger than this are read by the connection itself, as they arrive.

websockets' parser buffers a frame whole, then copies and unmasks it in one go; a data
frame over this size (unfragmented, uncompressed, within ``max_frame``) is instead
unmasked chunk by chunk as it is read, so no read costs more than its own bytes, and it
may be answered from its first ``MESSAGE_HEAD`` bytes (``Channel.on_message_head``)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one server accepts (:mod:`openenv_gym.runtime.http`); None disables a timeout.

    Attributes:
        max_connections: Open connections at once, HTTP and WebSocket.
        handshake_timeout: Seconds for a connection to send a complete request head.
        idle_timeout: Seconds a WebSocket may stay without a message from the peer.
        max_frame: Largest WebSocket message, bytes (fragments together).
        max_fragments: Most frames one WebSocket message may come in.
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
    max_fragments: int = DEFAULT_MAX_FRAGMENTS
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


def detail(status: int, text: str, headers: Sequence[tuple[str, str]] = ()) -> HttpResponse:
    """A JSON error response ``{"detail": text}``, as FastAPI writes them."""
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
