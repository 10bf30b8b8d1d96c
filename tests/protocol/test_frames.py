"""Frame heads (``protocol/frames.py``): built as RFC 6455 5.2 says, read back whole.

websockets' own ``Frame`` is the reference for both directions.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode

from openenv_gym.protocol.frames import (
    frame_head,
    frame_header,
    parse_head,
    small_frames,
    whole_data_frame,
)

LENGTHS = [0, 1, 125, 126, 127, 65535, 65536, 70000]
MASK = b"\x01\x02\x03\x04"


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("masked", [False, True])
def test_head_is_websockets_head(length, masked):
    payload = b"x" * length
    frame = Frame(Opcode.BINARY, payload).serialize(mask=masked, extensions=[])
    head = frame_head(Opcode.BINARY.value, length, masked=masked)
    if masked:  # websockets draws its own key: compare all but the key and the payload
        key_at = len(head)
        assert frame[:key_at] == head
        assert len(frame) == key_at + 4 + length
    else:
        assert frame == head + payload


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("masked", [False, True])
def test_parse_reads_what_was_built(length, masked):
    head = frame_head(Opcode.TEXT.value, length, masked=masked) + (MASK if masked else b"")
    data = b"junk" + head + b"payload"
    assert parse_head(data, 4) == (0x81, length, len(head))


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("masked", [False, True])
def test_a_cut_head_is_none_until_whole(length, masked):
    head = frame_head(Opcode.BINARY.value, length, masked=masked) + (MASK if masked else b"")
    for cut in range(len(head)):
        assert parse_head(head[:cut], 0) is None
    assert parse_head(memoryview(head), 0) == (0x82, length, len(head))


@given(st.binary(min_size=0, max_size=16), st.integers(0, 16))
def test_parse_never_reads_past_the_data(data, pos):
    head = parse_head(data, pos)
    if head is not None:
        assert pos + head[2] <= len(data)
        assert head[0] == data[pos]


# ------------------------------------------------ reading whole frames (the servers' fast paths)


def masked(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    head = bytearray(frame_head(opcode, len(payload), masked=True))
    if not fin:
        head[0] &= 0x7F
    return bytes(head) + MASK + payload  # the payload itself is not masked: only heads are read


def test_frame_header_gives_the_mask_or_nothing():
    assert frame_header(masked(0x2, b"abc"), 0) == (0x82, 3, 6, MASK)
    assert frame_header(frame_head(0x2, 3) + b"abc", 0) == (0x82, 3, 2, b"")
    assert frame_header(b"\x82", 0) is None


@pytest.mark.parametrize(
    ("data", "start"),
    [
        (masked(0x2, b"abc"), 6),
        (masked(0x1, b"x" * 200), 8),
        (masked(0x2, b""), 6),
        (masked(0x2, b"abc") + b"more", 0),  # not exactly one frame
        (masked(0x2, b"abc")[:-1], 0),
        (frame_head(0x2, 3) + b"abcdefg", 0),  # unmasked
        (masked(0x2, b"abc", fin=False), 0),  # not final
        (masked(0x9, b"abc"), 0),  # a ping
        (masked(0x2, b"x" * 70000), 0),  # a 64-bit length
        (b"\x82\xfe\x01\x02\x03\x04", 0),  # a cut head, long enough to look at
        (b"\x82\x80", 0),
    ],
)
def test_whole_data_frame(data, start):
    assert whole_data_frame(data) == start


def test_small_frames_follows_fragmented_messages():
    start, middle, end = (
        masked(0x1, b"a", fin=False),
        masked(0x0, b"b", fin=False),
        masked(0x0, b"c"),
    )
    ping = masked(0x9, b"")
    assert small_frames(b"", False, 64) == (0, False)
    assert small_frames(start, False, 64) == (len(start), True)
    assert small_frames(start + middle + ping, False, 64) == (len(start + middle + ping), True)
    assert small_frames(middle + end, True, 64) == (len(middle + end), False)
    assert small_frames(masked(0x2, b"x") + ping, True, 64) == (
        len(masked(0x2, b"x") + ping),
        False,
    )
    assert small_frames(ping, True, 64) == (len(ping), True)


def test_small_frames_stops_after_max_frames():
    ping, start = masked(0x9, b""), masked(0x2, b"ab", fin=False)
    assert small_frames(start + ping + b"garbage", False, 2) == (len(start + ping), True)
    assert small_frames(ping * 5, False, 3) == (3 * len(ping), False)


@pytest.mark.parametrize(
    "data",
    [
        masked(0x2, b"abc")[:-1],  # cut
        masked(0x2, b"abc")[:1],  # cut head
        frame_head(0x2, 1) + b"x",  # unmasked
        masked(0x2, b"x" * 70000),  # a 64-bit length
    ],
)
def test_small_frames_refuses_what_it_does_not_read(data):
    assert small_frames(data, False, 64) is None
