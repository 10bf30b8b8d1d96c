"""The fuzz oracle's own reading of the wire: ``msgpack`` and ``json``, and docs/protocol.md.

Not a test module. Nothing here imports openenv-gym: frames are decoded with the
``msgpack`` package and the standard ``json`` module, the ndarray extension (section 3.3)
and the shapes of replies (2.3, 2.4, 3.4, 3.6, 3.9) are written out again from the spec.
A bug shared by our server and our client decoders (both sides of the same code) would
pass a check that used those decoders; it fails these.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import msgpack
import numpy as np

__all__ = [
    "JSON_ERROR_CODES",
    "WireError",
    "batch_reply_problem",
    "json_reply_problem",
    "slot_observations",
    "unpack",
]

DTYPES = frozenset(
    {"|b1", "|i1", "|u1"}
    | {f"{order}{kind}{size}" for order in "<>" for kind in "iu" for size in (2, 4, 8)}
    | {f"{order}f{size}" for order in "<>" for size in (2, 4, 8)}
)
"""Section 3.3: the 21 dtype strings an ndarray may have on the wire."""
MAX_NDIM = 32
NDARRAY = 1
FRAME_ERROR_CODES = frozenset({"INVALID_FRAME", "INVALID_REQUEST"})  # 3.6.2
JSON_ERROR_CODES = frozenset(  # 2.4 (a slot's code, 3.6.1, may be any string)
    {
        "INVALID_JSON",
        "UNKNOWN_TYPE",
        "VALIDATION_ERROR",
        "EXECUTION_ERROR",
        "CAPACITY_REACHED",
        "FACTORY_ERROR",
        "SESSION_ERROR",
    }
)


class WireError(ValueError):
    """The bytes are not what the spec allows."""


def _ndarray(payload: bytes) -> np.ndarray[Any, Any]:
    """Section 3.3, read from the table: L, dtype, ndim, u32 LE dims, C-order elements."""
    if len(payload) < 2:
        raise WireError("ndarray payload too short")
    length = payload[0]
    try:
        name = payload[1 : 1 + length].decode("ascii")
    except UnicodeDecodeError as exc:
        raise WireError("ndarray dtype is not ASCII") from exc
    if name not in DTYPES or len(payload) < 2 + length:
        raise WireError(f"ndarray dtype {name!r} not allowed")
    ndim = payload[1 + length]
    if ndim > MAX_NDIM:
        raise WireError(f"ndarray of {ndim} dimensions")
    start = 2 + length + 4 * ndim
    if len(payload) < start:
        raise WireError("ndarray dimensions cut short")
    shape = struct.unpack_from(f"<{ndim}I", payload, 2 + length)
    dtype = np.dtype(name)
    if math.prod(shape) * dtype.itemsize != len(payload) - start:
        raise WireError(f"ndarray {shape} {name}: wrong number of element bytes")
    body = payload[start:]
    if name == "|b1" and body.translate(None, b"\x00\x01"):
        raise WireError("boolean ndarray holds bytes other than 0 and 1")
    try:
        return np.frombuffer(body, dtype=dtype).reshape(shape)
    except ValueError as exc:
        raise WireError(f"ndarray {shape}: {exc}") from exc


def _ext(code: int, payload: bytes) -> Any:
    if code != NDARRAY:
        raise WireError(f"extension type {code}")
    return _ndarray(payload)


def unpack(data: bytes | str) -> dict[Any, Any]:
    """Section 3.2: one msgpack map, nothing after it, UTF-8 strs, known extensions only.

    Raises:
        WireError: Anything else (a text frame included).
    """
    if isinstance(data, str):
        raise WireError("a text frame")
    try:
        value = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext)
    except WireError:
        raise
    except Exception as exc:  # msgpack raises many types on garbage
        raise WireError(f"not msgpack: {exc!r}") from exc
    if not isinstance(value, dict):
        raise WireError(f"not a map but {type(value).__name__}")
    return value


def _uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _column_length(column: Any) -> int | None:
    """Entries of a 3.9.2 column (an array, or an ndarray by its first dimension)."""
    if isinstance(column, list):
        return len(column)
    if isinstance(column, np.ndarray) and column.ndim >= 1:
        return int(column.shape[0])
    return None


def _row(column: Any, k: int) -> Any:
    value = column[k]
    return value.tolist() if isinstance(value, np.ndarray) else value


def slot_observations(reply: dict[Any, Any], n: int) -> list[Any]:
    """Each slot's observation map of a ``reset`` / ``step`` reply (3.4.3, 3.9.4):
    ``obs`` per slot, or ``cols`` by column (None where the slot failed)."""
    columns = reply.get("cols")  # when both are there, cols counts (3.9.4)
    if not isinstance(columns, dict):
        obs = reply.get("obs")
        return list(obs) if isinstance(obs, list) else [None] * n
    errors = reply.get("errors", {})
    rows: list[Any] = [None if k in errors else {} for k in range(n)]
    for key, column in columns.items():
        for k, row in enumerate(rows):
            if row is not None:
                row[key] = _row(column, k)
    return rows


def _flags(value: Any, n: int, kind: str, version: int) -> str | None:
    """``reward`` / ``done``: an ndarray of the spec's dtype and shape (3.4.3), or on
    version 2 a plain array of ``n`` numbers (not booleans) / booleans (3.9.4)."""
    want = "<f8" if kind == "reward" else "|b1"
    if isinstance(value, np.ndarray):
        if value.dtype.str != want or value.shape != (n,):
            return f"{kind} is {value.dtype.str} {value.shape}, not {want} ({n},)"
        return None
    if version >= 2 and isinstance(value, list) and len(value) == n:
        if kind == "done" and all(isinstance(v, bool) for v in value):
            return None
        if kind == "reward" and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        ):
            return None
    return f"{kind} is {value!r:.80}, not {n} of them as the spec writes them"


def batch_reply_problem(
    request: dict[Any, Any] | None, reply: dict[Any, Any], version: int
) -> str | None:
    """What is wrong with ``reply`` as the answer to ``request`` (3.4, 3.6, 3.9), or None.

    ``request`` None: the frame was no map, so only an ``INVALID_FRAME`` with no id fits.
    """
    op, rid = reply.get("op"), reply.get("id")
    if op == "error":
        if reply.get("code") not in FRAME_ERROR_CODES:
            return f"unknown frame error code {reply.get('code')!r}"
        if not isinstance(reply.get("message"), str):
            return "a frame error without a message"
        if rid is not None and (request is None or rid != request.get("id")):
            return f"a frame error for id {rid!r}, which was not asked"
        if request is None and reply.get("code") != "INVALID_FRAME":
            return "a frame that is no map must be INVALID_FRAME"
        return None
    if request is None:
        return f"a frame that is no map answered with op {op!r}"
    if (op, rid) != (request.get("op"), request.get("id")):
        return f"answers op {op!r} id {rid!r}, not the request's"
    if op == "hello":
        return None if _uint(reply.get("version")) else "hello without a version"
    slots = request.get("slots")
    n = len(slots) if isinstance(slots, list) else 0
    errors = reply.get("errors", {})
    if not isinstance(errors, dict) or not all(_uint(pos) and pos < n for pos in errors):
        return f"errors {errors!r} are not positions of the {n} slots"
    for entry in errors.values():
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and isinstance(entry[0], str)
            and isinstance(entry[1], str)
            and isinstance(entry[2], dict)
        ):
            return f"slot error {entry!r:.80} is not [code, message, details]"
    if op in ("reset", "step"):
        for kind in ("reward", "done"):
            problem = _flags(reply.get(kind), n, kind, version)
            if problem is not None:
                return problem
        if "obs" not in reply and "cols" not in reply:
            return "a reply without obs or cols"
        if "obs" in reply and (not isinstance(reply["obs"], list) or len(reply["obs"]) != n):
            return f"obs is not one entry per slot ({n})"
        if "cols" in reply:
            if version < 2:
                return "cols on a version-1 connection"
            columns = reply["cols"]
            if not isinstance(columns, dict) or any(
                not isinstance(key, str) or _column_length(c) != n for key, c in columns.items()
            ):
                return f"cols are not columns of {n} entries"
            return None  # a position in errors has no result; the others have one
        results = reply["obs"]
    elif op == "state":
        results = reply.get("state")
        if not isinstance(results, list) or len(results) != n:
            return f"state is not one entry per slot ({n})"
    else:  # open, close: a position without an error succeeded
        return None
    for k, result in enumerate(results):
        if (result is None) == (k not in errors):
            which = "neither" if result is None else "both"
            return f"slot position {k} has {which} a result and an error"
    return None


def json_reply_problem(text: str) -> tuple[str | None, dict[str, Any]]:
    """What is wrong with a ``/ws`` reply (2.3, 2.4), read with ``json.loads``; and it."""
    try:
        reply = json.loads(text)
    except ValueError as exc:
        return f"not JSON: {exc}", {}
    if not isinstance(reply, dict) or not isinstance(reply.get("data"), dict):
        return "not {type, data: {...}}", {}
    kind, data = reply.get("type"), reply["data"]
    if kind == "observation":
        if not isinstance(data.get("observation"), dict):
            return "an observation without an observation map", reply
        if not isinstance(data.get("done"), bool):
            return "an observation without a boolean done", reply
        reward = data.get("reward")
        if reward is not None and not isinstance(reward, int | float):  # bool is an int
            return f"reward {reward!r} is no number", reply
        return None, reply
    if kind == "state":
        return None, reply
    if kind == "error":
        if data.get("code") not in JSON_ERROR_CODES:
            return f"unknown error code {data.get('code')!r}", reply
        if not isinstance(data.get("message"), str):
            return "an error without a message", reply
        return None, reply
    return f"unknown reply type {kind!r}", reply
