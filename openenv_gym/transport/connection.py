"""Connections over the sans-I/O protocols, driven on the caller's thread: the JSON session.

* :class:`JsonSession` -- one OpenEnv ``/ws`` session (one environment instance), here;
* :class:`~openenv_gym.transport.batch_connection.BatchConnection` -- one batched
  ``/batch`` connection carrying many slots, several requests in flight, replies matched
  by request id, in :mod:`~openenv_gym.transport.batch_connection`;
* what both share: :func:`error_of`, :class:`BatchUnsupportedError`, the timeout message.

Both split a request in two halves, so that many can be in flight at once over many
sockets: ``send_*`` writes the request and returns at once; :meth:`~JsonSession.poll`
reads what has arrived and parses it (this is where replies are decoded, as they come in,
while servers still compute the others); a reply is then taken with ``take``. The
blocking calls (``reset``, ``step``, ``call``...) are the two halves with a wait between.

A timeout or a lost connection is fatal: the socket is dropped, so no late reply can ever
be taken for the answer to a later request. So is a frame that answers nothing: OpenEnv's
replies carry no request id, so a duplicate reply would otherwise be taken for the answer
to the next request, and every later one for the answer to the one after it. A JSON
session sends a ping with each request (section 2.5): the server answers it when it reads
it, so a data frame that arrives before its pong was sent before the server read the
request, and ends the session with :class:`RemoteProtocolError`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    ConnectError,
    ConnectionLostError,
    ProtocolError,
    RemoteProtocolError,
    RequestTimeoutError,
    ServerError,
    UsageError,
    server_error,
)
from openenv_gym.protocol import openenv as op
from openenv_gym.transport import keepalive
from openenv_gym.transport.handshake import ws_url
from openenv_gym.transport.raw import BROKEN_OFF, abort_websocket, broken_off, close_websockets
from openenv_gym.transport.waiting import deadline_after, wait
from openenv_gym.transport.wire import Pong, WebSocket, open_websocket

__all__ = ["BatchUnsupportedError", "JsonSession", "error_of", "timed_out", "ws_url"]

logger = logging.getLogger("openenv_gym.transport")


class BatchUnsupportedError(ConnectError):
    """The server does not speak the batched protocol (fall back to JSON ``/ws``)."""


def error_of(reply: op.ErrorReceived) -> ServerError:
    """The exception for an OpenEnv error frame, or a per-slot error of a batched reply."""
    return server_error(reply.code, reply.message, reply.details, session_closed=reply.ends_session)


_PING = b"oeg"
"""Prefix of the payload of our barrier pings (then a 4-byte counter)."""


def _ends_session(message: bytes | str) -> bool:
    """Whether a frame is an error that ends the session (the server may send it unasked)."""
    try:
        reply = op.decode_reply(message)
    except ProtocolError:
        return False
    return isinstance(reply, op.ErrorReceived) and reply.ends_session


def timed_out(url: str, timeouts: Timeouts, what: str) -> RequestTimeoutError:
    """The error of a request not answered within ``timeouts.step`` (``what`` is closed)."""
    return RequestTimeoutError(
        f"no reply from {url} within {timeouts.step} s; the {what} is closed"
    )


class JsonSession:
    """One OpenEnv ``/ws`` session. Create with :meth:`connect`.

    Every request goes out behind a ping (see the module docstring). Once a pong has come
    back ahead of its reply, a reply ahead of its pong ends the session; a server whose
    pongs lag behind its replies (or never come) is driven without that check.

    Args:
        ws: The open WebSocket.
        timeouts: Step and close timeouts.
    """

    def __init__(self, ws: WebSocket, timeouts: Timeouts) -> None:
        self.ws = ws
        self.url = ws.url
        self.timeouts = timeouts
        self._proto = op.ClientSession()
        self._reply: op.Reply | None = None
        self._error: ProtocolError | None = None
        self._deadline: float | None = None
        self._in_flight = False
        self._overdue = False
        self._pings = 0
        self._awaiting_pong: bytes | None = None  # the ping sent with the request in flight
        self._pongs_first: bool | None = None  # None: not known yet
        ws.track_pongs = True
        keepalive.track(ws)

    @classmethod
    def connect(
        cls, base_url: str, timeouts: Timeouts, headers: Mapping[str, str] | None = None
    ) -> JsonSession:
        """Open ``/ws`` on ``base_url``.

        Raises:
            ConnectError: Unreachable, or the upgrade was refused.
        """
        ws = open_websocket(ws_url(base_url, "/ws"), headers=headers, timeout=timeouts.connect)
        return cls(ws, timeouts)

    @property
    def closed(self) -> bool:
        """Whether the session is over (closed, failed or timed out)."""
        return self._proto.state is op.SessionState.CLOSED

    @property
    def pending(self) -> bool:
        """Whether a request was sent and its reply not taken yet."""
        return self._in_flight

    def settle(self) -> None:
        """Wait for the reply a call interrupted while waiting left pending, and drop it.

        An error frame in its place is dropped too; a timeout or a lost connection is
        raised (the session is then closed).
        """
        if self._in_flight:
            with contextlib.suppress(ServerError):
                self.wait()

    def _check_open(self) -> None:
        if self.closed:
            raise UsageError(f"the session with {self.url} is closed")

    # ------------------------------------------------------------------ the two halves
    def send_reset(self, **kwargs: Any) -> None:
        """Send ``reset``; take its reply with :meth:`take` once :meth:`poll` found it."""
        self._send(lambda: self._proto.send_reset(**kwargs))

    def send_step(self, action: Mapping[str, Any]) -> None:
        """Send ``step`` with the action's fields."""
        self._send(lambda: self._proto.send_step(action))

    def send_state(self) -> None:
        """Send ``state``."""
        self._send(self._proto.send_state)

    def _send(self, queue: Any) -> None:
        self._check_open()
        if self._in_flight:
            raise UsageError(f"a request to {self.url} is pending: take its reply first")
        with self.ws.lock:
            try:
                # anything that came while idle is unsolicited: fatal (2.5). Behind a working
                # barrier it comes before this request's pong, so it is found with the reply
                # and no read is needed now (a syscall per request saved); otherwise read.
                if self._pongs_first:
                    self._feed()
                else:
                    self._drain()
                if self._reply is not None:  # the server ended the session unasked (capacity...)
                    reply, self._reply = self._reply, None
                    abort_websocket(self.ws)
                    assert isinstance(reply, op.ErrorReceived)
                    raise error_of(reply)
                queue()
                self._deadline = deadline_after(self.timeouts.step)
                self._in_flight = True
                try:
                    if self._pongs_first is not False:
                        self._pings = (self._pings + 1) % 2**32
                        self._awaiting_pong = _PING + self._pings.to_bytes(4, "big")
                        self.ws.queue_ping(self._awaiting_pong)
                    for frame in self._proto.data_to_send():
                        self.ws.queue(frame)
                    self.ws.flush()
                except ConnectionLostError:
                    pass  # the reason may be buffered (e.g. CAPACITY_REACHED): read it
            except BaseException as exc:
                if broken_off(exc):
                    self._break_off()
                raise

    def _drain(self) -> None:
        self.ws.read()
        self._feed()

    def _feed(self) -> None:
        messages = self.ws.messages
        proto = self._proto
        try:
            while messages:
                message = messages.popleft()
                if isinstance(message, Pong):
                    self._pong(message.data)
                elif proto.state is op.SessionState.CLOSED:
                    messages.clear()  # the server ended the session: the rest is moot
                    break
                elif (
                    self._awaiting_pong is not None
                    and self._pongs_first
                    and not _ends_session(message)  # the server's reason, not ours
                ):
                    proto.connection_lost()
                    raise RemoteProtocolError(
                        f"{self.url} sent a frame before it read our request: a duplicate "
                        "or unsolicited reply (OpenEnv replies carry no request id, so the "
                        "session is closed)"
                    )
                else:
                    proto.receive_data(message)
            for event in proto.events_received():
                self._reply = event
        except ProtocolError as exc:
            self._error = exc
            abort_websocket(self.ws)
            raise
        except BaseException as exc:
            if broken_off(exc):
                self._break_off()
            raise

    def _pong(self, data: bytes) -> None:
        """A pong came: the server has read every frame we sent before its ping."""
        if data == self._awaiting_pong:
            self._awaiting_pong = None
            if self._pongs_first is None:
                self._pongs_first = True
        elif data.startswith(_PING):  # the pong of a request whose reply came first
            self._pongs_first = False  # this server's pongs lag: no barrier, no more pings
            self._awaiting_pong = None

    def poll(self) -> bool:
        """Read what has arrived (never blocks); True once the reply is in (or failed).

        Raises:
            RemoteProtocolError: The server broke the protocol (the session is closed).
        """
        ws = self.ws
        with ws.lock:
            try:
                try:
                    flushed = ws.flush()
                except ConnectionLostError:
                    flushed = False
                if flushed:
                    ws.read()
            except BaseException as exc:
                if broken_off(exc):
                    self._break_off()
                raise
            self._feed()
            if self._reply is None and ws.failure is not None:
                self._proto.connection_lost()
        return self._reply is not None or self.closed

    @property
    def deadline(self) -> float | None:
        """When the pending request times out (None: nothing pending, or no timeout)."""
        return self._deadline

    @property
    def ready(self) -> bool:
        """Whether :meth:`take` would return or raise without waiting."""
        return (
            not self._in_flight
            or self._reply is not None
            or self._overdue
            or self.ws.failure is not None
        )

    def expire(self, now: float) -> None:
        """Mark the pending request overdue if its deadline passed (:meth:`take` raises)."""
        deadline = self._deadline
        if self._in_flight and deadline is not None and now >= deadline and self._reply is None:
            self._overdue = True

    def take(self) -> op.Reply:
        """The reply :meth:`poll` found; the request is over.

        Raises:
            RequestTimeoutError: Overdue (the session is closed).
            ConnectionLostError: The connection ended first.
            ServerError: An error frame (the session survives unless it ends sessions).
        """
        reply, self._reply = self._reply, None
        overdue, self._overdue, self._in_flight = self._overdue, False, False
        self._deadline = None
        if reply is None and self._error is not None:
            raise self._error
        if reply is None or overdue:
            if self.ws.failure is not None and not overdue:
                self._proto.connection_lost()
                raise ConnectionLostError(str(self.ws.failure)) from self.ws.failure
            self.abort()
            raise timed_out(self.url, self.timeouts, "session")
        if isinstance(reply, op.ErrorReceived):
            if reply.ends_session:
                self.abort()
            raise error_of(reply)
        return reply

    def wait(self) -> op.Reply:
        """Block until the pending reply is in, then :meth:`take` it.

        A reply counts only if it is read before the deadline.
        """
        with self.ws.lock:
            self._feed()  # a reply that came with an earlier read: no syscall for it
        while self._reply is None and not self.closed:
            self.expire(time.monotonic())
            if self._overdue:
                break
            with self.ws.lock:
                if not wait([self.ws], self._deadline):
                    self._overdue = True
                    break
            self.poll()
        return self.take()

    # ------------------------------------------------------------------ blocking calls
    def reset(self, **kwargs: Any) -> op.ObservationReceived:
        """Send ``reset`` and return the first observation."""
        self.send_reset(**kwargs)
        return self._observation()

    def step(self, action: Mapping[str, Any]) -> op.ObservationReceived:
        """Send ``step`` with the action's fields and return the observation."""
        self.send_step(action)
        return self._observation()

    def _observation(self) -> op.ObservationReceived:
        reply = self.wait()
        assert isinstance(reply, op.ObservationReceived)
        return reply

    def state(self) -> dict[str, Any]:
        """Return the environment's state."""
        self.send_state()
        reply = self.wait()
        assert isinstance(reply, op.StateReceived)
        return reply.state

    def close(self) -> None:
        """Send ``close`` and close the socket. Idempotent; never raises."""
        close_websockets([self.closing()], self.timeouts.close)

    def closing(self) -> tuple[WebSocket, Sequence[str]]:
        """End the session: its socket, and the goodbye to send before the close frame.

        For :func:`~openenv_gym.transport.raw.close_websockets`, which closes many
        sockets at once (:meth:`close` is one).
        """
        with self.ws.lock:
            goodbye: Sequence[str] = ()
            if not self.closed:
                self._proto.send_close()
                goodbye = self._proto.data_to_send()
        return self.ws, goodbye

    def abort(self, why: str = "closed by the client") -> None:
        """Drop the socket at once (e.g. the caller gave up waiting).

        ``why`` completes the failure's message (``connection to URL <why>``).
        """
        abort_websocket(self.ws, why)
        self._proto.connection_lost()

    def _break_off(self) -> None:
        """A call stopped halfway through reading or writing: the socket is dropped."""
        self.abort(BROKEN_OFF)
