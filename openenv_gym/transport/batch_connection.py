"""One batched-protocol connection, driven on the caller's thread: many slots, many requests.

:class:`BatchConnection` carries the slots of many sub-environments over one ``/batch``
WebSocket; requests may be in flight concurrently, each with its id, and replies are
matched by id (``docs/protocol.md`` section 3.5). As :class:`~openenv_gym.transport.
connection.JsonSession`, it splits a request in two halves (:meth:`~BatchConnection.send`,
then :meth:`~BatchConnection.poll` and :meth:`~BatchConnection.take`), and a timeout or a
lost connection is fatal for the whole connection: the socket is dropped, so no late reply
is ever taken for another request's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from openenv_gym._version import __version__
from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    ConnectionLostError,
    OpenEnvGymError,
    ProtocolError,
    RemoteProtocolError,
    UsageError,
)
from openenv_gym.protocol import batch as bp
from openenv_gym.transport import keepalive
from openenv_gym.transport.connection import BatchUnsupportedError, timed_out
from openenv_gym.transport.handshake import HandshakeRefused, ws_url
from openenv_gym.transport.raw import BROKEN_OFF, abort_websocket, broken_off, close_websockets
from openenv_gym.transport.waiting import deadline_after, wait
from openenv_gym.transport.wire import Pong, WebSocket, open_websocket

__all__ = ["BatchConnection"]

logger = logging.getLogger("openenv_gym.transport")

_NEWEST_FIRST = tuple(bp.SUBPROTOCOLS[v] for v in sorted(bp.SUBPROTOCOLS, reverse=True))


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
            self._fail(timed_out(self.url, self.timeouts, "connection"))
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
