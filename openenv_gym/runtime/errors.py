"""Error replies that can always be sent, at a bounded cost: an error never costs the connection.

An error reply echoes what the client sent (Pydantic's ``input``) and what the environment
raised, and either may hold what the wire cannot carry: bytes that are not UTF-8, a lone
surrogate, NaN (not JSON), a set, an exception object. Everything here turns such values
into their (shortened) ``repr``, so the reply is one JSON-and-msgpack-safe value and the
request, or the one slot of it, fails alone (``docs/protocol.md`` sections 2.6, 3.6.1).

It is also bounded, whatever the input: a validation error lists at most
:data:`~openenv_gym.protocol.openenv.messages.MAX_ERRORS` of Pydantic's errors (then one
entry with their count), each echoing its input only when it is small (else a short repr,
``messages.cut``), and an exception's message is cut to :data:`MAX_MESSAGE` characters.
Pydantic's errors are not even read when there are more than :data:`_READ_ERRORS`: making
a million of them into Python objects costs seconds.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from pydantic import ValidationError

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.protocol.openenv.messages import MAX_ERRORS, BoundedRepr, cut, more_errors

__all__ = [
    "MAX_MESSAGE",
    "describe",
    "execution_error",
    "validation_error",
    "validation_errors",
    "wire_safe",
]

logger = logging.getLogger("openenv_gym.runtime")

MAX_MESSAGE = 1000
"""An exception's message in a reply is cut to this many characters."""

_REPR = BoundedRepr(200)
_MAX_DEPTH = 32
_INT_RANGE = range(-(2**63), 2**64)  # what msgpack carries
_READ_ERRORS = 64


def wire_safe(value: Any, depth: int = 0) -> Any:
    r"""``value`` as JSON and msgpack both carry it; whatever they cannot, as its ``repr``.

    Keeps None, bools, ints msgpack takes, finite floats, strings UTF-8 can encode, lists
    (tuples become lists) and dicts (keys as strings), 32 levels deep.

    >>> wire_safe({"input": b"\xff", "n": float("nan"), "ok": [1, "a"], 2: "\ud800"})
    {'input': "b'\\xff'", 'n': 'nan', 'ok': [1, 'a'], '2': "'\\ud800'"}
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value in _INT_RANGE else _REPR.repr(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode()
        except UnicodeEncodeError:
            return _REPR.repr(value)
        return value
    if depth < _MAX_DEPTH:
        if isinstance(value, list | tuple):
            return [wire_safe(item, depth + 1) for item in value]
        if isinstance(value, dict):
            return {_key(key): wire_safe(item, depth + 1) for key, item in value.items()}
    return _REPR.repr(value)


def _key(key: Any) -> str:
    return wire_safe(key if isinstance(key, str) else str(key), _MAX_DEPTH)  # type: ignore[no-any-return]


def describe(exc: BaseException) -> str:
    r"""The exception's message (its class name when empty), safe for any reply, and short.

    >>> describe(ValueError("bad \udcff")), describe(KeyError())
    ("'bad \\udcff'", 'KeyError')
    >>> len(describe(ValueError("x" * 10**6)))
    1000
    """
    try:
        text = str(exc)
    except Exception:  # a __str__ that raises
        text = ""
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    return wire_safe(text or type(exc).__name__)  # type: ignore[no-any-return]


def validation_errors(exc: ValidationError) -> list[Any]:
    """Pydantic's error list without ``url``, bounded, as a client sees it on either protocol.

    The first :data:`~openenv_gym.protocol.openenv.messages.MAX_ERRORS` errors, each with
    its ``input`` when small (else a short repr) and its ``msg`` cut; when there are more,
    an entry ``too_many_errors`` with their count. With more than :data:`_READ_ERRORS`
    errors, only that entry (reading them would cost more than the request is worth).
    """
    count = exc.error_count()
    if count > _READ_ERRORS:
        return [more_errors(count, 0)]
    errors = [_bounded(error) for error in exc.errors(include_url=False)[:MAX_ERRORS]]
    if count > len(errors):
        errors.append(more_errors(count, len(errors)))
    return wire_safe(errors)  # type: ignore[no-any-return]


def _bounded(error: Any) -> dict[str, Any]:
    """One of Pydantic's errors, each of its parts small."""
    out: dict[str, Any] = {
        "type": error["type"],
        "loc": [cut(part) for part in error["loc"]],
        "msg": _short(error["msg"]),
        "input": cut(error["input"]),
    }
    context = error.get("ctx")
    if context:
        out["ctx"] = {key: _context(value) for key, value in list(context.items())[:8]}
    return out


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _context(value: Any) -> Any:
    """A ``ctx`` value as Pydantic's JSON writes it: an exception as its message."""
    if isinstance(value, BaseException):
        return describe(value)
    return cut(value)


def validation_error(exc: ValidationError) -> bp.SlotError:
    """A slot's ``VALIDATION_ERROR``."""
    return bp.SlotError(
        op.ErrorCode.VALIDATION_ERROR.value, "Invalid message", {"errors": validation_errors(exc)}
    )


def execution_error(exc: BaseException) -> bp.SlotError:
    """A slot's error for ``exc``, raised by the environment: ``EXECUTION_ERROR``.

    A Pydantic ``ValidationError`` (an env checking its reset options or action with a
    model) is a ``VALIDATION_ERROR``, as OpenEnv's own ``/ws`` and our JSON sessions
    answer it.
    """
    if isinstance(exc, ValidationError):
        return validation_error(exc)
    logger.debug("environment raised", exc_info=exc)
    return bp.SlotError(op.ErrorCode.EXECUTION_ERROR.value, describe(exc))
