"""A raw WebSocket to a server, and the one way every connection of the client ends.

:class:`RawSocket` sends whatever it is given and hands back each message as it came:
no parsing, no request bookkeeping, no pings. It is for tools that probe a server rather
than drive it (``openenv-gym check`` sends frames no client would, and watches how the
server closes); environments use :class:`~openenv_gym.transport.connection.JsonSession`
and :class:`~openenv_gym.transport.batch_connection.BatchConnection`. It opens its socket the
way they do (the same handshake, ``User-Agent``, proxy rules, message size limit and
error mapping) and reads it on the calling thread.

:func:`close_websocket` and :func:`abort_websocket` end a connection: every session and
connection of the client closes its socket through them, so the closing rules live here
only.

Times: ``timeout`` arguments are seconds from now, ``deadline`` arguments are instants of
:func:`time.monotonic` (a caller with a budget of its own passes the earlier of the two);
None waits without limit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

from openenv_gym.exceptions import ConnectionLostError
from openenv_gym.transport.handshake import ws_url
from openenv_gym.transport.waiting import deadline_after, wait
from openenv_gym.transport.wire import WebSocket, open_websocket

__all__ = [
    "BROKEN_OFF",
    "CloseFrame",
    "RawSocket",
    "abort_websocket",
    "broken_off",
    "close_websocket",
    "close_websockets",
]


def close_websocket(
    ws: WebSocket, timeout: float | None, goodbye: Iterable[bytes | str] = ()
) -> None:
    """Close ``ws`` politely: send ``goodbye``, then the close frame, and wait for the peer's.

    Args:
        ws: The socket (its lock is taken).
        timeout: Seconds for writing everything and for the peer's close frame; the
            socket is dropped when they run out.
        goodbye: Messages sent first (e.g. a protocol's own ``close`` request); skipped
            when the connection is already gone.

    Idempotent; never raises.
    """
    close_websockets([(ws, goodbye)], timeout)


def close_websockets(
    closings: Iterable[tuple[WebSocket, Iterable[bytes | str]]], timeout: float | None
) -> None:
    """Close many sockets politely side by side, within one ``timeout`` for them all.

    Each gets its goodbye messages and its close frame at once; then the peers' close
    frames are awaited together, and every socket still open at ``timeout`` is dropped:
    a frozen server costs ``timeout`` once, however many sockets it holds. Every socket's
    lock is taken. Never raises.
    """
    closings = list(closings)
    deadline = deadline_after(timeout)
    with contextlib.ExitStack() as held:
        for ws, _ in closings:
            held.enter_context(ws.lock)
        closing = []
        for ws, goodbye in closings:
            with contextlib.suppress(ConnectionLostError):
                for message in goodbye:
                    ws.queue(message)
            if ws.start_close():
                closing.append(ws)
        while closing and wait(closing, deadline):
            for ws in closing:
                ws.continue_close()
            closing = [ws for ws in closing if not ws.closed]
        for ws, _ in closings:
            ws.abort()


def abort_websocket(ws: WebSocket, why: str = "closed by the client") -> None:
    """Drop ``ws`` at once, without a closing handshake (its lock is taken). Idempotent.

    ``why`` completes its failure's message (``connection to URL <why>``).
    """
    with ws.lock:
        ws.abort(why)


BROKEN_OFF = (
    "dropped: the client was interrupted (e.g. KeyboardInterrupt) while reading or writing "
    "it, so its bytes may be cut anywhere"
)
"""Why a connection is dropped when a call using it stops halfway (see :func:`broken_off`)."""


def broken_off(exc: BaseException) -> bool:
    """Whether ``exc`` stopped a call halfway rather than being an error of the call.

    A ``KeyboardInterrupt`` (or ``SystemExit``, or any other ``BaseException`` that is not
    an ``Exception``) may land between any two bytecodes: between reading bytes and
    parsing them, or taking a message and handing it to the protocol. A connection it
    stops while reading or writing can no longer be trusted, and is dropped with
    :data:`BROKEN_OFF`. One that stops a call while it *waits* for bytes leaves everything
    as it was: the waits are outside these guards, and the request stays pending.
    """
    return not isinstance(exc, Exception)


@dataclass(frozen=True, slots=True)
class CloseFrame:
    """The close frame a server sent (RFC 6455 5.5.1).

    Attributes:
        code: The close code (1000: normal closure).
        reason: The reason text, often empty.
    """

    code: int
    reason: str

    def __str__(self) -> str:
        return f"close code {self.code}{f' {self.reason!r}' if self.reason else ''}"


class RawSocket:
    """One client WebSocket, raw: any message out, each message in as it came.

    Create with :meth:`connect`. Use from one thread at a time. A context manager: leaving
    the ``with`` block closes it.

    Args:
        ws: The open socket.
    """

    def __init__(self, ws: WebSocket) -> None:
        self._ws = ws

    @classmethod
    def connect(
        cls,
        base_url: str,
        path: str = "/ws",
        *,
        headers: Mapping[str, str] | None = None,
        subprotocols: Sequence[str] | None = None,
        timeout: float | None = 10.0,
    ) -> RawSocket:
        """Open ``path`` on the server at ``base_url`` and complete the upgrade.

        Args:
            base_url: ``http(s)://host:port[/prefix]``, ``ws(s)://...`` or ``host:port``.
            path: ``/ws`` (OpenEnv's JSON protocol), ``/batch`` (the batched protocol), ...
            headers: Extra request headers (e.g. ``Authorization``).
            subprotocols: Subprotocols offered (the batched protocol's versions);
                :attr:`subprotocol` says which one the server chose.
            timeout: Seconds for the whole handshake.

        Raises:
            HandshakeRefused: The server answered the upgrade with an HTTP status.
            AuthenticationError: That status was 401.
            ConnectError: Unreachable, TLS failure, a bad URL, or no handshake in time.
        """
        ws = open_websocket(
            ws_url(base_url, path), subprotocols=subprotocols, headers=headers, timeout=timeout
        )
        return cls(ws)

    # ------------------------------------------------------------------ state
    @property
    def url(self) -> str:
        """The ``ws(s)://`` URL the socket was opened on."""
        return self._ws.url

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol the server selected, or None."""
        return self._ws.subprotocol

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (closed by either side, or failed)."""
        return self._ws.closed

    @property
    def close_frame(self) -> CloseFrame | None:
        """The server's close frame, or None if none came (yet, or at all)."""
        received = self._ws.close_received
        if received is None:
            return None
        return CloseFrame(int(received.code), str(received.reason))

    # ------------------------------------------------------------------ messages
    def send(self, message: bytes | str, deadline: float | None) -> None:
        """Send one message (``str``: a text frame, ``bytes``: binary).

        Raises:
            ConnectionLostError: The connection is gone.
            RequestTimeoutError: Not written by ``deadline`` (the socket is then dropped).
        """
        ws = self._ws
        with ws.lock:
            ws.send(message, deadline)

    def receive(self, deadline: float | None) -> bytes | str:
        """The next message (``str`` from a text frame, ``bytes`` from a binary one).

        A message that came before the server closed is still returned.

        Raises:
            RequestTimeoutError: Nothing came by ``deadline`` (the socket stays open: drop
                it with :meth:`abort` if a late message must not be taken for the next).
            ConnectionLostError: The connection ended first (:attr:`close_frame` says how).
        """
        ws = self._ws
        with ws.lock:
            return ws.receive(deadline)

    def wait_closed(self, deadline: float | None) -> bool:
        """Whether the server closes the connection by ``deadline``.

        Messages that arrive meanwhile are kept for :meth:`receive`.
        """
        ws = self._ws
        with ws.lock:
            while not ws.closed:
                if not wait([ws], deadline):
                    return False
                ws.read()
        return True

    # ------------------------------------------------------------------ ending
    def close(self, timeout: float | None = 5.0, goodbye: Iterable[bytes | str] = ()) -> None:
        """Send ``goodbye``, then close politely (see :func:`close_websocket`). Never raises."""
        close_websocket(self._ws, timeout, goodbye)

    def abort(self) -> None:
        """Drop the connection at once, without a closing handshake. Idempotent."""
        abort_websocket(self._ws)

    def __enter__(self) -> RawSocket:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
