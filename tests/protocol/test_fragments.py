"""The fragment assembler (``protocol/fragments.py``): RFC 6455 5.4, within limits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openenv_gym.protocol.fragments import (
    BINARY,
    CONTINUATION,
    DEFAULT_MAX_FRAGMENTS,
    TEXT,
    FragmentAssembler,
    FragmentError,
    Message,
)


def feed(assembler: FragmentAssembler, opcode: int, parts: list[bytes]) -> list[Message | None]:
    """Send ``parts`` as one message: the first with ``opcode``, the last final."""
    out = []
    for k, part in enumerate(parts):
        out.append(assembler.receive(opcode if k == 0 else CONTINUATION, k == len(parts) - 1, part))
    return out


@given(st.lists(st.binary(max_size=20), min_size=1, max_size=40), st.sampled_from([TEXT, BINARY]))
def test_fragments_join_into_the_message(parts: list[bytes], opcode: int) -> None:
    assembler = FragmentAssembler(max_size=None, max_fragments=None)
    *pending, last = feed(assembler, opcode, parts)
    assert pending == [None] * (len(parts) - 1)
    assert last == Message(b"".join(parts), opcode == TEXT)
    assert not assembler.under_way


def test_a_whole_frame_is_a_message_and_views_become_bytes() -> None:
    assembler = FragmentAssembler()
    message = assembler.receive(BINARY, True, memoryview(b"abc"))
    assert message == Message(b"abc", False)
    assert type(message.data) is bytes  # type: ignore[union-attr]
    assert assembler.max_fragments == DEFAULT_MAX_FRAGMENTS


def test_under_way_from_the_first_fragment_even_empty() -> None:
    assembler = FragmentAssembler()
    assert assembler.receive(TEXT, False, b"") is None
    assert assembler.under_way
    assert assembler.receive(CONTINUATION, True, b"") == Message(b"", True)


def test_empty_continuation_frames_count_toward_the_limit() -> None:
    assembler = FragmentAssembler(max_fragments=4)
    assert feed(assembler, BINARY, [b"", b"", b"", b""]) == [None, None, None, Message(b"", False)]
    assembler.receive(BINARY, False, b"")
    for _ in range(3):
        assembler.receive(CONTINUATION, False, b"")
    with pytest.raises(FragmentError, match="more than 4 fragments") as caught:
        assembler.receive(CONTINUATION, True, b"")
    assert caught.value.close_code == 1009
    assert not assembler.under_way  # what was gathered is dropped


@pytest.mark.parametrize("split", [[b"x" * 11], [b"x" * 6, b"x" * 5], [b"", b"x" * 10, b"x"]])
def test_the_size_limit_holds_over_the_fragments(split: list[bytes]) -> None:
    assembler = FragmentAssembler(max_size=10)
    with pytest.raises(FragmentError, match="more than 10 bytes") as caught:
        feed(assembler, TEXT, split)
    assert caught.value.close_code == 1009
    assert not assembler.under_way
    assert assembler.receive(TEXT, True, b"x" * 10) == Message(b"x" * 10, True)


def test_a_continuation_with_nothing_under_way_is_a_protocol_error() -> None:
    with pytest.raises(FragmentError, match="no message under way") as caught:
        FragmentAssembler().receive(CONTINUATION, True, b"x")
    assert caught.value.close_code == 1002


@pytest.mark.parametrize("opcode", [TEXT, BINARY])
def test_a_new_message_inside_a_fragmented_one_is_a_protocol_error(opcode: int) -> None:
    assembler = FragmentAssembler()
    assembler.receive(BINARY, False, b"a")
    with pytest.raises(FragmentError, match="before the fragmented one ended") as caught:
        assembler.receive(opcode, True, b"b")
    assert caught.value.close_code == 1002
    assert not assembler.under_way
