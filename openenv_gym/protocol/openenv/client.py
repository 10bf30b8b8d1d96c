"""The client end of one OpenEnv JSON ``/ws`` session (``docs/protocol.md`` section 2.5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.openenv.messages import (
    CloseRequest,
    ErrorReceived,
    ObservationReceived,
    Reply,
    Request,
    ResetRequest,
    StateReceived,
    StateRequest,
    StepRequest,
    decode_reply,
    encode_request,
)
from openenv_gym.protocol.states import (
    JSON_CLIENT_READING,
    JSON_CLIENT_TRANSITIONS,
    IllegalTransition,
    JsonClientEvent,
    SessionState,
    fire,
)

__all__ = ["ClientSession"]

_CE = JsonClientEvent
_TABLE = JSON_CLIENT_TRANSITIONS
_REPLY_EVENTS: dict[type, JsonClientEvent] = {
    ObservationReceived: _CE.RECEIVE_OBSERVATION,
    StateReceived: _CE.RECEIVE_STATE,
}
_EXPECTED = {
    SessionState.AWAITING_OBSERVATION: ObservationReceived,
    SessionState.AWAITING_STATE: StateReceived,
}


class ClientSession:
    """Client side of one OpenEnv ``/ws`` session.

    Call a ``send_*`` method, then :meth:`data_to_send` and write every returned frame as a
    text frame. Feed every frame received to :meth:`receive_data`, then read
    :meth:`events_received`. An illegal call raises :class:`LocalProtocolError` and leaves
    the state unchanged.

    The state is one :class:`SessionState`; every call is an event, and one table gives
    the next state of each legal (state, event) pair (``docs/protocol.md`` section 2.5):

    ======================  ============================  ============================
    state                   event                         next state
    ======================  ============================  ============================
    IDLE                    send_reset, send_step         AWAITING_OBSERVATION
    IDLE                    send_state                    AWAITING_STATE
    any but CLOSED          send_close                    CLOSED
    AWAITING_OBSERVATION    observation received          IDLE
    AWAITING_STATE          state received                IDLE
    AWAITING_*              error received, session kept  IDLE
    any but CLOSED          error received, session ends  CLOSED
    any but CLOSED          any other frame               CLOSED, RemoteProtocolError
    any                     connection_lost               CLOSED
    ======================  ============================  ============================

    Any other pair is illegal: a ``send_*`` raises :class:`LocalProtocolError` with nothing
    changed; a frame raises :class:`RemoteProtocolError` and closes the session (it is
    "any other frame"), or, fed to a ``CLOSED`` session, changes nothing.

    Attributes:
        state: The session's :class:`SessionState`.
    """

    def __init__(self) -> None:
        self.state = SessionState.IDLE
        self._outgoing: list[str] = []
        self._events: list[Reply] = []

    # -- sending ------------------------------------------------------------------
    def _send(self, event: JsonClientEvent, request: Request) -> None:
        try:
            next_state = fire(_TABLE, self.state, event)
        except IllegalTransition:
            if event is _CE.SEND_CLOSE:
                raise LocalProtocolError("session already closed") from None
            raise LocalProtocolError(
                f"cannot send {type(request).__name__} in state {self.state.value}: "
                "OpenEnv allows one request in flight per session"
            ) from None
        frame = encode_request(request)
        self.state = next_state
        self._outgoing.append(frame)

    def send_reset(self, **kwargs: Any) -> None:
        """Queue a ``reset``. Next: :meth:`data_to_send`, then await one reply."""
        self._send(_CE.SEND_RESET, ResetRequest(kwargs))

    def send_step(self, action: Mapping[str, Any]) -> None:
        """Queue a ``step`` with the action's fields. Next: :meth:`data_to_send`."""
        self._send(_CE.SEND_STEP, StepRequest(action))

    def send_state(self) -> None:
        """Queue a ``state`` request. Next: :meth:`data_to_send`."""
        self._send(_CE.SEND_STATE, StateRequest())

    def send_close(self) -> None:
        """Queue a ``close``; the session is closed at once. Allowed in any open state."""
        self._send(_CE.SEND_CLOSE, CloseRequest())

    def data_to_send(self) -> list[str]:
        """Return and forget the text frames queued for sending."""
        frames, self._outgoing = self._outgoing, []
        return frames

    # -- receiving ----------------------------------------------------------------
    def receive_data(self, data: str | bytes) -> None:
        """Feed one received frame. Next: :meth:`events_received`.

        Raises:
            RemoteProtocolError: The frame is malformed, or answers nothing we asked
                (the session is closed: it cannot be trusted any more).
        """
        state = self.state
        if state not in JSON_CLIENT_READING:
            raise RemoteProtocolError("frame received on a closed session")
        try:
            reply = decode_reply(data)
            if isinstance(reply, ErrorReceived):
                event = _CE.RECEIVE_FATAL_ERROR if reply.ends_session else _CE.RECEIVE_ERROR
            else:
                event = _REPLY_EVENTS[type(reply)]
            try:
                next_state = fire(_TABLE, state, event)
            except IllegalTransition:
                raise RemoteProtocolError(_unexpected(state, reply)) from None
        except RemoteProtocolError:
            self.state = fire(_TABLE, state, _CE.PROTOCOL_ERROR)
            raise
        self.state = next_state
        self._events.append(reply)

    def connection_lost(self) -> None:
        """Record that the socket is gone. Any pending request is lost."""
        self.state = fire(_TABLE, self.state, _CE.CONNECTION_LOST)

    def events_received(self) -> list[Reply]:
        """Return and forget the replies parsed so far."""
        events, self._events = self._events, []
        return events


def _unexpected(state: SessionState, reply: Reply) -> str:
    """Why ``reply`` cannot come in ``state`` (a session that is open)."""
    if state is SessionState.IDLE:
        what = f"{reply.code} error" if isinstance(reply, ErrorReceived) else type(reply).__name__
        return f"unsolicited {what} frame"
    return f"expected {_EXPECTED[state].__name__}, got {type(reply).__name__}"
