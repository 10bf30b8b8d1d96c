"""Error replies that can always be sent: an error never costs the connection.

An error reply echoes what the client sent (Pydantic's ``input``) and what the environment
raised, and either may hold what the wire cannot carry: bytes that are not UTF-8, a lone
surrogate, NaN (not JSON), a set, an exception object. Everything here turns such values
into their (shortened) ``repr``, so the reply is one JSON-and-msgpack-safe value and the
request, or the one slot of it, fails alone (``docs/protocol.md`` sections 2.6, 3.6.1).
"""

from __future__ import annotations

import json
import logging
import math
import reprlib
from typing import Any

from pydantic import ValidationError

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op

__all__ = ["describe", "execution_error", "validation_error", "validation_errors", "wire_safe"]

logger = logging.getLogger("openenv_gym.runtime")

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 200
_REPR.maxlevel = 3
_MAX_DEPTH = 32
_INT_RANGE = range(-(2**63), 2**64)  # what msgpack carries


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
    r"""The exception's message (its class name when empty), safe for any reply.

    >>> describe(ValueError("bad \udcff")), describe(KeyError())
    ("'bad \\udcff'", 'KeyError')
    """
    try:
        text = str(exc)
    except Exception:  # a __str__ that raises
        text = ""
    return wire_safe(text or type(exc).__name__)  # type: ignore[no-any-return]


def validation_errors(exc: ValidationError) -> list[Any]:
    """Pydantic's error list without ``url``, as a client sees it over either protocol."""
    try:
        errors = json.loads(exc.json(include_url=False))
    except ValueError:  # an input Pydantic cannot write as JSON: bytes that are not UTF-8...
        errors = exc.errors(include_url=False)
    return wire_safe(errors)  # type: ignore[no-any-return]


def validation_error(exc: ValidationError) -> bp.SlotError:
    """A slot's ``VALIDATION_ERROR``."""
    return bp.SlotError(
        op.ErrorCode.VALIDATION_ERROR.value, "Invalid message", {"errors": validation_errors(exc)}
    )


def execution_error(exc: BaseException) -> bp.SlotError:
    """A slot's ``EXECUTION_ERROR``: the environment raised ``exc``."""
    logger.debug("environment raised", exc_info=exc)
    return bp.SlotError(op.ErrorCode.EXECUTION_ERROR.value, describe(exc))
