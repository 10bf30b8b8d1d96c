"""OpenEnv's JSON ``/ws`` protocol: its messages, error codes and codec (sans-I/O).

What travels (``docs/protocol.md`` sections 2.2 - 2.4, 2.6): the client's requests
(:class:`ResetRequest`, :class:`StepRequest`, :class:`StateRequest`, :class:`CloseRequest`),
the server's replies (:class:`ObservationReceived`, :class:`StateReceived`,
:class:`ErrorReceived`), and how each is written and read. The session state machines that
use them are :mod:`~openenv_gym.protocol.openenv.client` and
:mod:`~openenv_gym.protocol.openenv.server`.
"""

from __future__ import annotations

import enum
import itertools
import json
import math
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError

__all__ = [
    "BadRequest",
    "CloseRequest",
    "ErrorCode",
    "ErrorReceived",
    "ObservationReceived",
    "Reply",
    "Request",
    "ResetRequest",
    "StateReceived",
    "StateRequest",
    "StepRequest",
    "brief",
    "code_ends_session",
    "decode_reply",
    "decode_request",
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


class BoundedRepr(reprlib.Repr):
    """:class:`reprlib.Repr` at a bounded cost: a dict's or set's first entries, unsorted.

    reprlib sorts every key of a map before it shows its first few: a peer's map of a
    million keys would cost seconds. Here the first entries are shown in their order.

    Args:
        maxstring: Longest string (and other value) shown, characters.
    """

    def __init__(self, maxstring: int = 60) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = self.maxother = maxstring

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{" + self.fillvalue + "}"
        pieces = [
            f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
            for key, value in itertools.islice(x.items(), self.maxdict)
        ]
        if len(x) > self.maxdict:
            pieces.append(self.fillvalue)
        return "{" + ", ".join(pieces) + "}"

    def repr_set(self, x: set[Any], level: int) -> str:
        return self._unordered(x, level, "{", "}") if x else "set()"

    def repr_frozenset(self, x: frozenset[Any], level: int) -> str:
        return self._unordered(x, level, "frozenset({", "})") if x else "frozenset()"

    def _unordered(self, x: set[Any] | frozenset[Any], level: int, left: str, right: str) -> str:
        if level <= 0:
            return left + self.fillvalue + right
        pieces = [self.repr1(item, level - 1) for item in itertools.islice(x, self.maxset)]
        if len(x) > self.maxset:
            pieces.append(self.fillvalue)
        return left + ", ".join(pieces) + right


_REPR = BoundedRepr(60)
_SMALL_ITEMS = 32
_SMALL_TEXT = 200
_SMALL_DEPTH = 4


def brief(value: Any) -> str:
    """A short ``repr`` of untrusted data for error messages (bounded size and depth).

    >>> brief({"k" + str(i): i for i in range(10**6)})
    "{'k0': 0, 'k1': 1, 'k2': 2, 'k3': 3, ...}"
    """
    return _REPR.repr(value)


def cut(value: Any) -> Any:
    """``value`` if it is small, else its :func:`brief` repr: an error's echo of input.

    Small: at most 32 items in all, 4 levels deep, strings and bytes of at most 200
    characters. Deciding costs at most that much, however large ``value`` is.

    >>> cut({"message": "hi"}), cut(list(range(100)))
    ({'message': 'hi'}, '[0, 1, 2, 3, 4, 5, ...]')
    """
    return value if _is_small(value) else brief(value)


def _is_small(value: Any) -> bool:
    left = _SMALL_ITEMS
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str | bytes | bytearray):
            if len(item) > _SMALL_TEXT:
                return False
        elif isinstance(item, dict | list | tuple) and item:
            left -= len(item)
            if left < 0 or depth >= _SMALL_DEPTH:
                return False
            entries = [*item, *item.values()] if isinstance(item, dict) else item
            stack.extend((entry, depth + 1) for entry in entries)
    return True


MAX_ERRORS = 8
"""Errors one ``VALIDATION_ERROR`` lists at most; an entry after them gives the count."""


def more_errors(count: int, shown: int) -> dict[str, Any]:
    """The ``errors`` entry that says how many more there are than shown.

    >>> more_errors(1000, 8)["msg"]
    '1000 errors in all: the first 8 are shown'
    """
    return {
        "type": "too_many_errors",
        "loc": [],
        "msg": f"{count} errors in all: the first {shown} are shown",
        "input": None,
    }


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
    raise RemoteProtocolError(f"reward must be a finite number or null, got {brief(value)}")


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
        raise RemoteProtocolError(f"server frame is not a JSON object: {brief(text)}")
    kind = message.get("type")
    payload = message.get("data")
    if not isinstance(payload, dict):
        raise RemoteProtocolError(f"server frame {brief(kind)} has no object 'data'")
    if kind == "observation":
        observation = payload.get("observation")
        done = payload.get("done", False)
        metadata = payload.get("metadata")
        if not isinstance(observation, dict):
            raise RemoteProtocolError("observation frame without an 'observation' object")
        if not isinstance(done, bool):
            raise RemoteProtocolError(f"'done' must be a boolean, got {brief(done)}")
        if metadata is not None and not isinstance(metadata, dict):
            raise RemoteProtocolError(f"'metadata' must be an object, got {brief(metadata)}")
        return ObservationReceived(observation, _reward(payload.get("reward")), done, metadata)
    if kind == "state":
        return StateReceived(payload)
    if kind == "error":
        code = payload.get("code")
        message_text = payload.get("message", "")
        if not isinstance(code, str) or not isinstance(message_text, str):
            raise RemoteProtocolError(f"malformed error frame: {brief(payload)}")
        details = {k: v for k, v in payload.items() if k not in ("code", "message")}
        return ErrorReceived(code, message_text, details, code_ends_session(code))
    raise RemoteProtocolError(f"unknown server frame type {brief(kind)}")


class BadRequest(RemoteProtocolError):
    """A malformed client frame, with the error frame an OpenEnv server answers."""

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


def _error(kind: str, loc: str, msg: str, value: Any) -> dict[str, Any]:
    """One entry of a VALIDATION_ERROR's ``errors``, shaped like Pydantic's (no ``url``)."""
    return {"type": kind, "loc": [cut(loc)], "msg": msg, "input": cut(value)}


_ALLOWED_KEYS = {
    "reset": ("type", "data"),
    "step": ("type", "data"),
    "state": ("type",),
    "close": ("type",),
}


def count_values(text: str | bytes, limit: int | None = None) -> int:
    """How many values a JSON text holds at most: its ``,``, ``[`` and ``{`` (plus one).

    Counted at the speed of ``str.count``, before parsing; inside strings too, so it may
    count more than there are. With a ``limit``, counting stops a slice past it (a text
    dense with values is refused from its first mebibyte).

    >>> count_values('{"a": [1, 2, 3], "b": {}}')
    7
    """
    count: Any = text.count
    marks = (",", "[", "{") if isinstance(text, str) else (b",", b"[", b"{")
    total = 1
    for start in range(0, len(text), _SLICE):
        end = start + _SLICE
        total += count(marks[0], start, end) + count(marks[1], start, end)
        total += count(marks[2], start, end)
        if limit is not None and total > limit:
            break
    return total


_SLICE = 2**20


def loads(text: str | bytes, max_values: int | None = None) -> Any:
    """``json.loads`` within a budget of values (:func:`count_values`), checked first.

    Raises:
        ValueError: Not JSON, or more than ``max_values`` values (the message says which).
        RecursionError: Nested deeper than the parser goes.
    """
    if (
        max_values is not None
        and len(text) > max_values
        and count_values(text, max_values) > max_values
    ):
        raise ValueError(f"more than {max_values} values (this server's limit)")
    return json.loads(text)


def decode_request(data: str, max_values: int | None = None) -> Request:
    """Parse one client frame (server side) as an OpenEnv server validates it (section 2.6).

    ``max_values``: refuse a frame holding more values (:func:`loads`) before parsing it.

    Raises:
        BadRequest: carrying the error frame to answer (session kept).
    """
    try:
        message = loads(data, max_values)
    except RecursionError as exc:
        raise BadRequest(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}") from exc
    except ValueError as exc:
        raise BadRequest(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}") from exc
    # OpenEnv ends the session with SESSION_ERROR on valid JSON that is not an object
    # (``list.get`` raises outside its message loop); we answer UNKNOWN_TYPE and go on.
    kind = message.get("type", "") if isinstance(message, dict) else ""
    if not isinstance(kind, str) or kind not in _ALLOWED_KEYS:
        shown = kind if isinstance(kind, str) and len(kind) <= _SMALL_TEXT else brief(kind)
        raise BadRequest(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {shown}")
    # Pydantic's order: declared fields first, then every extra key in input order.
    allowed = _ALLOWED_KEYS[kind]
    errors = []
    if kind == "step" and "data" not in message:
        errors.append(_error("missing", "data", "Field required", message))
    payload = message.get("data", {})
    if kind in ("reset", "step") and not isinstance(payload, dict):
        errors.append(_error("dict_type", "data", "Input should be a valid dictionary", payload))
    fields, extra = len(errors), len(message) - sum(key in message for key in allowed)
    errors.extend(
        itertools.islice(
            (
                _error("extra_forbidden", key, "Extra inputs are not permitted", value)
                for key, value in message.items()
                if key not in allowed
            ),
            MAX_ERRORS - fields,
        )
    )
    if errors:
        count = fields + extra
        if count > len(errors):
            errors.append(more_errors(count, len(errors)))
        raise BadRequest(ErrorCode.VALIDATION_ERROR, "Invalid message", errors=errors)
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
