"""The WebSocket side of a server connection: frames in, whole messages to a channel, replies out.

After the upgrade (:mod:`openenv_gym.runtime.http`), a connection's bytes go to one
:class:`WebSocketStream`: websockets' sans-I/O ``ServerProtocol`` parses frames, except
where this module reads them itself (RFC 6455 5.2, heads by :mod:`openenv_gym.protocol.frames`):

* a read that is exactly one small final text or binary frame (the usual batched request)
  is unmasked and handed to the channel here, without websockets' frame parser;
* a data frame over :data:`~openenv_gym.runtime.interfaces.MESSAGE_HEAD` bytes (unfragmented,
  uncompressed, within ``max_frame``) is unmasked piece by piece as it arrives, never
  buffered whole, and may be answered from its first bytes (``Channel.on_message_head``),
  the rest then dropped unread.

Replies are framed here too (unmasked, one write for what a read produced). The stream
also keeps the connection's WebSocket timers: the idle timeout (only messages count) and
pings. A message is never a reason to fail the connection: a text message whose bytes are
not UTF-8 goes to the channel's ``on_invalid_text`` (RFC 6455 would fail it with 1007).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from websockets.exceptions import InvalidState
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request as WsRequest
from websockets.http11 import Response as WsResponse
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from openenv_gym.protocol.fragments import FragmentAssembler, FragmentError
from openenv_gym.protocol.frames import frame_head, frame_header, small_frames, whole_data_frame
from openenv_gym.protocol.upgrade import IDLE_TIMEOUT_HEADER, KEEPALIVE_HEADER
from openenv_gym.runtime.interfaces import MESSAGE_HEAD, Channel, Limits, Socket

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - websockets built without its C extension
    from websockets.utils import apply_mask

__all__ = ["FRAMES_PER_TURN", "IDLE_TIMEOUT_HEADER", "KEEPALIVE_HEADER", "Link", "WebSocketStream"]

logger = logging.getLogger("openenv_gym.runtime")

_HOLD_BYTES = 256 * 1024
"""Replies held for the one write at the end of a read, at most (bytes); then written."""
_LINGER = 1.0
"""Seconds a connection we failed stays open, dropping what the peer sends (see _fail)."""
FRAMES_PER_TURN = 64
"""Frames of one connection handled before other connections get a turn of the loop."""
_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


class Link(Protocol):
    """The TCP connection under a stream, as the stream uses it.

    :class:`openenv_gym.runtime.http.Connection` is one.

    Attributes:
        limits: The server's limits.
        loop: The event loop.
        closed: The connection is gone (or going): write nothing more.
        writable: The peer takes what is written (False: the send buffer is full).
    """

    limits: Limits
    loop: asyncio.AbstractEventLoop
    closed: bool
    writable: bool

    def write(self, data: bytes) -> None:
        """Write ``data``."""

    def abort(self) -> None:
        """Drop the connection now."""

    def close_after_writing(self) -> None:
        """Close once what is written has gone."""

    def pause_reading(self, why: str) -> None:
        """Stop reading until every ``why`` that paused it resumes it."""

    def resume_reading(self, why: str) -> None:
        """Read again, unless another reason still holds it."""

    def wait_writable(self) -> Awaitable[None]:
        """Wait until :attr:`writable` (or the connection is gone)."""


class WebSocketStream:
    """One connection after its upgrade (see the module docstring).

    Args:
        connection: The TCP connection under it.
        subprotocol: The subprotocol the app chose, or None.
        pings_count: The client asked for its pings to count as activity
            (:data:`KEEPALIVE_HEADER`); otherwise only its messages do.
    """

    def __init__(
        self, connection: Link, subprotocol: str | None, *, pings_count: bool = False
    ) -> None:
        self.connection = connection
        self.pings_count = pings_count
        """Whether the client's pings are activity for the idle timeout (its opt-in)."""
        limits = self.limits = connection.limits
        self.loop = connection.loop
        self.protocol = ServerProtocol(
            subprotocols=[Subprotocol(subprotocol)] if subprotocol else None,
            select_subprotocol=(lambda _p, _offered: Subprotocol(subprotocol))
            if subprotocol
            else None,
            max_size=limits.max_frame,
            extensions=[ServerPerMessageDeflateFactory()] if limits.compression else None,
        )
        self.channel: Channel | None = None
        self._assembler = FragmentAssembler(limits.max_frame, limits.max_fragments)
        self._backlog = b""  # the rest of a read, handled on the next turn (see _defer)
        self._failed = False  # failed by us (_fail): what the peer sends is dropped
        # the receive path splits the peer's bytes at frame boundaries (see receive)
        self._rx_cut = b""  # the start of a frame header, cut by the end of a read
        self._rx_pass = 0  # bytes of the current frame still to give websockets' parser
        self._rx_fragmented = False  # a fragmented message is under way
        self._rx_message: _LargeMessage | None = None  # a large message read here
        self._timer: asyncio.TimerHandle | None = None  # the idle timeout
        self._seen = 0.0  # loop time of the last WebSocket message (see _idle_expired)
        self._ping_timer: asyncio.TimerHandle | None = None
        self._ping_waiter: bytes | None = None
        self._holding = False  # handling received frames: replies wait for one write
        self._held = 0  # bytes of messages queued while holding
        self._out: list[bytes] = []  # frames serialised here, to write before the protocol's

    # ------------------------------------------------------------------ life
    def accept(self, head: bytes, make_channel: Callable[[Socket], Channel]) -> bool:
        """Answer the upgrade request ``head``; on success open the channel.

        Returns:
            Whether the upgrade was accepted (False: close; a refusal is written).
        """
        protocol = self.protocol
        protocol.receive_data(head)
        events = protocol.events_received()
        if not events or not isinstance(events[0], WsRequest):  # cannot happen: h11 read it
            return False
        response = protocol.accept(events[0])
        if isinstance(response, WsResponse):
            response.headers["Server"] = self.limits.server_name
            timeout = self.limits.idle_timeout
            response.headers[IDLE_TIMEOUT_HEADER] = "none" if timeout is None else f"{timeout:g}"
        protocol.send_response(response)
        if response.status_code != 101:
            self.flush()
            return False
        self._seen = self.loop.time()
        self._arm(self.limits.idle_timeout)
        self._schedule_ping()
        self.channel = make_channel(_Socket(self))
        self.flush()
        return True

    def receive_eof(self) -> None:
        """The peer closed its side: tell the protocol, write what it answers."""
        self.protocol.receive_eof()
        self.flush()

    def finish(self) -> None:
        """The connection is gone: stop the timers, free what was read, close the channel."""
        self._rx_message = None  # what was read of a large message goes now
        for timer in (self._timer, self._ping_timer):
            if timer is not None:
                timer.cancel()
        channel, self.channel = self.channel, None
        if channel is not None:
            try:
                channel.on_close()
            except Exception:
                logger.exception("closing a channel failed")

    def shutdown(self) -> bool:
        """Server closing: a ``1001 going away``. False: no channel is open (drop it)."""
        if self.channel is None:
            return False
        self.close(CloseCode.GOING_AWAY, "server shutting down")
        return True

    def _arm(self, seconds: float | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None if seconds is None else self.loop.call_later(seconds, self._idle_expired)

    # ------------------------------------------------------------------ receiving
    def receive(self, data: bytes) -> None:
        """Give websockets' parser the peer's bytes, except large data frames (read here).

        The bytes are split at frame boundaries; frames before a large one are handled
        before it, so messages keep their order. See :data:`MESSAGE_HEAD`. At most
        :data:`FRAMES_PER_TURN` frame heads of it are handled now; the rest of the read waits
        for the loop's next turn, reading paused (:meth:`_defer`).
        """
        if self._backlog or self._failed:
            if not self._failed:  # reading is paused until it is handled: cannot happen, but
                self._backlog += data
            return
        if self._rx_message is None:
            if self._rx_pass >= len(data):  # inside a frame
                self._rx_pass -= len(data)
                self._frames(data)
                return
            if not self._rx_pass and not self._rx_cut:
                start = whole_data_frame(data)
                if start and self._parser_idle():  # a batched request: one data frame
                    self._message(data, start)
                    return
                # the usual read: one whole small masked frame (a JSON client's request
                # comes behind its ping: two)
                scanned = small_frames(data, self._rx_fragmented, FRAMES_PER_TURN)
                if scanned is not None:
                    end, self._rx_fragmented = scanned
                    if end == len(data):
                        self._frames(data)
                        return
                    self._frames(data[:end])
                    self._defer(data[end:])
                    return
        if self._rx_cut:
            data, self._rx_cut = self._rx_cut + data, b""
        view = memoryview(data)
        end = len(data)
        pos = run = heads = 0  # bytes from `run` to `pos` are websockets', not given yet
        rest = b""
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
                if self.connection.closed:
                    return
                continue
            if self._rx_pass:
                n = min(self._rx_pass, end - pos)
                self._rx_pass -= n
                pos += n
                continue
            if heads == FRAMES_PER_TURN:  # the rest on the next turn
                rest, end = bytes(view[pos:]), pos
                break
            heads += 1
            header = frame_header(view, pos)
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
                    self._frames(bytes(view[run:pos]) if run or pos < len(data) else data)
                    run = pos
                protocol = self.protocol
                if self.connection.closed:
                    return
                if protocol.state is State.OPEN and self.channel is not None:
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
            self._frames(bytes(view[run:end]) if run or end < len(data) else data)
        if rest:
            self._defer(rest)

    def _defer(self, rest: bytes) -> None:
        """Handle ``rest`` of a read on the loop's next turn: other connections go first."""
        if self.connection.closed:
            return
        self._backlog = rest
        self.connection.pause_reading("turn")
        self.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        rest, self._backlog = self._backlog, b""
        if self.connection.closed:
            return
        self.receive(rest)
        if not self._backlog:
            self.connection.resume_reading("turn")

    def _offer_head(self, message: _LargeMessage) -> None:
        """The message's first bytes have arrived: may the channel answer from them?"""
        message.asked = True
        hook = getattr(self.channel, "on_message_head", None)
        if hook is None:
            return
        try:
            answered = hook(bytes(message.buf[:MESSAGE_HEAD]), message.size)
        except Exception:
            logger.exception("a channel failed on a message's first bytes")
            self.close(CloseCode.INTERNAL_ERROR, "internal error")
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
                self.flush()
                return
        self._deliver(data, message.text)
        self.flush()

    def _parser_idle(self) -> bool:
        """Whether a data frame may skip websockets' parser: open, plain, no message under way.

        Then the frame changes nothing in the protocol's state (websockets keeps none for
        a final data frame), so handling it here is handling it there.
        """
        protocol = self.protocol
        return (
            protocol.state is State.OPEN
            and not protocol.extensions
            and not self._rx_fragmented
            and not self._assembler.under_way
        )

    def _message(self, frame: bytes, start: int) -> None:
        """One whole data frame, its payload at ``start`` (:func:`whole_data_frame`)."""
        if len(frame) - start > self.limits.max_frame:
            self._frames(frame)  # websockets refuses it (1009)
            return
        payload = apply_mask(frame[start:], frame[start - 4 : start])
        self._hold(self._deliver, payload, frame[0] == 0x81)  # a final text frame

    def _frames(self, data: bytes) -> None:
        """Feed websockets' parser; handle the frames it completes."""
        protocol = self.protocol
        protocol.receive_data(data)
        self._hold(self._handle_frames, protocol.events_received())

    def _hold(self, handle: Callable[..., None], *args: Any) -> None:
        """``handle(*args)``, then one write of what it produced.

        What the frames of one read produce (pongs, replies) leaves in one write: one
        syscall and one TCP segment, not one per frame (see send).
        """
        self._holding = True
        try:
            handle(*args)
        finally:
            self._holding = False
            self._held = 0
        self.flush()

    def _handle_frames(self, events: list[Any]) -> None:
        for frame in events:
            if not isinstance(frame, Frame):
                continue
            opcode = frame.opcode
            if opcode in _DATA:
                try:
                    message = self._assembler.receive(opcode.value, frame.fin, frame.data)
                except FragmentError as exc:
                    self._fail(exc.close_code, str(exc))
                    return
                if message is not None:
                    self._deliver(message.data, message.text)
            elif opcode is Opcode.PING and self.pings_count:  # the client's keepalive
                self._seen = self.loop.time()
            elif (
                opcode is Opcode.PONG
                and self._ping_waiter is not None
                and bytes(frame.data) == self._ping_waiter
            ):
                self._ping_waiter = None
            if self.connection.closed:
                return
        if self.protocol.close_expected():
            self.flush()

    def _deliver(self, data: bytes | str, text: bool) -> None:
        """Hand a whole message to the channel (``data`` may be text already decoded)."""
        self._seen = self.loop.time()  # the idle timer is not re-armed per message
        channel = self.channel
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
            self.close(CloseCode.INTERNAL_ERROR, "internal error")

    def flush(self) -> None:
        """Write what is queued (here, then by the protocol), in one write."""
        chunks = self.protocol.data_to_send()
        if self._out:
            chunks, self._out = self._out + chunks, []
        if not chunks:
            return
        if len(chunks) == 1 and chunks[0]:
            self.connection.write(chunks[0])
            return
        out: list[bytes] = []
        for data in chunks:
            if data:
                out.append(data)
                continue
            if out:  # then the protocol asks to close the TCP connection
                self._write_joined(out)
            self.connection.close_after_writing()
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
                self.connection.write(small[0] if len(small) == 1 else b"".join(small))
                small = []
            self.connection.write(data)
        if small:
            self.connection.write(small[0] if len(small) == 1 else b"".join(small))

    def send(self, message: bytes | str) -> None:
        """Send a message (bytes: binary, str: text); held for the read's one write."""
        protocol = self.protocol
        if self.connection.closed:
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
        self.flush()

    def close(self, code: int, reason: str) -> None:
        """Start the closing handshake; the peer has 5 s to answer before the drop."""
        protocol = self.protocol
        if self.connection.closed:
            return
        with contextlib.suppress(InvalidState):
            protocol.send_close(code, reason)
        self.flush()
        self.loop.call_later(5.0, self.connection.abort)  # the peer has this long to answer

    def _fail(self, code: int, reason: str) -> None:
        """Fail the connection (RFC 6455 7.1.7): a close frame, then the TCP connection closes.

        Nothing more the peer sends is handled: its bytes are dropped as they come, for
        :data:`_LINGER` seconds, then the connection closes. Closing at once, with the
        peer's bytes unread, would reset the connection and could lose the close frame.
        """
        logger.info("WebSocket failed: %s (%d)", reason, code)
        self.protocol.fail(code, reason)
        self._failed = True
        self._backlog = b""
        self.connection.resume_reading("turn")
        self.connection.write(b"".join(self._out + self.protocol.data_to_send()))
        self._out = []
        self.loop.call_later(_LINGER, self.connection.close_after_writing)

    def _idle_expired(self) -> None:
        timeout = self.limits.idle_timeout
        assert timeout is not None
        left = self._seen + timeout - self.loop.time()
        if left > 0:  # a message came since the timer was armed: wait for the rest
            self._arm(left)
            return
        logger.info("WebSocket closed: idle for %s s", self.limits.idle_timeout)
        self.close(CloseCode.GOING_AWAY, "idle timeout")

    def _schedule_ping(self) -> None:
        interval = self.limits.ping_interval
        if interval is not None:
            self._ping_timer = self.loop.call_later(interval, self._ping)

    def _ping(self) -> None:
        protocol = self.protocol
        if self.connection.closed:
            return
        if self._ping_waiter is not None:
            return  # the previous one is still unanswered: its timeout decides
        self._ping_waiter = os.urandom(4)
        with contextlib.suppress(InvalidState):
            protocol.send_ping(self._ping_waiter)
        self.flush()
        timeout = self.limits.ping_timeout
        if timeout is not None:
            waiter = self._ping_waiter
            self.loop.call_later(timeout, self._pong_expired, waiter)
        self._schedule_ping()

    def _pong_expired(self, waiter: bytes) -> None:
        if self._ping_waiter is waiter and not self.connection.closed:
            logger.info("WebSocket dropped: no pong within %s s", self.limits.ping_timeout)
            self.connection.abort()


class _Socket:
    """The :class:`Socket` a channel gets: a thin view of its connection."""

    __slots__ = ("_stream",)

    def __init__(self, stream: WebSocketStream) -> None:
        self._stream = stream

    def send(self, message: bytes | str) -> None:
        """Send a message (bytes: binary, str: text); held for the read's one write."""
        self._stream.send(message)

    def close(self, code: int = 1000, reason: str = "") -> None:
        self._stream.close(code, reason)

    @property
    def writable(self) -> bool:
        connection = self._stream.connection
        return connection.writable and not connection.closed

    @property
    def closed(self) -> bool:
        return self._stream.connection.closed

    def wait_writable(self) -> Awaitable[None]:
        return self._stream.connection.wait_writable()

    def pause_reading(self) -> None:
        self._stream.connection.pause_reading("channel")

    def resume_reading(self) -> None:
        self._stream.connection.resume_reading("channel")


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
