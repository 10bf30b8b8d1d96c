"""A client WebSocket driven on the caller's own thread: websockets' sans-I/O protocol, a socket.

Every call of the package that talks to a server runs its socket I/O right here, on the
thread that made the call: frames are written with ``send``, replies read when
:mod:`~openenv_gym.transport.waiting` says the socket is readable, and nothing hops to
another thread on the way: a round trip through an event-loop thread would cost two
cross-CPU wake-ups more than the same round trip on the caller's thread
(``docs/architecture.md`` says how much).

* :func:`open_websocket` connects (:mod:`~openenv_gym.transport.handshake`: TCP, optional
  HTTP ``CONNECT`` proxy, TLS, the upgrade) and returns a :class:`WebSocket`.
* :class:`WebSocket` queues frames (:meth:`~WebSocket.queue`), writes them without
  blocking (:meth:`~WebSocket.flush`), and turns bytes from the socket into whole messages
  (:meth:`~WebSocket.read`); pings are answered as they are read.
* Pings of our own (:meth:`~WebSocket.queue_ping`) come back as :class:`Pong` markers in
  :attr:`~WebSocket.messages`, in order with the data messages, when
  :attr:`~WebSocket.track_pongs` is set: the JSON session uses them as barriers.
* Idle connections still answer pings: :mod:`openenv_gym.transport.keepalive` reads them
  from a background thread, every few seconds, whenever no call is using them.

Every third-party exception met on an open connection is converted here, once, to
:mod:`openenv_gym.exceptions` (the handshake's in :mod:`~openenv_gym.transport.handshake`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidState
from websockets.frames import Frame, Opcode
from websockets.protocol import State

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - websockets built without its C extension
    from websockets.utils import apply_mask

from openenv_gym.exceptions import ConnectionLostError, RemoteProtocolError, RequestTimeoutError
from openenv_gym.protocol.fragments import DEFAULT_MAX_FRAGMENTS, FragmentAssembler, FragmentError
from openenv_gym.protocol.frames import frame_head, parse_head
from openenv_gym.transport.handshake import upgrade
from openenv_gym.transport.waiting import deadline_after, wait, wait_readable

__all__ = ["MAX_MESSAGE", "Pong", "WebSocket", "open_websocket"]

logger = logging.getLogger("openenv_gym.transport")

MAX_MESSAGE = 100 * 2**20
"""Largest message accepted (the official client's receive cap, 100 MB)."""

_READ_SIZE = 256 * 1024
_MASKS = 1024
"""Bytes of masking keys drawn from ``os.urandom`` at once (256 frames' worth)."""
_FAST_MAX = 2**20
"""Largest frame parsed by :meth:`WebSocket._receive` itself (longer: websockets parses it)."""


@dataclass(frozen=True, slots=True)
class Pong:
    """A pong received, kept in :attr:`WebSocket.messages` among the data messages.

    Only when :attr:`WebSocket.track_pongs` is set. The peer answers a ping when it reads
    it, so what came before the pong was sent before the peer read what followed the ping.

    Attributes:
        data: The pong's payload (the ping's).
    """

    data: bytes


class WebSocket:
    """One open client WebSocket. Create with :func:`open_websocket`.

    Not thread-safe by itself: whoever uses it holds :attr:`lock` (the keepalive thread
    only ever *tries* it). Received messages wait in :attr:`messages` until taken.

    Attributes:
        url: The ``ws(s)://`` URL it was opened on.
        subprotocol: The subprotocol the server selected, or None.
        messages: Whole data messages received and not yet taken (``bytes`` for binary
            frames, ``str`` for text frames), oldest first; with :attr:`track_pongs`, also
            a :class:`Pong` for each pong, in the order they came.
        track_pongs: Whether pongs are kept in :attr:`messages` (off: dropped).
        lock: Held by the thread using the socket.
        failure: Why the connection is gone (a :class:`TransportError`), or None while it
            is open.
        idle_timeout: Seconds the server lets the connection idle before it closes it,
            counting our pings as activity (it said so on the upgrade); None: it did not
            say (then only messages count, or it has no idle timeout).
        keepalive_at: When :mod:`~openenv_gym.transport.keepalive` last pinged it
            (``time.monotonic()``).
    """

    def __init__(self, sock: socket.socket, protocol: ClientProtocol, url: str) -> None:
        self.sock = sock
        self.url = url
        self.subprotocol: str | None = protocol.subprotocol
        self.messages: collections.deque[bytes | str | Pong] = collections.deque()
        self.track_pongs = False
        self.lock = threading.RLock()
        self.failure: ConnectionLostError | RemoteProtocolError | None = None
        self.idle_timeout: float | None = None  # the server's, when our pings count
        self.keepalive_at = time.monotonic()  # our last keepalive ping (keepalive.py)
        self._proto = protocol
        self._out = bytearray()
        max_size = getattr(protocol, "max_message_size", None)
        self._assembler = FragmentAssembler(max_size, DEFAULT_MAX_FRAGMENTS)
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._eof_sent = False
        self._closed_by_us = False
        self._plain = not protocol.extensions  # frames written and parsed here (see _receive)
        self._plain_rx = self._plain  # False: websockets may be inside a frame from the start
        self._fast_max = min(_FAST_MAX, getattr(protocol, "max_message_size", None) or _FAST_MAX)
        self._rx_left = 0  # bytes websockets' parser still needs to finish a frame
        self._rx_cut = b""  # the start of a frame head cut by the end of a read
        self._rx_fragmented = False  # a fragmented message is under way (frames seen here)
        self._masks = b""
        self._mask_at = 0
        self.wait_ewma = 0.0  # moving average of recent waits for bytes, s (wait_readable)
        sock.setblocking(False)

    # ------------------------------------------------------------------ waiting
    def wait_readable(self, timeout: float | None) -> bool:
        """Block until the socket has bytes to read (True) or ``timeout`` s pass (False).

        See :func:`~openenv_gym.transport.waiting.wait_readable` (a short spin first).
        """
        return wait_readable(self, timeout)

    # ------------------------------------------------------------------ state
    @property
    def closed(self) -> bool:
        """Whether the connection is gone (closed by either side, or failed)."""
        return self.failure is not None

    def fileno(self) -> int:
        """The socket's file descriptor (-1 once closed)."""
        return self.sock.fileno()

    @property
    def close_received(self) -> Any:
        """The server's close frame (``code``, ``reason``), or None if none came."""
        return self._proto.close_rcvd

    @property
    def wants_write(self) -> bool:
        """Whether bytes wait to be written (then :func:`wait` watches for writability)."""
        return bool(self._out)

    @property
    def buffered(self) -> bool:
        """Whether bytes were received that no one has parsed yet (TLS records)."""
        return self._tls and self.sock.pending() > 0  # type: ignore[attr-defined]

    def _lose(self, failure: ConnectionLostError | RemoteProtocolError) -> None:
        if self.failure is None:
            self.failure = failure
        self._out.clear()
        with contextlib.suppress(OSError):
            self.sock.close()

    def check(self) -> None:
        """Raise :attr:`failure` if the connection is gone."""
        if self.failure is not None:
            raise self.failure

    # ------------------------------------------------------------------ writing
    def queue(self, data: bytes | str) -> None:
        """Queue one message (``str``: a text frame, ``bytes``: binary). Next: :meth:`flush`."""
        self.check()
        if self._writes_frames():
            if isinstance(data, str):
                self._frame(0x1, data.encode())
            else:
                self._frame(0x2, data)
            return
        try:
            if isinstance(data, str):
                self._proto.send_text(data.encode())
            else:
                self._proto.send_binary(data)
        except InvalidState as exc:  # closing: the connection is as good as gone
            self._lose(self._closed_failure())
            raise self.failure from exc  # type: ignore[misc]
        self._take_output()

    def queue_ping(self, data: bytes) -> None:
        """Queue a ping carrying ``data`` (its pong comes back as a :class:`Pong`).

        Next: :meth:`flush`.
        """
        self.check()
        if len(data) <= 125 and self._writes_frames():  # longer: websockets refuses it
            self._frame(0x9, data)
            return
        try:
            self._proto.send_ping(data)
        except InvalidState as exc:  # closing: the connection is as good as gone
            self._lose(self._closed_failure())
            raise self.failure from exc  # type: ignore[misc]
        self._take_output()

    def _writes_frames(self) -> bool:
        """Whether a frame may be written here rather than by the protocol.

        websockets serialises a frame through a ``Frame`` and ``BytesIO`` and draws each
        masking key with a syscall; a JSON step writes two frames (ping and request), and
        that cost was most of what the ping added. An open connection without extensions
        keeps no state about the data frames it sends (we never fragment), and everything
        the protocol itself wrote (pongs, a close) was already taken into ``_out``.
        """
        proto = self._proto
        return self._plain and proto.state is State.OPEN and not proto.expect_continuation_frame

    def _frame(self, opcode: int, payload: bytes) -> None:
        """Queue one masked frame (RFC 6455 5.2): FIN, ``opcode``, ``payload``."""
        at = self._mask_at
        if at >= len(self._masks):
            self._masks, at = os.urandom(_MASKS), 0  # unpredictable keys, fewer syscalls
        mask = self._masks[at : at + 4]
        self._mask_at = at + 4
        out = self._out
        out += frame_head(opcode, len(payload), masked=True)
        out += mask
        out += apply_mask(payload, mask)

    def _take_output(self) -> None:
        for chunk in self._proto.data_to_send():
            if chunk:
                self._out += chunk
            else:
                self._eof_sent = True

    def flush(self) -> bool:
        """Write as much as the socket takes without blocking; True when all is written.

        Raises:
            ConnectionLostError: The socket is gone.
        """
        if self.failure is not None:  # lost: whatever was queued will never be written
            raise self.failure
        out = self._out
        while out:
            try:
                sent = self.sock.send(out)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return False
            except OSError as exc:
                self._lose(ConnectionLostError(f"connection to {self.url} lost: {exc}"))
                raise self.failure from exc  # type: ignore[misc]
            del out[:sent]
        if self._eof_sent and self.failure is None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)
        return True

    def send(self, data: bytes | str, deadline: float | None) -> None:
        """Queue one message and write it, waiting for the socket while needed.

        Raises:
            RequestTimeoutError: Not written by ``deadline`` (the connection is dropped).
            ConnectionLostError: The socket is gone.
        """
        self.queue(data)
        self.flush_by(deadline)

    def flush_by(self, deadline: float | None) -> None:
        """:meth:`flush` until everything is written, reading meanwhile (no deadlock).

        Raises:
            RequestTimeoutError: Not written by ``deadline`` (the connection is dropped).
            ConnectionLostError: The socket is gone.
        """
        while not self.flush():
            if not wait([self], deadline):
                self.abort()
                raise RequestTimeoutError(
                    f"could not write to {self.url} within the timeout; the connection is closed"
                )
            self.read()  # the peer may wait for us to read before it reads (no deadlock)

    # ------------------------------------------------------------------ reading
    def read(self) -> bool:
        """Read what the socket has, without blocking; parse it into :attr:`messages`.

        Answers pings (and a close frame) on the way. Returns whether any bytes came in.
        After the peer closes, :attr:`failure` is set (check it, or :meth:`check`).
        """
        if self.failure is not None:
            return False
        got = False
        while True:
            try:
                data = self.sock.recv(_READ_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError as exc:
                self._lose(ConnectionLostError(f"connection to {self.url} lost: {exc}"))
                return got
            got = True
            if not data:
                if self._rx_cut:  # a frame head cut short: websockets says what that means
                    self._proto.receive_data(self._rx_cut)
                    self._rx_cut = b""
                self._proto.receive_eof()
                self._harvest()
                self._lose(self._closed_failure())
                return True
            self._receive(data)
            if self.closed:
                return True
            if len(data) < _READ_SIZE and not self.buffered:
                break  # most likely drained: don't pay a recv that says EAGAIN
        return got

    def _receive(self, data: bytes) -> None:
        """Parse ``data``: complete plain frames here, every other byte by websockets.

        websockets' parser is a generator that costs about 2 µs a frame; a JSON step
        brings two small ones (the pong and the reply). A frame is parsed here when it is
        whole in this read and plain: final, no RSV bits, unmasked, a text, binary or pong
        frame of at most :data:`_FAST_MAX` bytes, not inside a fragmented message, on an
        open connection without extensions. Anything else (pings, closes, fragments,
        frames cut by the end of a read, anything malformed) goes to websockets in order,
        and this method keeps count of the frame websockets is inside, so it only ever
        parses from a frame boundary. A frame head cut by the end of a read waits for the
        next one.
        """
        proto = self._proto
        if not self._plain_rx:
            proto.receive_data(data)
            self._harvest()
            return
        if self._rx_cut:
            data, self._rx_cut = self._rx_cut + data, b""
        end = len(data)
        pos = slow = 0  # data[slow:pos] is websockets' to parse, before any frame here
        while pos < end:
            if self._rx_left:  # inside a frame websockets is parsing
                step = min(self._rx_left, end - pos)
                self._rx_left -= step
                pos += step
                continue
            head = parse_head(data, pos)
            if head is None:  # cut by the end of this read: wait for the rest
                self._rx_cut, end = data[pos:], pos
                break
            first, length, size = head
            second = data[pos + 1]  # its mask bit: not from a server (websockets refuses it)
            at = pos + size
            stop = at + length
            opcode = first & 0x0F
            fragmented = self._rx_fragmented
            if opcode in (0x1, 0x2):
                self._rx_fragmented = not first & 0x80
            elif opcode == 0x0 and first & 0x80:
                self._rx_fragmented = False
            if (
                first & 0xF0 == 0x80
                and not second & 0x80
                and stop <= end
                and length <= self._fast_max
                and ((opcode == 0xA and length < 126) or (opcode in (0x1, 0x2) and not fragmented))
            ):
                if slow < pos:  # websockets' frames first: they come before this one
                    proto.receive_data(data[slow:pos])
                    self._harvest()
                    slow = pos
                if self.failure is not None or proto.state is not State.OPEN:
                    self._plain_rx = False  # closing: websockets parses the rest, always
                    break
                if opcode == 0xA:
                    if self.track_pongs:
                        self.messages.append(Pong(data[at:stop]))
                else:
                    self._deliver(data[at:stop], opcode == 0x1)
                    if self.closed:  # not UTF-8
                        return
                pos = slow = stop
                continue
            if stop > end:
                self._rx_left = stop - end
            pos = min(stop, end)
        if slow < end and self.failure is None:
            proto.receive_data(data[slow:end])
            self._harvest()

    def _harvest(self, events: list[Any] | None = None) -> None:
        for frame in self._proto.events_received() if events is None else events:
            if not isinstance(frame, Frame):
                continue
            if self.failure is not None:  # e.g. a text frame that is not UTF-8: no more
                break
            opcode = frame.opcode
            if opcode is Opcode.BINARY or opcode is Opcode.TEXT or opcode is Opcode.CONT:
                try:
                    message = self._assembler.receive(opcode.value, frame.fin, frame.data)
                except FragmentError as exc:
                    self._refuse(exc)
                    break
                if message is not None:
                    self._deliver(message.data, message.text)
            elif opcode is Opcode.PONG and self.track_pongs:
                self.messages.append(Pong(bytes(frame.data)))
        self._take_output()  # pongs, the close reply
        if self._out:
            with contextlib.suppress(ConnectionLostError):
                self.flush()
        proto = self._proto
        if (
            proto.state is State.CLOSED
            or proto.close_rcvd is not None
            or proto.parser_exc is not None  # we failed it (a frame too big, a bad frame)
        ):
            self._lose(self._closed_failure())

    def _refuse(self, exc: FragmentError) -> None:
        """The server's fragments break a limit or their order: fail the connection."""
        with contextlib.suppress(InvalidState):
            self._proto.fail(exc.close_code, str(exc))  # our close frame says why
        self._take_output()
        with contextlib.suppress(ConnectionLostError):
            self.flush()
        self._lose(RemoteProtocolError(f"connection to {self.url} closed: the server sent {exc}"))

    def _deliver(self, data: bytes, text: bool) -> None:
        if not text:
            self.messages.append(data)
            return
        try:
            self.messages.append(data.decode())
        except UnicodeDecodeError as exc:
            self._lose(RemoteProtocolError(f"{self.url} sent a text frame that is not UTF-8"))
            logger.debug("bad UTF-8 from %s: %s", self.url, exc)

    def _closed_failure(self) -> ConnectionLostError:
        problem = self._proto.parser_exc
        if problem is not None and not isinstance(problem, EOFError):
            return ConnectionLostError(
                f"connection to {self.url} closed: the server sent what the client refuses "
                f"({problem})"
            )
        if self._closed_by_us:
            return ConnectionLostError(f"connection to {self.url} closed by the client")
        received = self._proto.close_rcvd
        how = f"received {received}" if received is not None else "no close frame received"
        return ConnectionLostError(f"connection to {self.url} closed by the server: {how}")

    def receive(self, deadline: float | None) -> bytes | str:
        """The next message, waiting for it until ``deadline``.

        Raises:
            RequestTimeoutError: Nothing came by ``deadline`` (the connection stays open:
                the caller decides whether that is fatal).
            ConnectionLostError: The connection closed before a message came.
        """
        messages = self.messages
        while True:
            while not messages:
                self.check()
                if not wait([self], deadline):
                    raise RequestTimeoutError(f"no reply from {self.url} within the timeout")
                self.read()
            message = messages.popleft()
            if not isinstance(message, Pong):
                return message

    # ------------------------------------------------------------------ closing
    def abort(self, why: str = "closed by the client") -> None:
        """Drop the socket at once, without a closing handshake. Idempotent.

        Args:
            why: What :attr:`failure` says (``connection to URL <why>``) unless it was
                already set.
        """
        self._closed_by_us = True
        self._lose(ConnectionLostError(f"connection to {self.url} {why}"))

    def interrupt(self) -> None:
        """From another thread: make a call blocked on this socket return now.

        Shuts the socket down; the blocked call sees the connection end (its
        :attr:`failure` says it was closed by the client). The socket is released by
        whoever holds :attr:`lock`, or by :meth:`close`.
        """
        self._closed_by_us = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self, timeout: float | None = 5.0) -> None:
        """Close politely (close frame, wait for the server's), else drop. Never raises."""
        if self.start_close():
            deadline = deadline_after(timeout)
            while self.failure is None and wait([self], deadline):
                self.continue_close()
        self.abort()

    def start_close(self) -> bool:
        """Start the closing handshake without blocking: write our close frame.

        Messages not taken yet are dropped (nobody will take them now). Returns whether
        the connection is still open: then call :meth:`continue_close` whenever
        :func:`~openenv_gym.transport.waiting.wait` says it is ready, until :attr:`closed`
        or your deadline, and :meth:`abort` it after. Never raises.
        """
        if self.failure is not None:
            return False
        self._closed_by_us = True
        self.messages.clear()
        try:
            self._proto.send_close()
            self._take_output()
            self.flush()
        except (ConnectionLostError, InvalidState):
            pass
        return self.failure is None

    def continue_close(self) -> None:
        """Write what is left of the closing handshake, read the peer's answer; no blocking.

        Never raises.
        """
        try:
            self.flush()
            self.read()
        except (ConnectionLostError, RemoteProtocolError):
            pass
        self.messages.clear()


def open_websocket(
    url: str,
    *,
    subprotocols: Sequence[str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = 10.0,
    max_size: int = MAX_MESSAGE,
) -> WebSocket:
    """Connect to ``url`` (``ws://`` or ``wss://``) and complete the upgrade.

    See :func:`~openenv_gym.transport.handshake.upgrade` (redirects, proxies, TLS).

    Raises:
        HandshakeRefused: The server answered with an HTTP status (e.g. 403, 404).
        ConnectError: Unreachable, TLS failure, a bad URL, a malformed handshake, or
            nothing within ``timeout``.
    """
    opened = upgrade(
        url,
        subprotocols=subprotocols,
        headers=headers,
        deadline=deadline_after(timeout),
        max_size=max_size,
    )
    ws = WebSocket(opened.sock, opened.protocol, opened.url)
    ws.idle_timeout = opened.idle_timeout
    if opened.more:  # websockets may have the start of a frame: it parses everything
        ws._plain_rx = False
    if opened.events:  # frames that came with the handshake response (an error, a close...)
        ws._harvest(opened.events)
    return ws
