"""WebSocket messages from their frames (RFC 6455 5.4), within limits: sans-I/O, for both ends.

A data message may come in fragments: a text or binary frame without FIN, then
continuation frames, the last with FIN. :class:`FragmentAssembler` joins them and holds
each message to two limits, counted as each frame arrives, before anything is joined:

* ``max_fragments`` frames per message (:data:`DEFAULT_MAX_FRAGMENTS`); an empty
  continuation frame counts like any other, so a peer cannot keep a message open forever
  for free;
* ``max_size`` bytes per message, fragments together (a server's ``max_frame``).

A message over either limit raises :class:`FragmentError` with close code 1009 ("message
too big"); a continuation frame with no message under way, or a new message before the
last one ended, raises it with 1002 ("protocol error"). Either way the caller fails the
connection with :attr:`FragmentError.close_code`. Control frames (ping, pong, close) are
never fed here: they may come between fragments and are the driver's business.

The server (``runtime/websocket.py``) feeds it every data frame websockets' parser gives;
the client's reader (``transport/wire.py``) is meant to do the same, so both ends join and
bound messages alike. Usage, for every data frame parsed (``opcode`` 0x0, 0x1 or 0x2)::

    assembler = FragmentAssembler(max_size=16 * 2**20)
    try:
        message = assembler.receive(frame.opcode.value, frame.fin, frame.data)
    except FragmentError as exc:
        fail_the_connection(exc.close_code, str(exc))
    else:
        if message is not None:
            deliver(message.data, message.text)

>>> assembler = FragmentAssembler(max_size=100, max_fragments=3)
>>> assembler.receive(0x1, False, b"he"), assembler.receive(0x0, False, b"l")
(None, None)
>>> assembler.receive(0x0, True, b"lo")
Message(data=b'hello', text=True)
>>> assembler.receive(0x2, True, b"whole")
Message(data=b'whole', text=False)
>>> assembler.receive(0x2, False, b""), assembler.receive(0x0, False, b"")
(None, None)
>>> assembler.receive(0x0, False, b""), assembler.receive(0x0, False, b"")
Traceback (most recent call last):
...
openenv_gym.protocol.fragments.FragmentError: a message of more than 3 fragments
"""

from __future__ import annotations

from typing import NamedTuple

from openenv_gym.exceptions import RemoteProtocolError

__all__ = [
    "BINARY",
    "CONTINUATION",
    "DEFAULT_MAX_FRAGMENTS",
    "TEXT",
    "FragmentAssembler",
    "FragmentError",
    "Message",
]

CONTINUATION = 0x0
"""Opcode of a continuation frame."""
TEXT = 0x1
"""Opcode of a text frame."""
BINARY = 0x2
"""Opcode of a binary frame."""

DEFAULT_MAX_FRAGMENTS = 1024
"""Frames one message may come in, by default (a whole message is one)."""

MESSAGE_TOO_BIG = 1009
PROTOCOL_ERROR = 1002


class Message(NamedTuple):
    """One whole data message.

    Attributes:
        data: Its bytes (a text message's are UTF-8, not checked here).
        text: Whether it is a text message (else binary).
    """

    data: bytes
    text: bool


class FragmentError(RemoteProtocolError):
    """The peer's frames break a limit or RFC 6455's order: fail the connection.

    Attributes:
        close_code: The WebSocket close code to fail it with: 1009 for a limit, 1002 for
            frames out of order.
    """

    def __init__(self, message: str, close_code: int) -> None:
        super().__init__(message)
        self.close_code = close_code


class FragmentAssembler:
    """Joins a connection's data frames into messages, within limits (module docstring).

    One per connection and direction. Feed every data frame to :meth:`receive`, in order.

    Args:
        max_size: Most bytes one message may hold, fragments together (None: no limit).
        max_fragments: Most frames one message may come in (None: no limit).
    """

    __slots__ = ("_parts", "_size", "_text", "max_fragments", "max_size")

    def __init__(
        self, max_size: int | None = None, max_fragments: int | None = DEFAULT_MAX_FRAGMENTS
    ) -> None:
        self.max_size = max_size
        self.max_fragments = max_fragments
        self._parts: list[bytes] = []
        self._size = 0
        self._text = False

    @property
    def under_way(self) -> bool:
        """Whether a fragmented message has started and not ended."""
        return bool(self._parts)

    def receive(
        self, opcode: int, fin: bool, data: bytes | bytearray | memoryview
    ) -> Message | None:
        """Feed one data frame (``opcode`` 0x0, 0x1 or 0x2). Next: deliver what it returns.

        Returns:
            The whole message when this frame ends one, else None.

        Raises:
            FragmentError: The frame breaks a limit or the order of fragments. What was
                gathered is dropped; fail the connection with its ``close_code``.
        """
        if opcode == CONTINUATION:
            if not self._parts:
                raise FragmentError(
                    "a continuation frame with no message under way", PROTOCOL_ERROR
                )
            return self._continue(fin, data)
        if self._parts:
            self._drop()
            raise FragmentError("a new message before the fragmented one ended", PROTOCOL_ERROR)
        size = len(data)
        if self.max_size is not None and size > self.max_size:
            raise FragmentError(f"a message of more than {self.max_size} bytes", MESSAGE_TOO_BIG)
        if fin:
            return Message(bytes(data), opcode == TEXT)
        # the first fragment: an empty one is a part too (it opens the message)
        self._parts.append(bytes(data))
        self._size = size
        self._text = opcode == TEXT
        return None

    def _continue(self, fin: bool, data: bytes | bytearray | memoryview) -> Message | None:
        parts = self._parts
        size = self._size + len(data)
        if self.max_size is not None and size > self.max_size:
            self._drop()
            raise FragmentError(f"a message of more than {self.max_size} bytes", MESSAGE_TOO_BIG)
        if self.max_fragments is not None and len(parts) >= self.max_fragments:
            self._drop()
            raise FragmentError(
                f"a message of more than {self.max_fragments} fragments", MESSAGE_TOO_BIG
            )
        parts.append(bytes(data))
        self._size = size
        if not fin:
            return None
        whole = b"".join(parts)
        self._drop()
        return Message(whole, self._text)

    def _drop(self) -> None:
        self._parts = []
        self._size = 0
