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
    """States of a JSON ``/ws`` session (``docs/protocol.md`` section 2.5)."""

    IDLE = "idle"  # open, no request in flight
    AWAITING_OBSERVATION = "awaiting_observation"  # reset or step sent
    AWAITING_STATE = "awaiting_state"  # state sent
    CLOSED = "closed"  # close sent, fatal error, or connection lost


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
    """

    def __init__(self) -> None:
        self.state = SessionState.IDLE
        self._outgoing: list[str] = []
        self._events: list[Reply] = []

    # -- sending ------------------------------------------------------------------
    def _send(self, request: Request, next_state: SessionState) -> None:
        if self.state is not SessionState.IDLE:
            raise LocalProtocolError(
                f"cannot send {type(request).__name__} in state {self.state.value}: "
                "OpenEnv allows one request in flight per session"
            )
        frame = encode_request(request)
        self.state = next_state
        self._outgoing.append(frame)

    def send_reset(self, **kwargs: Any) -> None:
        """Queue a ``reset``. Next: :meth:`data_to_send`, then await one reply."""
        self._send(ResetRequest(kwargs), SessionState.AWAITING_OBSERVATION)

    def send_step(self, action: Mapping[str, Any]) -> None:
        """Queue a ``step`` with the action's fields. Next: :meth:`data_to_send`."""
        self._send(StepRequest(action), SessionState.AWAITING_OBSERVATION)

    def send_state(self) -> None:
        """Queue a ``state`` request. Next: :meth:`data_to_send`."""
        self._send(StateRequest(), SessionState.AWAITING_STATE)

    def send_close(self) -> None:
        """Queue a ``close``; the session is closed at once. Allowed in any open state."""
        if self.state is SessionState.CLOSED:
            raise LocalProtocolError("session already closed")
        self._outgoing.append(encode_request(CloseRequest()))
        self.state = SessionState.CLOSED

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
        if self.state is SessionState.CLOSED:
            raise RemoteProtocolError("frame received on a closed session")
        try:
            reply = decode_reply(data)
            if isinstance(reply, ErrorReceived):
                if self.state is SessionState.IDLE and not reply.ends_session:
                    raise RemoteProtocolError(f"unsolicited {reply.code} error frame")
            elif self.state is SessionState.IDLE:
                raise RemoteProtocolError(f"unsolicited {type(reply).__name__} frame")
            elif not isinstance(reply, _EXPECTED[self.state]):
                raise RemoteProtocolError(
                    f"expected {_EXPECTED[self.state].__name__}, got {type(reply).__name__}"
                )
        except RemoteProtocolError:
            self.state = SessionState.CLOSED
            raise
        closes = isinstance(reply, ErrorReceived) and reply.ends_session
        self.state = SessionState.CLOSED if closes else SessionState.IDLE
        self._events.append(reply)

    def connection_lost(self) -> None:
        """Record that the socket is gone. Any pending request is lost."""
        self.state = SessionState.CLOSED

    def events_received(self) -> list[Reply]:
        """Return and forget the replies parsed so far."""
        events, self._events = self._events, []
        return events


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

    Attributes:
        closed: The session is over (``close`` received, fatal error sent, binary frame).
    """

    def __init__(self) -> None:
        self._pending: Request | None = None
        self._outgoing: list[str] = []
        self._events: list[Request] = []
        self.closed = False

    @property
    def pending(self) -> Request | None:
        """The request received and not answered yet, if any."""
        return self._pending

    def receive_data(self, data: str | bytes) -> None:
        """Feed one received frame. Next: :meth:`events_received` and :meth:`data_to_send`.

        Any frame is either turned into one request event or answered with an error frame.

        Raises:
            LocalProtocolError: A frame arrived while the previous request is unanswered,
                or after the session closed.
        """
        if self.closed:
            raise LocalProtocolError("frame received on a closed session")
        if self._pending is not None:
            raise LocalProtocolError("previous request not answered yet")
        if not isinstance(data, str):
            self._outgoing.append(
                _error_frame(ErrorCode.SESSION_ERROR, "Binary frames are not supported", {})
            )
            self.closed = True
            return
        try:
            request = _decode_request(data)
        except _BadRequest as bad:
            try:
                frame = _error_frame(bad.code, bad.message, bad.details)
            except LocalProtocolError:  # input nested too deep to be echoed back
                frame = _error_frame(bad.code, bad.message, {})
            self._outgoing.append(frame)
            return
        if isinstance(request, CloseRequest):
            self.closed = True
        else:
            self._pending = request
        self._events.append(request)

    def receive_invalid_text(self, data: bytes) -> None:
        """Feed a text frame whose bytes are not UTF-8. Next: :meth:`data_to_send`.

        RFC 6455 would fail the connection; as for any other text that is not JSON, the
        frame is answered with ``INVALID_JSON`` and the session is kept (section 2.6).

        Raises:
            LocalProtocolError: As :meth:`receive_data`.
        """
        if self.closed:
            raise LocalProtocolError("frame received on a closed session")
        if self._pending is not None:
            raise LocalProtocolError("previous request not answered yet")
        try:
            data.decode()
        except UnicodeDecodeError as exc:
            reason = str(exc)
        else:
            raise LocalProtocolError("the frame is UTF-8: feed it to receive_data")
        self._outgoing.append(
            _error_frame(ErrorCode.INVALID_JSON, f"Invalid JSON: text is not UTF-8: {reason}", {})
        )

    def events_received(self) -> list[Request]:
        """Return and forget the requests parsed so far."""
        events, self._events = self._events, []
        return events

    def _answer(self, kinds: tuple[type, ...], what: str, frame: str) -> None:
        if not isinstance(self._pending, kinds):
            raise LocalProtocolError(f"no pending request to answer with {what}")
        self._pending = None
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
            (ResetRequest, StepRequest),
            "an observation",
            dumps({"type": "observation", "data": data}),
        )

    def send_state(self, state: Mapping[str, Any]) -> None:
        """Answer the pending ``state`` request. Next: :meth:`data_to_send`.

        Raises:
            LocalProtocolError: No ``state`` is pending, or a value is not JSON.
        """
        self._answer((StateRequest,), "a state", dumps({"type": "state", "data": dict(state)}))

    def send_error(self, code: ErrorCode, message: str, **details: Any) -> None:
        """Answer the pending request (or, with a fatal code, none) with an error frame.

        Fatal codes (:attr:`ErrorCode.ends_session`) close the session; they may be sent
        unsolicited, e.g. CAPACITY_REACHED right after the upgrade. Next:
        :meth:`data_to_send`, then close the socket if :attr:`closed`.

        Raises:
            LocalProtocolError: The session is closed, a non-fatal code answers nothing,
                or a detail is not JSON.
        """
        if self.closed:
            raise LocalProtocolError("cannot send an error on a closed session")
        frame = _error_frame(code, message, details)
        if code.ends_session:
            self._pending = None
            self.closed = True
            self._outgoing.append(frame)
        else:
            self._answer((ResetRequest, StepRequest, StateRequest), "an error", frame)

    def data_to_send(self) -> list[str]:
        """Return and forget the text frames queued for sending."""
        frames, self._outgoing = self._outgoing, []
        return frames


def _error_frame(code: ErrorCode, message: str, details: Mapping[str, Any]) -> str:
    return dumps({"type": "error", "data": {"message": message, "code": code.value, **details}})
