"""OpenEnv's JSON ``/ws`` session protocol, client and server side, sans-I/O.

One WebSocket carries one environment session. Every frame is a JSON *text* frame
``{"type": ..., "data": ...}``. The client sends ``reset`` / ``step`` / ``state`` /
``close``; the server answers each of the first three with exactly one ``observation``,
``state`` or ``error`` frame and answers ``close`` by closing the socket. There are no
request ids, so at most one request is in flight (``docs/protocol.md`` section 2), and a
timeout is fatal for the session (section 2.5).

Usage, client side::

    session = ClientSession()
    session.send_reset(seed=1)
    for frame in session.data_to_send(): ...   # send each as a text frame
    session.receive_data(text_frame)           # for every frame received
    for event in session.events_received(): ...

The server side (:class:`ServerSession`) mirrors it: ``receive_data`` turns frames into
request events (answering malformed frames itself, as OpenEnv servers do), and
``send_observation`` / ``send_state`` / ``send_error`` queue replies.

One cohesive concern, over 600 lines: OpenEnv's JSON ``/ws`` protocol (docs/protocol.md
section 2), both ends of a session and their state machines.
"""

from __future__ import annotations

import enum
import json
import math
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError

__all__ = [
    "ClientSession",
    "CloseRequest",
    "ErrorCode",
    "ErrorReceived",
    "ObservationReceived",
    "Reply",
    "Request",
    "ResetRequest",
    "ServerSession",
    "SessionState",
    "StateReceived",
    "StateRequest",
    "StepRequest",
    "code_ends_session",
    "decode_reply",
    "dumps",
    "encode_request",
    "observation_payload",
]


class ErrorCode(enum.StrEnum):
    """OpenEnv's ``WSErrorCode`` values (``docs/protocol.md`` section 2.4)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"

    @property
    def ends_session(self) -> bool:
        """Whether the server closes the session after sending this error."""
        return self in _FATAL_CODES


_FATAL_CODES = frozenset(
    {ErrorCode.CAPACITY_REACHED, ErrorCode.FACTORY_ERROR, ErrorCode.SESSION_ERROR}
)


def code_ends_session(code: str) -> bool:
    """Whether an error code (possibly unknown to us) ends an OpenEnv session.

    >>> code_ends_session("CAPACITY_REACHED"), code_ends_session("SOMETHING_NEW")
    (True, False)
    """
    try:
        return ErrorCode(code).ends_session
    except ValueError:
        return False


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = _REPR.maxother = 60


def _brief(value: Any) -> str:
    """A short ``repr`` of untrusted data for error messages (bounded size and depth)."""
    return _REPR.repr(value)


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class ResetRequest:
    """``{"type": "reset", "data": kwargs}``: start a new episode."""

    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StepRequest:
    """``{"type": "step", "data": action}``: apply one action."""

    action: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class StateRequest:
    """``{"type": "state"}``: read the environment's state."""


@dataclass(frozen=True, slots=True)
class CloseRequest:
    """``{"type": "close"}``: end the session. The server replies by closing the socket."""


Request = ResetRequest | StepRequest | StateRequest | CloseRequest

# ----------------------------------------------------------------------------- replies


class ObservationReceived(NamedTuple):
    """An ``observation`` reply to ``reset`` or ``step``.

    A named tuple, not a dataclass: the batched transport builds one per slot per step.

    Attributes:
        observation: The environment's observation fields.
        reward: The reward as sent (``None`` when the server sent ``null``).
        done: The episode-over flag.
        metadata: Top-level ``metadata`` (openenv >= 0.4 sends it when non-empty), or None.
    """

    observation: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StateReceived:
    """A ``state`` reply."""

    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ErrorReceived:
    """An ``error`` frame.

    Attributes:
        code: The error code (``ErrorCode`` value or an unknown string).
        message: Human-readable message.
        details: Other fields of the frame (``errors``, ``max_sessions``, ...).
        ends_session: Whether the server ends the session with this error.
    """

    code: str
    message: str
    details: dict[str, Any]
    ends_session: bool


Reply = ObservationReceived | StateReceived | ErrorReceived

# ------------------------------------------------------------------------------ codec


def dumps(obj: Any) -> str:
    """Serialise like Pydantic's ``model_dump_json``: compact, UTF-8, no NaN (section 2.1).

    >>> dumps({"type": "state", "data": {"word": "café"}})
    '{"type":"state","data":{"word":"café"}}'

    Raises:
        LocalProtocolError: ``obj`` is not JSON (a NaN, a set, nesting too deep, a string
            with a lone surrogate, which UTF-8 cannot carry...).
    """
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        if not text.isascii():
            text.encode()  # a lone surrogate ("\ud800") would fail only when sent
    except (TypeError, ValueError, RecursionError) as exc:
        raise LocalProtocolError(f"cannot encode as JSON: {exc}") from exc
    return text


def observation_payload(
    observation: Mapping[str, Any],
    reward: float | None,
    done: bool,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the ``data`` of an ``observation`` frame as openenv >= 0.4 does (section 2.3).

    ``observation`` is sent as given (openenv >= 0.4 keeps its ``metadata`` field in it);
    ``metadata`` is copied to the top level only when it is non-empty.

    >>> observation_payload({"echoed_message": "hi"}, 0.2, False, metadata={})
    {'observation': {'echoed_message': 'hi'}, 'reward': 0.2, 'done': False}
    >>> observation_payload({}, None, True, metadata={"turn": 3})["metadata"]
    {'turn': 3}
    """
    data: dict[str, Any] = {"observation": dict(observation), "reward": reward, "done": done}
    if metadata:
        data["metadata"] = dict(metadata)
    return data


def _text(data: str | bytes, peer: str) -> str:
    if isinstance(data, bytes | bytearray | memoryview):
        raise RemoteProtocolError(f"{peer} sent a binary frame; OpenEnv /ws uses text frames")
    return data


def _reward(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool | int | float):
        try:
            reward = float(value)
        except OverflowError:  # an integer beyond float range
            reward = math.inf
        if math.isfinite(reward):
            return reward
    raise RemoteProtocolError(f"reward must be a finite number or null, got {_brief(value)}")


def decode_reply(data: str | bytes) -> Reply:
    """Parse one server frame (client side, section 2.3).

    >>> decode_reply('{"type":"state","data":{"step_count":2}}')
    StateReceived(state={'step_count': 2})

    Raises:
        RemoteProtocolError: The frame is not a valid OpenEnv reply.
    """
    text = _text(data, "server")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"server sent invalid JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise RemoteProtocolError(f"server frame is not a JSON object: {_brief(text)}")
    kind = message.get("type")
    payload = message.get("data")
    if not isinstance(payload, dict):
        raise RemoteProtocolError(f"server frame {_brief(kind)} has no object 'data'")
    if kind == "observation":
        observation = payload.get("observation")
        done = payload.get("done", False)
        metadata = payload.get("metadata")
        if not isinstance(observation, dict):
            raise RemoteProtocolError("observation frame without an 'observation' object")
        if not isinstance(done, bool):
            raise RemoteProtocolError(f"'done' must be a boolean, got {_brief(done)}")
        if metadata is not None and not isinstance(metadata, dict):
            raise RemoteProtocolError(f"'metadata' must be an object, got {_brief(metadata)}")
        return ObservationReceived(observation, _reward(payload.get("reward")), done, metadata)
    if kind == "state":
        return StateReceived(payload)
    if kind == "error":
        code = payload.get("code")
        message_text = payload.get("message", "")
        if not isinstance(code, str) or not isinstance(message_text, str):
            raise RemoteProtocolError(f"malformed error frame: {_brief(payload)}")
        details = {k: v for k, v in payload.items() if k not in ("code", "message")}
        return ErrorReceived(code, message_text, details, code_ends_session(code))
    raise RemoteProtocolError(f"unknown server frame type {_brief(kind)}")


class _BadRequest(Exception):
    """A malformed client frame, with the error frame an OpenEnv server answers."""

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


def _error(kind: str, loc: str, msg: str, value: Any) -> dict[str, Any]:
    """One entry of a VALIDATION_ERROR's ``errors``, shaped like Pydantic's (no ``url``)."""
    return {"type": kind, "loc": [loc], "msg": msg, "input": value}


_ALLOWED_KEYS = {
    "reset": ("type", "data"),
    "step": ("type", "data"),
    "state": ("type",),
    "close": ("type",),
}


def _decode_request(data: str) -> Request:
    """Parse one client frame (server side) as an OpenEnv server validates it (section 2.6).

    Raises:
        _BadRequest: carrying the error frame to answer (session kept).
    """
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _BadRequest(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}") from exc
    # OpenEnv ends the session with SESSION_ERROR on valid JSON that is not an object
    # (``list.get`` raises outside its message loop); we answer UNKNOWN_TYPE and go on.
    kind = message.get("type", "") if isinstance(message, dict) else ""
    if not isinstance(kind, str) or kind not in _ALLOWED_KEYS:
        shown = kind if isinstance(kind, str) else _brief(kind)
        raise _BadRequest(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {shown}")
    # Pydantic's order: declared fields first, then every extra key in input order.
    errors = []
    if kind == "step" and "data" not in message:
        errors.append(_error("missing", "data", "Field required", message))
    payload = message.get("data", {})
    if kind in ("reset", "step") and not isinstance(payload, dict):
        errors.append(_error("dict_type", "data", "Input should be a valid dictionary", payload))
    errors.extend(
        _error("extra_forbidden", key, "Extra inputs are not permitted", value)
        for key, value in message.items()
        if key not in _ALLOWED_KEYS[kind]
    )
    if errors:
        raise _BadRequest(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=errors)
    if kind == "reset":
        return ResetRequest(payload)
    if kind == "step":
        return StepRequest(payload)
    if kind == "state":
        return StateRequest()
    return CloseRequest()


def encode_request(request: Request) -> str:
    """Serialise a request (section 2.2), compactly.

    The official client uses ``json.dumps`` defaults (spaces, ASCII escapes); servers
    parse both the same way.

    >>> encode_request(ResetRequest({"seed": 1}))
    '{"type":"reset","data":{"seed":1}}'

    Raises:
        LocalProtocolError: The kwargs or action are not JSON.
    """
    if isinstance(request, ResetRequest):
        return dumps({"type": "reset", "data": dict(request.kwargs)})
    if isinstance(request, StepRequest):
        return dumps({"type": "step", "data": dict(request.action)})
    if isinstance(request, StateRequest):
        return dumps({"type": "state"})
    return dumps({"type": "close"})


# --------------------------------------------------------------------- state machines


class SessionState(enum.Enum):
    """States of a JSON ``/ws`` session (``docs/protocol.md`` section 2.5).

    Both ends use them: :attr:`ClientSession.state` and :attr:`ServerSession.state` go
    through the same states for the same frames.
    """

    IDLE = "idle"  # open, no request in flight
    AWAITING_OBSERVATION = "awaiting_observation"  # reset or step sent, not answered yet
    AWAITING_STATE = "awaiting_state"  # state sent, not answered yet
    CLOSED = "closed"  # close sent, fatal error, or connection lost

    # Members are singletons, so identity is their equality: hash them by identity too, in
    # C (Enum's own __hash__ hashes the name in Python), for the transition tables' keys.
    __hash__ = object.__hash__


class _ClientEvent(enum.Enum):
    """What happens to a :class:`ClientSession`: the columns of its transition table."""

    SEND_RESET = "send_reset"
    SEND_STEP = "send_step"
    SEND_STATE = "send_state"
    SEND_CLOSE = "send_close"
    RECEIVE_OBSERVATION = "receive_observation"
    RECEIVE_STATE = "receive_state"
    RECEIVE_ERROR = "receive_error"  # an error frame whose code keeps the session
    RECEIVE_FATAL_ERROR = "receive_fatal_error"  # an error frame whose code ends it
    PROTOCOL_ERROR = "protocol_error"  # a frame that is malformed or answers nothing asked
    CONNECTION_LOST = "connection_lost"

    __hash__ = object.__hash__


class _ServerEvent(enum.Enum):
    """What happens to a :class:`ServerSession`: the columns of its transition table."""

    RECEIVE_RESET = "receive_reset"
    RECEIVE_STEP = "receive_step"
    RECEIVE_STATE = "receive_state"
    RECEIVE_CLOSE = "receive_close"
    RECEIVE_BAD_FRAME = "receive_bad_frame"  # a malformed text frame, answered (2.6)
    RECEIVE_BINARY = "receive_binary"  # a binary frame, answered with SESSION_ERROR
    SEND_OBSERVATION = "send_observation"
    SEND_STATE = "send_state"
    SEND_ERROR = "send_error"  # with a code that keeps the session
    SEND_FATAL_ERROR = "send_fatal_error"  # with a code that ends it

    __hash__ = object.__hash__


_IDLE = SessionState.IDLE
_AWAITING_OBSERVATION = SessionState.AWAITING_OBSERVATION
_AWAITING_STATE = SessionState.AWAITING_STATE
_CLOSED = SessionState.CLOSED

_CE = _ClientEvent
_CLIENT_TRANSITIONS: dict[tuple[SessionState, _ClientEvent], SessionState] = {
    (_IDLE, _CE.SEND_RESET): _AWAITING_OBSERVATION,
    (_IDLE, _CE.SEND_STEP): _AWAITING_OBSERVATION,
    (_IDLE, _CE.SEND_STATE): _AWAITING_STATE,
    (_IDLE, _CE.SEND_CLOSE): _CLOSED,
    (_IDLE, _CE.RECEIVE_FATAL_ERROR): _CLOSED,  # unsolicited, e.g. CAPACITY_REACHED
    (_IDLE, _CE.PROTOCOL_ERROR): _CLOSED,
    (_IDLE, _CE.CONNECTION_LOST): _CLOSED,
    (_AWAITING_OBSERVATION, _CE.SEND_CLOSE): _CLOSED,
    (_AWAITING_OBSERVATION, _CE.RECEIVE_OBSERVATION): _IDLE,
    (_AWAITING_OBSERVATION, _CE.RECEIVE_ERROR): _IDLE,
    (_AWAITING_OBSERVATION, _CE.RECEIVE_FATAL_ERROR): _CLOSED,
    (_AWAITING_OBSERVATION, _CE.PROTOCOL_ERROR): _CLOSED,
    (_AWAITING_OBSERVATION, _CE.CONNECTION_LOST): _CLOSED,
    (_AWAITING_STATE, _CE.SEND_CLOSE): _CLOSED,
    (_AWAITING_STATE, _CE.RECEIVE_STATE): _IDLE,
    (_AWAITING_STATE, _CE.RECEIVE_ERROR): _IDLE,
    (_AWAITING_STATE, _CE.RECEIVE_FATAL_ERROR): _CLOSED,
    (_AWAITING_STATE, _CE.PROTOCOL_ERROR): _CLOSED,
    (_AWAITING_STATE, _CE.CONNECTION_LOST): _CLOSED,
    (_CLOSED, _CE.CONNECTION_LOST): _CLOSED,
}
"""``ClientSession``: (state, event) -> next state. A pair not listed is illegal (2.5)."""

_SE = _ServerEvent
_SERVER_TRANSITIONS: dict[tuple[SessionState, _ServerEvent], SessionState] = {
    (_IDLE, _SE.RECEIVE_RESET): _AWAITING_OBSERVATION,
    (_IDLE, _SE.RECEIVE_STEP): _AWAITING_OBSERVATION,
    (_IDLE, _SE.RECEIVE_STATE): _AWAITING_STATE,
    (_IDLE, _SE.RECEIVE_CLOSE): _CLOSED,
    (_IDLE, _SE.RECEIVE_BAD_FRAME): _IDLE,
    (_IDLE, _SE.RECEIVE_BINARY): _CLOSED,
    (_IDLE, _SE.SEND_FATAL_ERROR): _CLOSED,  # unsolicited, e.g. CAPACITY_REACHED
    (_AWAITING_OBSERVATION, _SE.SEND_OBSERVATION): _IDLE,
    (_AWAITING_OBSERVATION, _SE.SEND_ERROR): _IDLE,
    (_AWAITING_OBSERVATION, _SE.SEND_FATAL_ERROR): _CLOSED,
    (_AWAITING_STATE, _SE.SEND_STATE): _IDLE,
    (_AWAITING_STATE, _SE.SEND_ERROR): _IDLE,
    (_AWAITING_STATE, _SE.SEND_FATAL_ERROR): _CLOSED,
}
"""``ServerSession``: (state, event) -> next state. A pair not listed is illegal (2.5)."""

_CLIENT_RECEIVES = (
    _CE.RECEIVE_OBSERVATION,
    _CE.RECEIVE_STATE,
    _CE.RECEIVE_ERROR,
    _CE.RECEIVE_FATAL_ERROR,
    _CE.PROTOCOL_ERROR,
)
_SERVER_RECEIVES = tuple(event for event in _ServerEvent if event.name.startswith("RECEIVE_"))
# where a frame may be fed at all: the states with some receive event in their table row
_CLIENT_READING = frozenset(s for s, e in _CLIENT_TRANSITIONS if e in _CLIENT_RECEIVES)
_SERVER_READING = frozenset(s for s, e in _SERVER_TRANSITIONS if e in _SERVER_RECEIVES)
# where a request is pending on the server: the states a kept-session error answers
_SERVER_ANSWERING = frozenset(s for s, e in _SERVER_TRANSITIONS if e is _SE.SEND_ERROR)

_REPLY_EVENTS: dict[type, _ClientEvent] = {
    ObservationReceived: _CE.RECEIVE_OBSERVATION,
    StateReceived: _CE.RECEIVE_STATE,
}
_REQUEST_EVENTS: dict[type, _ServerEvent] = {
    ResetRequest: _SE.RECEIVE_RESET,
    StepRequest: _SE.RECEIVE_STEP,
    StateRequest: _SE.RECEIVE_STATE,
    CloseRequest: _SE.RECEIVE_CLOSE,
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
    def _send(self, event: _ClientEvent, request: Request) -> None:
        next_state = _CLIENT_TRANSITIONS.get((self.state, event))
        if next_state is None:
            if event is _CE.SEND_CLOSE:
                raise LocalProtocolError("session already closed")
            raise LocalProtocolError(
                f"cannot send {type(request).__name__} in state {self.state.value}: "
                "OpenEnv allows one request in flight per session"
            )
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
        if state not in _CLIENT_READING:
            raise RemoteProtocolError("frame received on a closed session")
        try:
            reply = decode_reply(data)
            if isinstance(reply, ErrorReceived):
                event = _CE.RECEIVE_FATAL_ERROR if reply.ends_session else _CE.RECEIVE_ERROR
            else:
                event = _REPLY_EVENTS[type(reply)]
            next_state = _CLIENT_TRANSITIONS.get((state, event))
            if next_state is None:
                raise RemoteProtocolError(_unexpected(state, reply))
        except RemoteProtocolError:
            self.state = _CLIENT_TRANSITIONS[(state, _CE.PROTOCOL_ERROR)]
            raise
        self.state = next_state
        self._events.append(reply)

    def connection_lost(self) -> None:
        """Record that the socket is gone. Any pending request is lost."""
        self.state = _CLIENT_TRANSITIONS[(self.state, _CE.CONNECTION_LOST)]

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

    Attributes:
        state: The session's :class:`SessionState`.
    """

    def __init__(self) -> None:
        self.state = SessionState.IDLE
        self._request: Request | None = None
        self._outgoing: list[str] = []
        self._events: list[Request] = []

    @property
    def closed(self) -> bool:
        """The session is over (``close`` received, fatal error sent, binary frame)."""
        return self.state is _CLOSED

    @property
    def pending(self) -> Request | None:
        """The request received and not answered yet, if any."""
        return self._request if self.state in _SERVER_ANSWERING else None

    def _check_reading(self) -> SessionState:
        state = self.state
        if state not in _SERVER_READING:
            if state is _CLOSED:
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
            self.state = _SERVER_TRANSITIONS[(state, _SE.RECEIVE_BINARY)]
            self._outgoing.append(frame)
            return
        try:
            request = _decode_request(data)
        except _BadRequest as bad:
            try:
                frame = _error_frame(bad.code, bad.message, bad.details)
            except LocalProtocolError:  # input nested too deep to be echoed back
                frame = _error_frame(bad.code, bad.message, {})
            self.state = _SERVER_TRANSITIONS[(state, _SE.RECEIVE_BAD_FRAME)]
            self._outgoing.append(frame)
            return
        self.state = _SERVER_TRANSITIONS[(state, _REQUEST_EVENTS[type(request)])]
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
        self.state = _SERVER_TRANSITIONS[(state, _SE.RECEIVE_BAD_FRAME)]
        self._outgoing.append(frame)

    def events_received(self) -> list[Request]:
        """Return and forget the requests parsed so far."""
        events, self._events = self._events, []
        return events

    def _answer(self, event: _ServerEvent, what: str, frame: str) -> None:
        next_state = _SERVER_TRANSITIONS.get((self.state, event))
        if next_state is None:
            raise LocalProtocolError(f"no pending request to answer with {what}")
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
        if self.state is _CLOSED:
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
