"""The client joins fragmented messages with the protocol's FragmentAssembler, within limits.

Issue 22, finding 2, on the client side: a server (or whatever answers in its place) that
sends one message in a flood of fragments, empty ones included, gets the connection failed
with close code 1009 once the message passes ``DEFAULT_MAX_FRAGMENTS`` frames, before the
client has gathered more; up to the limit, the message arrives whole. A real ``websockets``
server on 127.0.0.1 sends the frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.protocol.fragments import DEFAULT_MAX_FRAGMENTS
from openenv_gym.transport.handshake import ws_url
from openenv_gym.transport.waiting import deadline_after
from openenv_gym.transport.wire import WebSocket, open_websocket

SOON = 20.0
"""Seconds a read may take before the test calls it hung."""


@pytest.fixture
def fragments_server(ws_server: Any) -> tuple[str, list[Any]]:
    """A server sending, on ``"send N SIZE"``, one message in N frames: N - 1 of SIZE bytes.

    (``websockets`` ends a message sent from an iterable with an empty final frame.)

    Yields its URL and the close codes it received (``None``: no close frame).
    """
    closes: list[Any] = []

    async def handler(ws: ServerConnection) -> None:
        try:
            async for request in ws:
                _, count, size = str(request).split()
                fragments = [b"x" * int(size)] * (int(count) - 1)
                await ws.send(fragments)  # an iterable: one message, one frame each
        except ConnectionClosed:
            pass
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.wait_closed(), SOON)
            rcvd = ws.protocol.close_rcvd
            closes.append(None if rcvd is None else rcvd.code)

    return ws_server(handler, max_size=None), closes


@pytest.fixture
def connect() -> Iterator[Callable[[str], WebSocket]]:
    """``open_websocket``, every socket dropped at teardown."""
    opened: list[WebSocket] = []

    def open_(url: str) -> WebSocket:
        ws = open_websocket(ws_url(url, "/"), timeout=SOON)
        opened.append(ws)
        return ws

    yield open_
    for ws in opened:
        with ws.lock:
            ws.abort()


def _ask(ws: WebSocket, count: int, size: int) -> bytes | str:
    with ws.lock:
        ws.send(f"send {count} {size}", deadline_after(SOON))
        return ws.receive(deadline_after(SOON))


@pytest.mark.parametrize("size", [0, 1, 100])
def test_a_message_of_exactly_the_limit_arrives_whole(
    fragments_server: tuple[str, list[Any]], connect: Callable[[str], WebSocket], size: int
) -> None:
    url, _ = fragments_server
    ws = connect(url)
    message = _ask(ws, DEFAULT_MAX_FRAGMENTS, size)
    assert message == b"x" * (size * (DEFAULT_MAX_FRAGMENTS - 1))
    assert _ask(ws, 3, 5) == b"x" * 10  # and the connection goes on


@pytest.mark.parametrize(("count", "size"), [(DEFAULT_MAX_FRAGMENTS + 1, 1), (200_000, 0)])
def test_a_flood_of_fragments_fails_the_connection_with_1009(
    fragments_server: tuple[str, list[Any]],
    connect: Callable[[str], WebSocket],
    count: int,
    size: int,
) -> None:
    url, closes = fragments_server
    ws = connect(url)
    with pytest.raises(RemoteProtocolError) as caught:
        _ask(ws, count, size)
    assert f"more than {DEFAULT_MAX_FRAGMENTS} fragments" in str(caught.value)
    assert isinstance(ws.failure, RemoteProtocolError)
    end = time.monotonic() + SOON
    while not closes:  # the server's handler ends once the connection is closed
        if time.monotonic() > end:
            pytest.fail("the server never saw the connection end")
        time.sleep(0.01)
    if count == DEFAULT_MAX_FRAGMENTS + 1:  # the server wrote all: it reads our close frame
        assert closes == [1009]  # which says why
    # (a server still writing a flood when the client goes may find the socket reset first)
