"""Numeric arrays on the wire: raw bytes + dtype + shape (``docs/protocol.md`` section 3.3).

An ``ndarray`` travels as msgpack extension type :data:`NDARRAY_EXT`. Its payload is::

    u8  len(dtype)      then the numpy dtype string, ASCII (e.g. "<f4", "|b1")
    u8  ndim            then ndim x u32 little-endian dimensions
    ... the array's bytes in C order

Only fixed-size numeric and boolean dtypes are allowed (never ``object``), so decoding
untrusted bytes cannot run code or allocate more than the frame already holds.

>>> array = np.arange(6, dtype="<i2").reshape(2, 3)
>>> pack_ndarray(array)[:9].hex(" ")
'03 3c 69 32 02 02 00 00 00'
>>> unpack_ndarray(pack_ndarray(array)).tolist()
[[0, 1, 2], [3, 4, 5]]
"""

from __future__ import annotations

import struct
from typing import Any, Literal

import numpy as np

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError

__all__ = ["ALLOWED_DTYPES", "MAX_NDIM", "NDARRAY_EXT", "pack_ndarray", "unpack_ndarray"]

NDARRAY_EXT = 1
"""msgpack extension type code of an ndarray."""

_BYTE_ORDERS: tuple[Literal["<"], Literal[">"]] = ("<", ">")

_TYPES = "bool int8 uint8 int16 uint16 int32 uint32 int64 uint64 float16 float32 float64"

ALLOWED_DTYPES = frozenset(
    np.dtype(name).newbyteorder(order).str for name in _TYPES.split() for order in _BYTE_ORDERS
)
"""dtype strings accepted on the wire (both byte orders; one-byte types use ``|``)."""

MAX_NDIM = 32
"""Most dimensions an array on the wire may have."""

_MAX_DIM = 2**32 - 1
_BOOL = "|b1"


def pack_ndarray(array: np.ndarray[Any, Any]) -> bytes:
    """Encode an array as the payload of an :data:`NDARRAY_EXT` extension.

    Raises:
        LocalProtocolError: The dtype cannot travel (object, string, structured...), or
            the array has more than :data:`MAX_NDIM` dimensions or a dimension of 2**32
            or more.
    """
    dtype: str = array.dtype.str
    if dtype not in ALLOWED_DTYPES:
        raise LocalProtocolError(f"arrays of dtype {array.dtype} cannot be sent")
    if array.ndim > MAX_NDIM:
        raise LocalProtocolError(f"arrays of more than {MAX_NDIM} dimensions cannot be sent")
    if any(dim > _MAX_DIM for dim in array.shape):
        raise LocalProtocolError(f"array dimensions must be below 2**32, got {array.shape}")
    header = bytes([len(dtype)]) + dtype.encode("ascii") + bytes([array.ndim])
    shape = struct.pack(f"<{array.ndim}I", *array.shape)
    body: bytes = np.ascontiguousarray(array).tobytes()
    return header + shape + body


def unpack_ndarray(data: bytes) -> np.ndarray[Any, Any]:
    """Decode an :data:`NDARRAY_EXT` payload into a new, writable array.

    Raises:
        RemoteProtocolError: The payload is not a valid array encoding.
    """
    view = memoryview(data)
    try:
        dtype_len = view[0]
        dtype = bytes(view[1 : 1 + dtype_len]).decode("ascii")
        ndim = view[1 + dtype_len]
        offset = 2 + dtype_len
        shape = struct.unpack_from(f"<{ndim}I", view, offset)
    except (IndexError, UnicodeDecodeError, struct.error) as exc:
        raise RemoteProtocolError(f"truncated ndarray header: {exc}") from exc
    if dtype not in ALLOWED_DTYPES:
        raise RemoteProtocolError(f"ndarray dtype {dtype!r} is not allowed on the wire")
    if ndim > MAX_NDIM:
        raise RemoteProtocolError(f"ndarray has {ndim} dimensions, at most {MAX_NDIM} allowed")
    body = view[offset + 4 * ndim :]
    count = 1
    for dim in shape:
        count *= dim
    size = count * np.dtype(dtype).itemsize
    if size != len(body):
        raise RemoteProtocolError(
            f"ndarray of shape {shape} and dtype {dtype} needs {size} bytes, got {len(body)}"
        )
    if dtype == _BOOL and size and np.frombuffer(body, dtype=np.uint8).max() > 1:
        raise RemoteProtocolError("ndarray of dtype |b1 holds bytes other than 0 and 1")
    try:
        array = np.frombuffer(body, dtype=dtype).reshape(shape)
    except ValueError as exc:  # an empty array whose other dimensions overflow numpy's size
        raise RemoteProtocolError(f"ndarray of shape {shape} is too big: {exc}") from exc
    return array.copy()
