"""The server end of one OpenEnv JSON ``/ws`` session (``docs/protocol.md`` sections 2.5, 2.6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_gym.exceptions import LocalProtocolError
from openenv_gym.protocol.openenv.messages import (
    BadRequest,
    CloseRequest,
    ErrorCode,
    Request,
    ResetRequest,
    StateRequest,
    StepRequest,
    decode_request,
    dumps,
    observation_payload,
)
from openenv_gym.protocol.states import (
    JSON_SERVER_ANSWERING,
    JSON_SERVER_READING,
    JSON_SERVER_TRANSITIONS,
    IllegalTransition,
    JsonServerEvent,
    SessionState,
    fire,
)

__all__ = ["ServerSession"]

_SE = JsonServerEvent
_TABLE = JSON_SERVER_TRANSITIONS
_ENDED = SessionState.CLOSED
_REQUEST_EVENTS: dict[type, JsonServerEvent] = {
    ResetRequest: _SE.RECEIVE_RESET,
    StepRequest: _SE.RECEIVE_STEP,
    StateRequest: _SE.RECEIVE_STATE,
    CloseRequest: _SE.RECEIVE_CLOSE,
}


class ServerSession:
    """Server side of one OpenEnv ``/ws`` session.

    Feed every received frame to :meth:`receive_data`; read requests with
    :meth:`events_received`; answer each ``reset`` / ``step`` / ``state`` with exactly one
    of :meth:`send_observation`, :meth:`send_state`, :meth:`send_error`; then write
    :meth:`data_to_send`. Do not feed the next frame before answering (OpenEnv servers
    read strictly one request, then answer it). Malformed frames are answered here with
    OpenEnv's error frames (section 2.6). When :attr:`closed` becomes true, send what is
    queued and close the socket (code 1000). An illegal call raises
    :class:`LocalProtocolError` and leaves the state unchanged.

    The state is one :class:`SessionState` (``AWAITING_*``: a request is pending, the
    client awaits its answer); every call is an event, and one table gives the next state
    of each legal (state, event) pair (``docs/protocol.md`` section 2.5):

    ======================  ============================  ============================
    state                   event                         next state
    ======================  ============================  ============================
    IDLE                    reset or step received        AWAITING_OBSERVATION
    IDLE                    state received                AWAITING_STATE
    IDLE                    close received                CLOSED
    IDLE                    malformed text frame (2.6)    IDLE, error frame queued
    IDLE                    binary frame                  CLOSED, SESSION_ERROR queued
    AWAITING_OBSERVATION    send_observation              IDLE
    AWAITING_STATE          send_state                    IDLE
    AWAITING_*              send_error, session kept      IDLE
    any but CLOSED          send_error, session ends      CLOSED
    ======================  ============================  ============================

    Any other pair is illegal: :class:`LocalProtocolError`, nothing changed.

    Args:
        max_values: Most values one frame may hold (``messages.loads``); a larger one is
            answered ``INVALID_JSON`` before it is parsed. None: no limit.

    Attributes:
        state: The session's :class:`SessionState`.
    """

    def __init__(self, max_values: int | None = None) -> None:
        self.max_values = max_values
        self.state = SessionState.IDLE
        self._request: Request | None = None
        self._outgoing: list[str] = []
        self._events: list[Request] = []

    @property
    def closed(self) -> bool:
        """The session is over (``close`` received, fatal error sent, binary frame)."""
        return self.state is _ENDED

    @property
    def pending(self) -> Request | None:
        """The request received and not answered yet, if any."""
        return self._request if self.state in JSON_SERVER_ANSWERING else None

    def _check_reading(self) -> SessionState:
        state = self.state
        if state not in JSON_SERVER_READING:
            if state is _ENDED:
                raise LocalProtocolError("frame received on a closed session")
            raise LocalProtocolError("previous request not answered yet")
        return state

    def receive_data(self, data: str | bytes) -> None:
        """Feed one received frame. Next: :meth:`events_received` and :meth:`data_to_send`.

        Any frame is either turned into one request event or answered with an error frame.

        Raises:
            LocalProtocolError: A frame arrived while the previous request is unanswered,
                or after the session closed.
        """
        state = self._check_reading()
        if not isinstance(data, str):
            frame = _error_frame(ErrorCode.SESSION_ERROR, "Binary frames are not supported", {})
            self.state = fire(_TABLE, state, _SE.RECEIVE_BINARY)
            self._outgoing.append(frame)
            return
        try:
            request = decode_request(data, self.max_values)
        except BadRequest as bad:
            try:
                frame = _error_frame(bad.code, bad.message, bad.details)
            except LocalProtocolError:  # input nested too deep to be echoed back
                frame = _error_frame(bad.code, bad.message, {})
            self.state = fire(_TABLE, state, _SE.RECEIVE_BAD_FRAME)
            self._outgoing.append(frame)
            return
        self.state = fire(_TABLE, state, _REQUEST_EVENTS[type(request)])
        self._request = request
        self._events.append(request)

    def receive_invalid_text(self, data: bytes) -> None:
        """Feed a text frame whose bytes are not UTF-8. Next: :meth:`data_to_send`.

        RFC 6455 would fail the connection; as for any other text that is not JSON, the
        frame is answered with ``INVALID_JSON`` and the session is kept (section 2.6).

        Raises:
            LocalProtocolError: As :meth:`receive_data`.
        """
        state = self._check_reading()
        try:
            data.decode()
        except UnicodeDecodeError as exc:
            reason = str(exc)
        else:
            raise LocalProtocolError("the frame is UTF-8: feed it to receive_data")
        frame = _error_frame(
            ErrorCode.INVALID_JSON, f"Invalid JSON: text is not UTF-8: {reason}", {}
        )
        self.state = fire(_TABLE, state, _SE.RECEIVE_BAD_FRAME)
        self._outgoing.append(frame)

    def events_received(self) -> list[Request]:
        """Return and forget the requests parsed so far."""
        events, self._events = self._events, []
        return events

    def _answer(self, event: JsonServerEvent, what: str, frame: str) -> None:
        try:
            next_state = fire(_TABLE, self.state, event)
        except IllegalTransition:
            raise LocalProtocolError(f"no pending request to answer with {what}") from None
        self.state = next_state
        self._outgoing.append(frame)

    def send_observation(
        self,
        observation: Mapping[str, Any],
        reward: float | None,
        done: bool,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Answer the pending ``reset`` or ``step``. Next: :meth:`data_to_send`.

        Raises:
            LocalProtocolError: No ``reset`` or ``step`` is pending, or a value is not JSON.
        """
        data = observation_payload(observation, reward, done, metadata)
        self._answer(
            _SE.SEND_OBSERVATION,
            "an observation",
            dumps({"type": "observation", "data": data}),
        )

    def send_state(self, state: Mapping[str, Any]) -> None:
        """Answer the pending ``state`` request. Next: :meth:`data_to_send`.

        Raises:
            LocalProtocolError: No ``state`` is pending, or a value is not JSON.
        """
        self._answer(_SE.SEND_STATE, "a state", dumps({"type": "state", "data": dict(state)}))

    def send_error(self, code: ErrorCode, message: str, **details: Any) -> None:
        """Answer the pending request (or, with a fatal code, none) with an error frame.

        Fatal codes (:attr:`ErrorCode.ends_session`) close the session; they may be sent
        unsolicited, e.g. CAPACITY_REACHED right after the upgrade. Next:
        :meth:`data_to_send`, then close the socket if :attr:`closed`.

        Raises:
            LocalProtocolError: The session is closed, a non-fatal code answers nothing,
                or a detail is not JSON.
        """
        if self.state is _ENDED:
            raise LocalProtocolError("cannot send an error on a closed session")
        frame = _error_frame(code, message, details)
        event = _SE.SEND_FATAL_ERROR if code.ends_session else _SE.SEND_ERROR
        self._answer(event, "an error", frame)

    def data_to_send(self) -> list[str]:
        """Return and forget the text frames queued for sending."""
        frames, self._outgoing = self._outgoing, []
        return frames


def _error_frame(code: ErrorCode, message: str, details: Mapping[str, Any]) -> str:
    return dumps({"type": "error", "data": {"message": message, "code": code.value, **details}})
