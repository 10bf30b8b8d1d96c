"""The batched protocol's codec: one frame is one msgpack map (``docs/protocol.md`` 3.2, 3.3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.arrays import NDARRAY_EXT, pack_ndarray, unpack_ndarray

__all__ = ["decode_frame", "encode_frame"]


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


def decode_frame(data: bytes | str, max_size: int | None = None) -> dict[Any, Any]:
    """Parse one frame into a map (section 3.2).

    Args:
        data: The frame; a ``str`` (a text frame) is always rejected.
        max_size: Largest frame accepted, in bytes; None for no limit.

    Raises:
        RemoteProtocolError: The data is not one msgpack map (or holds a bad extension).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RemoteProtocolError("batched protocol frames are binary, got a text frame")
    if max_size is not None and len(data) > max_size:
        raise RemoteProtocolError(f"frame of {len(data)} bytes exceeds {max_size}")
    try:
        message = msgpack.unpackb(
            data, ext_hook=_ext_hook, raw=False, strict_map_key=False, use_list=True
        )
    except RemoteProtocolError:
        raise
    except Exception as exc:  # msgpack raises many types on garbage (ValueError, ...)
        raise RemoteProtocolError(f"frame is not valid msgpack: {exc!r}") from exc
    if not isinstance(message, dict):
        raise RemoteProtocolError(f"frame is not a map but {type(message).__name__}")
    return message
