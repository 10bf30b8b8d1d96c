"""Frame heads (``protocol/frames.py``): built as RFC 6455 5.2 says, read back whole.

websockets' own ``Frame`` is the reference for both directions.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode

from openenv_gym.protocol.frames import frame_head, parse_head

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
