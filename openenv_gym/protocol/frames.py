"""WebSocket frame heads (RFC 6455 5.2): the arithmetic both sides' fast paths share.

Sans-I/O and free of websockets: the client (``transport/wire.py``) and the server
(``runtime/websocket.py``) write and parse whole plain frames themselves on their hot paths
and leave everything else to websockets' parser; this module is only where a frame head is
built and read, so the two cannot drift apart.

>>> frame_head(0x2, 5).hex()
'8205'
>>> parse_head(frame_head(0x1, 300, masked=True) + b"mask", 0)
(129, 300, 8)
"""

from __future__ import annotations

import struct

__all__ = ["frame_head", "frame_header", "parse_head", "small_frames", "whole_data_frame"]


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


def frame_header(data: bytes | memoryview, pos: int) -> tuple[int, int, int, bytes] | None:
    """The frame at ``pos``: (first byte, payload length, head length, mask); None if cut.

    The mask is ``b""`` for an unmasked frame.

    >>> frame_header(frame_head(0x2, 3, masked=True) + b"mask" + b"abc", 0)
    (130, 3, 6, b'mask')
    """
    head = parse_head(data, pos)
    if head is None:
        return None
    first, length, size = head
    mask = bytes(data[pos + size - 4 : pos + size]) if data[pos + 1] & 0x80 else b""
    return first, length, size, mask


_WHOLE_DATA = (0x81, 0x82)  # final text, final binary, no extension bits


def whole_data_frame(data: bytes) -> int:
    """Where the payload starts if ``data`` is exactly one masked data frame, else 0.

    The frame: final, text or binary, no extension bits, masked, at most 65,535 bytes of
    payload (a client's usual request).

    >>> whole_data_frame(frame_head(0x2, 3, masked=True) + b"mask" + b"abc")
    6
    """
    if len(data) < 6 or data[0] not in _WHOLE_DATA or not data[1] & 0x80:
        return 0
    head = parse_head(data, 0)
    if head is None:
        return 0
    _, length, size = head
    return size if size <= 8 and size + length == len(data) else 0


def small_frames(data: bytes, fragmented: bool, max_frames: int) -> tuple[int, bool] | None:
    """Where the first ``max_frames`` frames of ``data`` end, and if a message is open there.

    The second value says whether a fragmented message is under way after those frames
    (``fragmented``: before ``data``). None unless those frames are whole and masked, with
    at most 65,535 bytes of payload each (what follows them is not looked at).

    >>> ping = frame_head(0x9, 0, masked=True) + b"mask"
    >>> small_frames(ping + ping + ping, False, 2), small_frames(ping, True, 2)
    ((12, False), (6, True))
    """
    pos, end, frames = 0, len(data), 0
    while pos < end and frames < max_frames:
        head = parse_head(data, pos)
        if head is None or not data[pos + 1] & 0x80:
            return None
        first, length, size = head
        if size > 8:  # a 64-bit length
            return None
        pos += size + length
        frames += 1
        opcode = first & 0x0F
        if opcode in (0x1, 0x2):  # text, binary: a fragmented message opens unless final
            fragmented = not first & 0x80
        elif opcode == 0x0 and first & 0x80:  # a final continuation frame
            fragmented = False
    return (pos, fragmented) if pos <= end else None
