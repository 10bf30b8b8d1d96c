"""Connections over the sans-I/O protocols, driven on the caller's thread.

* :class:`JsonSession` -- one OpenEnv ``/ws`` session (one environment instance).
* :class:`BatchConnection` -- one batched ``/batch`` connection carrying many slots,
  several requests in flight, replies matched by request id.

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

One cohesive concern, over 600 lines: the two kinds of client connection over the
sans-I/O protocols, with the timeout and loss rules they share.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from openenv_gym._version import __version__
from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    ConnectError,
    ConnectionLostError,
    OpenEnvGymError,
    ProtocolError,
    RemoteProtocolError,
    RequestTimeoutError,
    ServerError,
    UsageError,
    server_error,
)
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.transport import keepalive
from openenv_gym.transport.handshake import HandshakeRefused, ws_url
from openenv_gym.transport.raw import BROKEN_OFF, abort_websocket, broken_off, close_websockets
from openenv_gym.transport.waiting import deadline_after, wait
from openenv_gym.transport.wire import Pong, WebSocket, open_websocket

__all__ = [
    "BatchConnection",
    "BatchUnsupportedError",
    "JsonSession",
    "error_of",
    "ws_url",
]

logger = logging.getLogger("openenv_gym.transport")

_NEWEST_FIRST = tuple(bp.SUBPROTOCOLS[v] for v in sorted(bp.SUBPROTOCOLS, reverse=True))


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


def _timed_out(url: str, timeouts: Timeouts, what: str) -> RequestTimeoutError:
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
            raise _timed_out(self.url, self.timeouts, "session")
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


class BatchConnection:
    """One batched-protocol connection carrying many slots. Create with :meth:`connect`.

    Requests may be in flight concurrently (each with its own id). A reply not received
    within ``timeouts.step`` closes the whole connection.

    Args:
        ws: The open WebSocket, its subprotocol selected.
        client: The protocol state, its version that of the subprotocol.
        timeouts: Step and close timeouts.
    """

    def __init__(self, ws: WebSocket, client: bp.BatchClient, timeouts: Timeouts) -> None:
        self.ws = ws
        self.url = ws.url
        self.timeouts = timeouts
        self._proto = client
        self._replies: dict[int, bp.BatchReplyReceived | bp.RequestFailed | bp.HelloReceived] = {}
        self._deadlines: dict[int, float | None] = {}
        self._failure: OpenEnvGymError | None = None
        self._closed_by_client = False
        self._held = False  # hold(): frames queue until release()
        keepalive.track(ws)

    @classmethod
    def connect(
        cls,
        base_url: str,
        timeouts: Timeouts,
        headers: Mapping[str, str] | None = None,
        versions: Sequence[int] = bp.PROTOCOL_VERSIONS,
    ) -> BatchConnection:
        """Open ``/batch`` on ``base_url`` (the newest version both speak) and say ``hello``.

        Raises:
            BatchUnsupportedError: The server does not speak the batched protocol.
            ConnectError: The server is unreachable.
        """
        url = ws_url(base_url, "/batch")
        offered = [name for name in _NEWEST_FIRST if bp.version_of(name) in versions]
        try:
            ws = open_websocket(
                url, subprotocols=offered, headers=headers, timeout=timeouts.connect
            )
        except HandshakeRefused as exc:
            raise BatchUnsupportedError(f"{url}: HTTP {exc.status}") from exc
        version = bp.version_of(ws.subprotocol)
        if version is None or version not in versions:
            abort_websocket(ws)
            raise BatchUnsupportedError(f"{url}: no batched-protocol subprotocol selected")
        self = cls(ws, bp.BatchClient(f"openenv-gym/{__version__}", version=version), timeouts)
        self._proto.send_hello()
        try:
            reply = self._wait_for(self._queue_sent(0))
        except OpenEnvGymError:
            self.abort()
            raise
        if not isinstance(reply, bp.HelloReceived):
            self.abort()
            raise BatchUnsupportedError(f"{url}: hello refused: {reply}")
        return self

    # ------------------------------------------------------------------ state
    @property
    def version(self) -> int:
        """The protocol version spoken (2 allows the columnar forms)."""
        return self._proto.version

    @property
    def server_info(self) -> bp.HelloReceived | None:
        """What the server said in ``hello``."""
        return self._proto.server_info

    @property
    def closed(self) -> bool:
        """Whether the connection is gone."""
        return self._proto.state is bp.ConnectionState.CLOSED

    @property
    def failure(self) -> OpenEnvGymError | None:
        """Why the connection failed (timeout, lost, protocol error); None if it did not."""
        return self._failure

    @property
    def open_slots(self) -> set[int]:
        """Slots currently open on this connection."""
        return set(self._proto.open_slots)

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self.closed:
            raise UsageError(f"the connection to {self.url} is closed")

    def _fail(self, failure: OpenEnvGymError) -> None:
        if self._failure is None:
            self._failure = failure
        self._proto.connection_lost()
        self._deadlines.clear()
        abort_websocket(self.ws)

    # ------------------------------------------------------------------ the two halves
    def send(
        self,
        op_: bp.Op,
        slots: Sequence[int],
        args: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
        numeric: Iterable[str] = (),
    ) -> int:
        """Send one request (without waiting) and return its id.

        ``args`` (reset / step): one map per slot, or (version 2) a map of columns.

        Raises:
            TransportError: The connection is gone.
            LocalProtocolError: The request is not allowed (slot busy, not open...).
        """
        self._check()
        proto = self._proto
        try:
            if op_ is bp.Op.STEP:
                rid = proto.send_step(slots, args or [], numeric=numeric)
            elif op_ is bp.Op.RESET:
                rid = proto.send_reset(slots, args or [{}] * len(slots), numeric=numeric)
            elif op_ is bp.Op.OPEN:
                rid = proto.send_open(slots)
            elif op_ is bp.Op.STATE:
                rid = proto.send_state(slots)
            else:
                rid = proto.send_close(slots)
            return self._queue_sent(rid)
        except BaseException as exc:
            if broken_off(exc):
                self._break_off()
            raise

    def _queue_sent(self, rid: int) -> int:
        ws = self.ws
        with ws.lock:
            try:
                for frame in self._proto.data_to_send():
                    ws.queue(frame)
                if not self._held:
                    ws.flush()
            except ConnectionLostError as exc:
                self._fail(exc)
        self._deadlines[rid] = deadline_after(self.timeouts.step)
        return rid

    def hold(self) -> None:
        """Queue the frames of the next :meth:`send` calls without writing them.

        :meth:`release` writes them all at once: one write for a step's frames (a reset
        frame and a step frame, say), so the server wakes once and reads them together.
        """
        self._held = True

    def release(self) -> None:
        """Write what :meth:`hold` kept back; a lost connection fails it (never raises)."""
        if not self._held:
            return
        self._held = False
        ws = self.ws
        with ws.lock:
            if self._failure is None:
                try:
                    ws.flush()
                except ConnectionLostError as exc:
                    self._fail(exc)
                except BaseException as exc:
                    if broken_off(exc):
                        self._break_off()
                    raise

    def poll(self) -> None:
        """Read and decode what has arrived, never blocking (replies wait for :meth:`take`)."""
        ws = self.ws
        with ws.lock:
            if self._failure is None and not self._closed_by_client:
                try:
                    if ws.flush():
                        ws.read()
                except ConnectionLostError as exc:
                    self._fail(exc)
                except BaseException as exc:
                    if broken_off(exc):
                        self._break_off()
                    raise
            self._feed()

    def _feed(self) -> None:
        ws, proto = self.ws, self._proto
        messages = ws.messages
        try:
            while messages:
                message = messages.popleft()
                if isinstance(message, Pong):  # not ours: pongs are tracked on /ws only
                    continue
                proto.receive_data(message)
                for event in proto.events_received():
                    rid = 0 if isinstance(event, bp.HelloReceived) else event.request_id
                    if rid is None:
                        logger.warning("%s rejected a frame: %s", self.url, event)
                        continue
                    self._replies[rid] = event
                    self._deadlines.pop(rid, None)
                if proto.state is bp.ConnectionState.CLOSED:
                    self._fail(
                        RemoteProtocolError(
                            f"{self.url}: the server rejected a frame it could not attribute; "
                            "the connection is closed"
                        )
                    )
                    return
        except ProtocolError as exc:
            self._fail(exc)
            return
        except BaseException as exc:
            if broken_off(exc):
                self._break_off()
            raise
        if ws.failure is not None and self._failure is None and not self._closed_by_client:
            self._fail(ConnectionLostError(str(ws.failure)))

    def done(self, rid: int) -> bool:
        """Whether request ``rid`` is answered, or can never be (the connection failed)."""
        return rid in self._replies or self._failure is not None or self._closed_by_client

    def deadline(self, rid: int) -> float | None:
        """When request ``rid`` times out (None: never, or already answered)."""
        return self._deadlines.get(rid)

    def expire(self, now: float) -> None:
        """Fail the connection if a reply is overdue (a timeout is fatal)."""
        self._expired(now)

    def _expired(self, now: float) -> bool:
        if any(d is not None and now >= d for d in self._deadlines.values()):
            self._fail(_timed_out(self.url, self.timeouts, "connection"))
            return True
        return False

    def take(self, rid: int) -> bp.BatchReplyReceived:
        """The reply to ``rid``, once :meth:`done`.

        Raises:
            RemoteProtocolError: The server rejected the whole frame.
            TransportError: Timeout or lost connection.
        """
        reply = self._replies.pop(rid, None)
        if reply is None:
            if self._failure is None:
                raise UsageError(f"the connection to {self.url} was closed by the client")
            raise self._failure
        if isinstance(reply, bp.RequestFailed):
            raise RemoteProtocolError(f"server rejected the request: {reply.code}: {reply.message}")
        assert isinstance(reply, bp.BatchReplyReceived)
        return reply

    def _wait_for(self, rid: int) -> Any:
        with self.ws.lock:
            self._feed()  # a reply that came with an earlier read: no syscall for it
        while True:
            if rid in self._replies:
                return self._replies.pop(rid)
            if self._failure is not None:
                raise self._failure
            if self._closed_by_client:
                raise UsageError(f"the connection to {self.url} was closed by the client")
            if self._expired(time.monotonic()):  # a reply counts only if read in time
                continue
            with self.ws.lock:
                ready = wait([self.ws], self._deadlines.get(rid))
            if ready:
                self.poll()

    # ------------------------------------------------------------------ blocking calls
    def call(
        self,
        op_: bp.Op,
        slots: Sequence[int],
        args: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
    ) -> bp.BatchReplyReceived:
        """Send one batched request and return its reply (per-slot errors inside).

        Raises:
            RemoteProtocolError: The server rejected the whole frame.
            TransportError: Timeout or lost connection (the connection is then closed).
        """
        return self.result(self.send(op_, slots, args), op_)

    def result(self, rid: int, op_: bp.Op | None = None) -> bp.BatchReplyReceived:
        """Block until request ``rid`` is answered, and return its reply.

        Interrupted while it waits (``KeyboardInterrupt``), the request stays pending:
        call this again to finish it.

        Raises:
            RemoteProtocolError: The server rejected the whole frame.
            TransportError: Timeout or lost connection (the connection is then closed).
        """
        reply = self._wait_for(rid)
        if isinstance(reply, bp.RequestFailed):
            what = "request" if op_ is None else f"{op_.value} frame"
            raise RemoteProtocolError(f"server rejected the {what}: {reply.code}: {reply.message}")
        assert isinstance(reply, bp.BatchReplyReceived)
        return reply

    def close(self) -> None:
        """Close the connection (the server closes every slot). Idempotent; never raises."""
        close_websockets([self.closing()], self.timeouts.close)

    def closing(self) -> tuple[WebSocket, Sequence[bytes]]:
        """End the connection: its socket, for :func:`~openenv_gym.transport.raw.close_websockets`.

        No goodbye: closing the socket closes every slot.
        """
        self._closed_by_client = True
        self._proto.connection_lost()
        self._deadlines.clear()
        return self.ws, ()

    def abort(self, why: str = "closed by the client") -> None:
        """Drop the connection at once; ``why`` completes the failure's message."""
        self._fail(ConnectionLostError(f"connection to {self.url} {why}"))

    def _break_off(self) -> None:
        """A call stopped halfway through reading or writing: the connection is dropped."""
        self.abort(BROKEN_OFF)
