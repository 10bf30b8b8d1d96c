"""The batched protocol's codec: one frame is one msgpack map (``docs/protocol.md`` 3.2, 3.3)."""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.arrays import NDARRAY_EXT, pack_ndarray, unpack_ndarray

__all__ = ["FrameBudgetError", "decode_frame", "encode_frame"]


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return msgpack.ExtType(NDARRAY_EXT, pack_ndarray(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, set | frozenset):  # tuples and lists are msgpack arrays already
        return list(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == NDARRAY_EXT:
        return unpack_ndarray(data)
    raise RemoteProtocolError(f"unknown msgpack extension type {code}")


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """Serialise one frame (a map) with ndarrays as extension types (sections 3.2, 3.3).

    numpy scalars travel as plain numbers, sets as arrays.

    >>> encode_frame({"op": "state", "id": 7, "slots": [0, 1]}).hex(" ")
    '83 a2 6f 70 a5 73 74 61 74 65 a2 69 64 07 a5 73 6c 6f 74 73 92 00 01'

    Raises:
        LocalProtocolError: Some value cannot be serialised.
    """
    try:
        frame: bytes = msgpack.packb(message, default=_default, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise LocalProtocolError(f"cannot encode frame: {exc}") from exc
    return frame


class FrameBudgetError(RemoteProtocolError):
    """A frame that decodes into more values than the receiver's budget (section 3.8)."""


class _Budget:
    """Counts the values a decode makes, as msgpack's hooks see them, and stops it.

    Every value but the frame's own map counts one: as each list is made its items are
    counted, as each map is made its keys and values. The hooks run as each container is
    made, so the decode stops within one container of the budget, and msgpack refuses a
    single container longer than the budget before making it.
    """

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def list_hook(self, value: list[Any]) -> list[Any]:
        self.left -= len(value)
        if self.left < 0:
            raise FrameBudgetError(self.message())
        return value

    def map_hook(self, value: dict[Any, Any]) -> dict[Any, Any]:
        self.left -= 2 * len(value)
        if self.left < 0:
            raise FrameBudgetError(self.message())
        return value

    def message(self) -> str:
        return f"frame decodes into more than {self.limit} values"


_GC_FREE = 64 * 1024
"""Frames larger than this are decoded with the garbage collector paused: a decode makes no
cycles, and a frame of many small containers would otherwise set off collection after
collection (several times the decode itself)."""


def decode_frame(
    data: bytes | str, max_size: int | None = None, max_values: int | None = None
) -> dict[Any, Any]:
    """Parse one frame into a map (section 3.2).

    Args:
        data: The frame; a ``str`` (a text frame) is always rejected.
        max_size: Largest frame accepted, in bytes; None for no limit.
        max_values: Most values the frame may hold, its own map aside (section 3.8: every
            key, value and item, at every level); the decode stops as soon as it is
            exceeded. A frame of at most ``max_values`` bytes cannot exceed it (a value
            takes a byte at least) and is decoded without counting. None: no limit.

    >>> decode_frame(encode_frame({"op": "state", "slots": [1, 2]}), max_values=6)
    {'op': 'state', 'slots': [1, 2]}
    >>> decode_frame(encode_frame({"op": "state", "slots": [1, 2]}), max_values=5)
    Traceback (most recent call last):
    ...
    openenv_gym.protocol.batch.codec.FrameBudgetError: frame decodes into more than 5 values

    Raises:
        FrameBudgetError: The frame decodes into more than ``max_values`` values.
        RemoteProtocolError: The data is not one msgpack map (or holds a bad extension).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RemoteProtocolError("batched protocol frames are binary, got a text frame")
    if max_size is not None and len(data) > max_size:
        raise RemoteProtocolError(f"frame of {len(data)} bytes exceeds {max_size}")
    paused = len(data) > _GC_FREE and gc.isenabled()
    if paused:
        gc.disable()
    try:
        message = _unpack(data, max_values)
    finally:
        if paused:
            gc.enable()
    if not isinstance(message, dict):
        raise RemoteProtocolError(f"frame is not a map but {type(message).__name__}")
    return message


def _unpack(data: bytes | bytearray | memoryview, max_values: int | None) -> Any:
    # every value takes a byte at least: a frame no longer than the budget cannot exceed it
    budget = None if max_values is None or len(data) <= max_values else _Budget(max_values)
    try:
        if budget is None:
            return msgpack.unpackb(
                data, ext_hook=_ext_hook, raw=False, strict_map_key=False, use_list=True
            )
        return msgpack.unpackb(
            data,
            ext_hook=_ext_hook,
            raw=False,
            strict_map_key=False,
            use_list=True,
            list_hook=budget.list_hook,
            object_hook=budget.map_hook,
            max_array_len=budget.limit,
            max_map_len=budget.limit,
        )
    except RemoteProtocolError:
        raise
    except ValueError as exc:
        if budget is not None and " exceeds max_" in str(exc):  # one container too long
            raise FrameBudgetError(budget.message()) from exc
        raise RemoteProtocolError(f"frame is not valid msgpack: {exc!r}") from exc
    except Exception as exc:  # msgpack raises many types on garbage
        raise RemoteProtocolError(f"frame is not valid msgpack: {exc!r}") from exc
