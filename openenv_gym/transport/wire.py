"""A client WebSocket driven on the caller's own thread: websockets' sans-I/O protocol, a socket.

Every call of the package that talks to a server runs its socket I/O right here, on the
thread that made the call: frames are written with ``send``, replies read when
:func:`wait_readable` says so, and nothing hops to another thread on the way. On the
2-core machines this project is measured on, a round trip through an event-loop thread
costs about 150 µs more than the same round trip on the caller's thread (two cross-CPU
wake-ups), more than a whole batched step of 64 Echo envs; see ``docs/architecture.md``.

* :func:`open_websocket` connects (TCP, optional HTTP ``CONNECT`` proxy, TLS, the upgrade
  handshake) and returns a :class:`WebSocket`.
* :class:`WebSocket` queues frames (:meth:`~WebSocket.queue`), writes them without
  blocking (:meth:`~WebSocket.flush`), and turns bytes from the socket into whole messages
  (:meth:`~WebSocket.read`); pings are answered as they are read.
* :func:`wait` blocks until any of several sockets is readable (or writable, when it has
  bytes left to write), or a deadline passes. It is the only place that blocks.
* Pings of our own (:meth:`~WebSocket.queue_ping`) come back as :class:`Pong` markers in
  :attr:`~WebSocket.messages`, in order with the data messages, when
  :attr:`~WebSocket.track_pongs` is set: the JSON session uses them as barriers.
* Idle connections still answer pings: :mod:`openenv_gym.transport.keepalive` reads them
  from a background thread, every few seconds, whenever no call is using them.

Every third-party exception is converted here, once, to :mod:`openenv_gym.exceptions`.

One cohesive concern, over 600 lines: one client WebSocket on the caller's thread
(opening it, framing, reading, waiting), the single place where the client blocks.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import logging
import math
import os
import select
import selectors
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidState, InvalidStatus, InvalidURI
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - websockets built without its C extension
    from websockets.utils import apply_mask

from openenv_gym._version import __version__
from openenv_gym.exceptions import (
    AuthenticationError,
    ConnectError,
    ConnectionLostError,
    RemoteProtocolError,
    RequestTimeoutError,
)
from openenv_gym.protocol.frames import frame_head, parse_head

__all__ = [
    "MAX_MESSAGE",
    "HandshakeRefused",
    "Pong",
    "WebSocket",
    "deadline_after",
    "open_websocket",
    "remaining",
    "wait",
    "ws_url",
]

logger = logging.getLogger("openenv_gym.transport")

MAX_MESSAGE = 100 * 2**20
"""Largest message accepted (the official client's receive cap, 100 MB)."""

_READ_SIZE = 256 * 1024
_poll = getattr(select, "poll", None)
_POLLIN = getattr(select, "POLLIN", 1)
_POLLOUT = getattr(select, "POLLOUT", 4)
_MAX_REDIRECTS = 3
_MASKS = 1024
"""Bytes of masking keys drawn from ``os.urandom`` at once (256 frames' worth)."""
_FAST_MAX = 2**20
"""Largest frame parsed by :meth:`WebSocket._receive` itself (longer: websockets parses it)."""
USER_AGENT = f"openenv-gym/{__version__}"
_SPIN_DEFAULT = 1e-3
_SPIN_MAX = 0.01
_WAIT_EWMA_GAIN = 0.25


class HandshakeRefused(ConnectError):
    """The server answered the upgrade request with an HTTP status instead of ``101``.

    Attributes:
        status: The HTTP status code.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Pong:
    """A pong received, kept in :attr:`WebSocket.messages` among the data messages.

    Only when :attr:`WebSocket.track_pongs` is set. The peer answers a ping when it reads
    it, so what came before the pong was sent before the peer read what followed the ping.

    Attributes:
        data: The pong's payload (the ping's).
    """

    data: bytes


def ws_url(base_url: str, path: str) -> str:
    """``http(s)://host[:port][/prefix]`` (or ws(s)://, or bare host) -> ``ws(s)://.../path``."""
    url = base_url.strip().rstrip("/")
    for http_scheme, ws_scheme in (("https://", "wss://"), ("http://", "ws://")):
        if url.startswith(http_scheme):
            url = ws_scheme + url[len(http_scheme) :]
    if "://" not in url:
        url = "ws://" + url
    return url + path


def deadline_after(seconds: float | None) -> float | None:
    """The ``time.monotonic()`` instant ``seconds`` from now (None: no deadline)."""
    return None if seconds is None else time.monotonic() + seconds


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (never negative; None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


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
    """

    def __init__(self, sock: socket.socket, protocol: ClientProtocol, url: str) -> None:
        self.sock = sock
        self.url = url
        self.subprotocol: str | None = protocol.subprotocol
        self.messages: collections.deque[bytes | str | Pong] = collections.deque()
        self.track_pongs = False
        self.lock = threading.RLock()
        self.failure: ConnectionLostError | RemoteProtocolError | None = None
        self.last_used = time.monotonic()
        self._proto = protocol
        self._out = bytearray()
        self._fragments: list[bytes] = []
        self._fragment_text = False
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
        self._wait_ewma = 0.0  # moving average of recent waits for bytes, s (wait_readable)
        sock.setblocking(False)

    # ------------------------------------------------------------------ waiting
    def wait_readable(self, timeout: float | None) -> bool:
        """Block until the socket has bytes to read (True) or ``timeout`` s pass (False).

        A reply that usually comes within :data:`SPIN_S` is waited for by polling without
        sleeping, up to that long, before blocking: a loopback round trip of a small
        request is then no longer two sleeps and two cross-core wake-ups (measured on a
        2-core VM: Echo N=1 p50 283 -> 210 µs), and the work on the reply runs on a core
        that did not go idle (after a 0.7 ms sleep the same 53 KB reply took 70 µs to
        decode instead of 39 there; a 64-game Wordle step got ~10 % faster with 1 ms).
        Whether to spin follows a moving average of this socket's recent waits, so waits
        longer than the budget (a large batch, a slow env, a remote server) block at once
        and spend no CPU spinning.
        """
        start = time.perf_counter()
        spin = SPIN_S if self._wait_ewma < SPIN_S else 0.0
        if timeout is not None:
            spin = min(spin, timeout)
        if spin > 0.0 and _spin_readable(self.sock, start + spin):
            ready = True
        else:
            left = None if timeout is None else max(0.0, timeout - (time.perf_counter() - start))
            ready = _wait_one(self.sock, selectors.EVENT_READ, left)
        if ready:
            waited = time.perf_counter() - start
            self._wait_ewma += (waited - self._wait_ewma) * _WAIT_EWMA_GAIN
        return ready

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
            if opcode is Opcode.BINARY or opcode is Opcode.TEXT:
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
    def abort(self) -> None:
        """Drop the socket at once, without a closing handshake. Idempotent."""
        self._closed_by_us = True
        self._lose(ConnectionLostError(f"connection to {self.url} closed by the client"))

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
        if self.failure is not None:
            return
        self._closed_by_us = True
        deadline = deadline_after(timeout)
        try:
            self._proto.send_close()
            self._take_output()
            self.flush_by(deadline)
            while self.failure is None:
                if not wait([self], deadline):
                    break
                self.read()
        except (ConnectionLostError, RequestTimeoutError, RemoteProtocolError, InvalidState):
            pass
        self.abort()


# ---------------------------------------------------------------------- waiting


def wait(sockets: Sequence[WebSocket], deadline: float | None) -> bool:
    """Block until one of ``sockets`` can make progress, or ``deadline`` passes.

    Progress: bytes to read (or buffered TLS bytes), or room to write for a socket with
    bytes left to write. Returns False on timeout. Closed sockets count as ready (their
    :meth:`WebSocket.read` reports the end at once).
    """
    for ws in sockets:
        if ws.failure is not None or ws.buffered or ws.messages:
            return True
    timeout = remaining(deadline)
    if len(sockets) == 1:
        ws = sockets[0]
        if ws.wants_write:
            return _wait_one(ws.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, timeout)
        return ws.wait_readable(timeout)
    with selectors.DefaultSelector() as selector:
        for ws in sockets:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if ws.wants_write else 0)
            with contextlib.suppress(ValueError, KeyError, OSError):
                selector.register(ws.sock, events)
        return bool(selector.select(timeout))


def _spin_budget(environ: Mapping[str, str]) -> float:
    """:data:`SPIN_S` from ``OPENENV_GYM_SPIN_US`` (µs, default 1000; 0 turns spinning off).

    One usable CPU: never (a spinning client would hold the core the server needs).
    """
    raw = environ.get("OPENENV_GYM_SPIN_US", "").strip()
    try:
        budget = float(raw) * 1e-6 if raw else _SPIN_DEFAULT
    except ValueError:
        logger.warning("OPENENV_GYM_SPIN_US=%r is not a number: using the default", raw)
        budget = _SPIN_DEFAULT
    if not math.isfinite(budget) or budget < 0.0:
        logger.warning("OPENENV_GYM_SPIN_US=%r is out of range: spinning is off", raw)
        budget = 0.0
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return min(budget, _SPIN_MAX) if cpus > 1 else 0.0


SPIN_S = _spin_budget(os.environ)
"""How long a wait for a reply polls without sleeping first, s (``OPENENV_GYM_SPIN_US``)."""


def _spin_readable(sock: socket.socket, until: float) -> bool:
    """Poll ``sock`` without sleeping until it is readable (True) or ``until`` (False)."""
    if _poll is None:  # pragma: no cover - Windows: no poll()
        return False
    poller = _poll()
    try:
        poller.register(sock, _POLLIN)
    except (ValueError, OSError):  # closed under us: report it as ready
        return True
    clock = time.perf_counter
    while True:
        if poller.poll(0):
            return True
        if clock() >= until:
            return False


def _wait_one(sock: socket.socket, events: int, timeout: float | None) -> bool:
    if _poll is None:  # pragma: no cover - Windows: no poll()
        writers = [sock] if events & selectors.EVENT_WRITE else []
        readable, writable, _ = select.select([sock], writers, [], timeout)
        return bool(readable or writable)
    poller = _poll()
    mask = _POLLIN | (_POLLOUT if events & selectors.EVENT_WRITE else 0)
    try:
        poller.register(sock, mask)
    except (ValueError, OSError):  # closed under us: report it as ready
        return True
    try:
        return bool(poller.poll(None if timeout is None else timeout * 1000.0))
    except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
        return True


# ---------------------------------------------------------------------- opening


def open_websocket(
    url: str,
    *,
    subprotocols: Sequence[str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = 10.0,
    max_size: int = MAX_MESSAGE,
) -> WebSocket:
    """Connect to ``url`` (``ws://`` or ``wss://``) and complete the upgrade.

    Follows up to three redirects. For a non-loopback host, the proxy from the usual
    environment variables (``https_proxy``, ``http_proxy``, ``no_proxy``) is used when it
    is an HTTP proxy.

    Raises:
        HandshakeRefused: The server answered with an HTTP status (e.g. 403, 404).
        ConnectError: Unreachable, TLS failure, a bad URL, a malformed handshake, or
            nothing within ``timeout``.
    """
    deadline = deadline_after(timeout)
    for _ in range(_MAX_REDIRECTS + 1):
        try:
            return _open_once(url, subprotocols, headers, deadline, max_size)
        except _Redirect as redirect:
            url = redirect.location
    raise ConnectError(f"too many redirects opening {url}")


class _Redirect(Exception):
    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


def _open_once(
    url: str,
    subprotocols: Sequence[str] | None,
    headers: Mapping[str, str] | None,
    deadline: float | None,
    max_size: int,
) -> WebSocket:
    try:
        wsuri = parse_uri(url)
    except (InvalidURI, ValueError) as exc:
        raise ConnectError(f"cannot connect to {url}: {exc}") from exc
    protocol = ClientProtocol(
        wsuri,
        subprotocols=[Subprotocol(s) for s in subprotocols] if subprotocols else None,
        max_size=max_size,
    )
    sock = _connect_socket(wsuri.host, wsuri.port, wsuri.secure, url, deadline)
    try:
        request = protocol.connect()
        request.headers["User-Agent"] = USER_AGENT
        for name, value in (headers or {}).items():
            if name in request.headers:
                del request.headers[name]
            request.headers[name] = value
        protocol.send_request(request)
        _send_all(sock, b"".join(protocol.data_to_send()), deadline, url)
        response, leftover, more = _read_response(sock, protocol, deadline, url)
    except BaseException:
        with contextlib.suppress(OSError):
            sock.close()
        raise
    if protocol.handshake_exc is not None or response is None or response.status_code != 101:
        with contextlib.suppress(OSError):
            sock.close()
        status = response.status_code if response is not None else 0
        if status in (301, 302, 303, 307, 308) and response is not None:
            location = response.headers.get("Location")
            if location:
                http_url = "http" + url[2:]  # ws(s):// -> http(s)://, for urljoin
                raise _Redirect(ws_url(urllib.parse.urljoin(http_url, location), ""))
        problem = protocol.handshake_exc
        if status == 401:
            raise AuthenticationError(
                f"{url}: the server refused the WebSocket upgrade (HTTP 401: missing or wrong "
                "token; pass token= or set OPENENV_GYM_TOKEN)"
            ) from problem
        if isinstance(problem, InvalidStatus) or (status and status != 101):
            raise HandshakeRefused(
                f"{url}: the server refused the WebSocket upgrade (HTTP {status})", status
            ) from problem
        raise ConnectError(f"cannot connect to {url}: {problem}") from problem
    ws = WebSocket(sock, protocol, url)
    if more:  # websockets may have the start of a frame: it parses everything
        ws._plain_rx = False
    if leftover:  # frames that came with the handshake response (an error, a close...)
        ws._harvest(leftover)
    return ws


def _connect_socket(
    host: str, port: int, secure: bool, url: str, deadline: float | None
) -> socket.socket:
    proxy = None if _is_loopback(host) else _proxy_for(url)
    try:
        if proxy is None:
            sock = socket.create_connection((host, port), timeout=remaining(deadline))
        else:
            sock = _tunnel(proxy, host, port, deadline, url)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if secure:
            context = ssl.create_default_context()
            sock.settimeout(remaining(deadline))
            sock = context.wrap_socket(sock, server_hostname=host)
    except TimeoutError as exc:
        raise ConnectError(f"connecting to {url} timed out") from exc
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConnectError(f"cannot connect to {url}: {exc}") from exc
    return sock


def _proxy_for(url: str) -> str | None:
    """The HTTP proxy the environment asks for ``url``, if any (SOCKS is refused)."""
    http_url = "https" + url[3:] if url.startswith("wss") else "http" + url[2:]
    host = urllib.parse.urlsplit(http_url).hostname or ""
    if urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    scheme = "https" if url.startswith("wss") else "http"
    proxy = proxies.get(scheme) or proxies.get("all")
    if proxy is None:
        return None
    if "://" not in proxy:  # host:port, as curl and requests read it
        proxy = "http://" + proxy
    if not proxy.startswith("http://"):
        raise ConnectError(
            f"the proxy {proxy!r} for {url} is not an http:// proxy; openenv-gym tunnels "
            "through HTTP CONNECT proxies only (set no_proxy for this host to go direct)"
        )
    return proxy


def _tunnel(proxy: str, host: str, port: int, deadline: float | None, url: str) -> socket.socket:
    parts = urllib.parse.urlsplit(proxy)
    sock = socket.create_connection(
        (parts.hostname or "", parts.port or 80), timeout=remaining(deadline)
    )
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}", f"User-Agent: {USER_AGENT}"]
    if parts.username is not None:
        credentials = f"{urllib.parse.unquote(parts.username)}:"
        credentials += urllib.parse.unquote(parts.password or "")
        lines.append(
            f"Proxy-Authorization: Basic {base64.b64encode(credentials.encode()).decode()}"
        )
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        sock.settimeout(remaining(deadline))
        chunk = sock.recv(4096)
        if not chunk or len(head) > 65536:
            sock.close()
            raise ConnectError(f"proxy {proxy} closed the tunnel to {url}")
        head += chunk
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or status_line[1] != b"200":
        sock.close()
        raise ConnectError(f"proxy {proxy} refused the tunnel to {url}: {head[:80]!r}")
    return sock


def _send_all(sock: socket.socket, data: bytes, deadline: float | None, url: str) -> None:
    try:
        sock.settimeout(remaining(deadline))
        sock.sendall(data)
    except TimeoutError as exc:
        raise ConnectError(f"connecting to {url} timed out") from exc
    except OSError as exc:
        raise ConnectError(f"cannot connect to {url}: {exc}") from exc


def _read_response(
    sock: socket.socket, protocol: ClientProtocol, deadline: float | None, url: str
) -> tuple[Response | None, list[Any], bool]:
    """The response, the frames that came with it, and whether any bytes did."""
    received = bytearray()
    while True:
        try:
            sock.settimeout(remaining(deadline))
            data = sock.recv(_READ_SIZE)
        except TimeoutError as exc:
            raise ConnectError(f"connecting to {url} timed out") from exc
        except OSError as exc:
            raise ConnectError(f"cannot connect to {url}: {exc}") from exc
        if data:
            protocol.receive_data(data)
            received += data
        else:
            protocol.receive_eof()
        events = protocol.events_received()
        for k, event in enumerate(events):
            if isinstance(event, Response):
                more = len(received) > received.find(b"\r\n\r\n") + 4  # no body after a 101
                return event, events[k + 1 :], more
        failed = protocol.handshake_exc
        if failed is not None:  # not an HTTP response at all
            raise ConnectError(f"{url} did not answer with HTTP: {failed}") from failed
        if not data:
            raise ConnectError(f"{url} closed the connection during the handshake")


def readable(sockets: Iterable[WebSocket]) -> list[WebSocket]:
    """The sockets that have something to read now (no blocking)."""
    return [ws for ws in sockets if ws.buffered or _wait_one(ws.sock, selectors.EVENT_READ, 0)]
