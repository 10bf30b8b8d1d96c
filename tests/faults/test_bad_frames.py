"""Frames that answer nothing: duplicate and unsolicited replies end the session, typed.

OpenEnv's JSON replies carry no request id: a server that answers one step twice would
have every later step take the previous step's reply (a->a, b->b, c->b, d->c) unless the
client notices the extra frame (``docs/protocol.md`` section 2.5). The batched protocol
matches replies by id: one to an unknown or finished request ends the connection.
Fake servers here are real ``websockets`` servers on 127.0.0.1; a frame a server sends on
its own is sent when the test says, and the test goes on once the server says it has sent
it (``threading.Event`` s), never after a pause.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from fault_support import HANG, no_leftovers  # noqa: F401 - the fixture
from websockets.asyncio.server import ServerConnection

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import RemoteProtocolError, SessionError, UsageError
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.transport.session import Session, open_session

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leftovers")]

TIMEOUTS = Timeouts(connect=5.0, step=5.0, close=2.0)
MESSAGES = "abcdefgh"


class Signals:
    """Two events between a test and its fake server: ``go`` (the test lets the server
    send its unasked frame) and ``sent`` (the server has sent it)."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.sent = threading.Event()

    async def wait_go(self) -> None:
        """On the server's loop: wait until the test says go (a hang fails the test)."""
        assert await asyncio.to_thread(self.go.wait, HANG), "the test never said go"

    def wait_sent(self) -> None:
        """In the test: wait until the server has sent its frame."""
        assert self.sent.wait(HANG), "the server never sent its frame"


def json_server(
    *, twice: str | None = None, push_after: str | None = None, signals: Signals | None = None
):
    """An OpenEnv-like /ws server echoing ``m``: answers ``twice`` twice, and after
    answering ``push_after`` pushes an unsolicited observation once ``signals.go`` is set
    (then sets ``signals.sent``)."""

    async def handler(ws: ServerConnection) -> None:
        session = op.ServerSession()
        async for frame in ws:
            session.receive_data(frame)
            for request in session.events_received():
                if isinstance(request, op.ResetRequest):
                    session.send_observation({"m": "reset"}, 0.0, False)
                elif isinstance(request, op.StepRequest):
                    session.send_observation({"m": request.action["m"]}, 1.0, False)
            frames = session.data_to_send()
            for out in frames:
                await ws.send(out)
            if twice is not None and f'"m":"{twice}"' in frames[0]:
                for out in frames:  # the same reply again, at once
                    await ws.send(out)
            if push_after is not None and f'"m":"{push_after}"' in frames[0]:
                assert signals is not None
                await signals.wait_go()
                await ws.send(op.dumps({"type": "observation", "data": {"observation": {}}}))
                signals.sent.set()

    return handler


def step_through(session: Session, taken: list[str]) -> None:
    """Step with every message, keeping what each reply says it answers."""
    for message in MESSAGES:
        taken.append(session.step({"m": message}).observation["m"])


@pytest.mark.parametrize("protocol", ["json", "auto"])  # auto: /batch refused, then /ws
def test_json_reply_sent_twice_ends_the_session(ws_server, protocol):
    url = ws_server(json_server(twice="b"))
    for _ in range(10):  # the duplicate races the next request: it never slips through
        session = open_session(url, protocol=protocol, timeouts=TIMEOUTS)
        assert session.protocol == "json"
        try:
            session.reset()
            taken: list[str] = []
            with pytest.raises(RemoteProtocolError, match=r"unsolicited|before it read"):
                step_through(session, taken)
            # every reply taken answered its own request; the error came at b or c
            assert taken == list(MESSAGES[: len(taken)])
            assert len(taken) in (1, 2)
            assert session.closed
            with pytest.raises(UsageError, match="closed"):
                session.step({"m": "z"})
        finally:
            session.close()


def test_json_unsolicited_frame_while_idle_ends_the_session(ws_server):
    signals = Signals()
    url = ws_server(json_server(push_after="a", signals=signals))
    session = open_session(url, protocol="json", timeouts=TIMEOUTS)
    try:
        session.reset()
        assert session.step({"m": "a"}).observation == {"m": "a"}
        signals.go.set()  # the session is idle: now the server pushes a frame
        signals.wait_sent()
        with pytest.raises(RemoteProtocolError, match="unsolicited"):
            session.step({"m": "b"})  # read at the next request
        assert session.closed
    finally:
        session.close()


def test_json_unsolicited_error_frame_ends_the_session(ws_server):
    sent = threading.Event()

    async def handler(ws: ServerConnection) -> None:
        session = op.ServerSession()
        async for frame in ws:
            session.receive_data(frame)
            for _ in session.events_received():
                session.send_observation({"m": "ok"}, 0.0, False)
            for out in session.data_to_send():
                await ws.send(out)
            error = {"type": "error", "data": {"code": "EXECUTION_ERROR", "message": "stray"}}
            await ws.send(op.dumps(error))  # a non-fatal error nobody asked for
            sent.set()

    url = ws_server(handler)
    session = open_session(url, protocol="json", timeouts=TIMEOUTS)
    try:
        with pytest.raises(RemoteProtocolError, match="unsolicited"):
            reset_then_step(session, sent)  # the stray frame comes with the reply or after it
        assert session.closed
    finally:
        session.close()


def reset_then_step(session: Session, sent: threading.Event) -> None:
    """Reset; once the server has sent its stray frame, step."""
    session.reset()
    assert sent.wait(HANG), "the server never sent its stray frame"
    session.step({"m": "a"})


def batch_server(*, twice_op: bp.Op | None = None, stray_id: int | None = None):
    """A batched server whose slots echo their step; answers ``twice_op`` twice, or sends
    a reply to request ``stray_id`` (never asked) after the first step."""

    async def handler(ws: ServerConnection) -> None:
        conn = bp.BatchServer()
        async for frame in ws:
            conn.receive_data(frame)
            for event in conn.events_received():
                if isinstance(event, bp.HelloRequestReceived):
                    conn.send_hello(server="fake", env="fake", max_slots=4)
                elif event.op in (bp.Op.OPEN, bp.Op.CLOSE):
                    conn.send_results(event, [None] * len(event.slots))
                else:
                    result = bp.SlotResult({"m": event.op.value}, 0.0, False)
                    conn.send_results(event, [result] * len(event.slots))
                    (reply,) = conn.data_to_send()
                    await ws.send(reply)
                    if event.op is twice_op:
                        await ws.send(reply)
                    if stray_id is not None and event.op is bp.Op.STEP:
                        stray = {**bp.decode_frame(reply), "id": stray_id}
                        await ws.send(bp.encode_frame(stray))
            for out in conn.data_to_send():
                await ws.send(out)

    return handler


@pytest.mark.parametrize(
    ("twice_op", "stray_id"), [(bp.Op.STEP, None), (None, 77)], ids=["finished-id", "unknown-id"]
)
def test_batch_reply_to_no_pending_request_ends_the_connection(ws_server, twice_op, stray_id):
    url = ws_server(
        batch_server(twice_op=twice_op, stray_id=stray_id), subprotocols=[bp.SUBPROTOCOL]
    )
    session = open_session(url, protocol="batch", timeouts=TIMEOUTS)
    try:
        session.reset()
        session.step({"x": 1})  # answered (and then answered again, or a stray reply)
        with pytest.raises(RemoteProtocolError, match="unknown request id"):
            session.step({"x": 2})
        assert session.closed
        with pytest.raises(UsageError, match="closed"):
            session.step({"x": 3})
    finally:
        session.close()


def test_json_session_ending_error_sent_unasked_is_the_servers_reason(ws_server):
    signals = Signals()

    async def handler(ws: ServerConnection) -> None:
        session = op.ServerSession()
        async for frame in ws:
            session.receive_data(frame)
            for _ in session.events_received():
                session.send_observation({"m": "ok"}, 0.0, False)
            for out in session.data_to_send():
                await ws.send(out)
            await signals.wait_go()  # then it gives up on the session, unasked
            error = {"type": "error", "data": {"code": "SESSION_ERROR", "message": "bye"}}
            await ws.send(op.dumps(error))
            signals.sent.set()

    url = ws_server(handler)
    session = open_session(url, protocol="json", timeouts=TIMEOUTS)
    try:
        session.reset()
        signals.go.set()
        signals.wait_sent()
        with pytest.raises(SessionError, match="bye"):
            session.step({"m": "a"})
        assert session.closed
    finally:
        session.close()
