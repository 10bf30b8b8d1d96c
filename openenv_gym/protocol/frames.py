"""WebSocket frame heads (RFC 6455 5.2): the arithmetic both sides' fast paths share.

Sans-I/O and free of websockets: the client (``transport/wire.py``) and the server
(``server/http.py``) write and parse whole plain frames themselves on their hot paths and
leave everything else to websockets' parser; this module is only where a frame head is
built and read, so the two cannot drift apart.

>>> frame_head(0x2, 5).hex()
'8205'
>>> parse_head(frame_head(0x1, 300, masked=True) + b"mask", 0)
(129, 300, 8)
"""

from __future__ import annotations

import struct

__all__ = ["frame_head", "parse_head"]


def frame_head(opcode: int, length: int, *, masked: bool = False) -> bytes:
    """The head of a final frame with ``length`` bytes of payload, without a masking key.

    ``masked``: set the mask bit (a client's frame); its 4-byte key goes right after.
    """
    first = 0x80 | opcode
    mask_bit = 0x80 if masked else 0
    if length < 126:
        return bytes((first, mask_bit | length))
    if length < 65536:
        return struct.pack("!BBH", first, mask_bit | 126, length)
    return struct.pack("!BBQ", first, mask_bit | 127, length)


def parse_head(data: bytes | memoryview, pos: int) -> tuple[int, int, int] | None:
    """The head of the frame at ``pos``: (first byte, payload length, head length).

    The head length counts the masking key when the mask bit is set (``data[pos + 1] &
    0x80``), so the payload starts at ``pos`` plus it. None when the head is cut by the end
    of ``data``. Nothing is checked: what the bits mean is the caller's to decide.
    """
    available = len(data) - pos
    if available < 2:
        return None
    second = data[pos + 1]
    length = second & 0x7F
    size = 2
    if length == 126:
        size = 4
    elif length == 127:
        size = 10
    if second & 0x80:
        size += 4
    if available < size:
        return None
    if length == 126:
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
    elif length == 127:
        length = int.from_bytes(data[pos + 2 : pos + 10], "big")
    return data[pos], length, size
