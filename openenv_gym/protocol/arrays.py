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


_PREFIX = {dtype: bytes([len(dtype)]) + dtype.encode("ascii") for dtype in ALLOWED_DTYPES}
_DTYPE = {prefix[1:]: np.dtype(dtype) for dtype, prefix in _PREFIX.items()}
_SHAPES = [struct.Struct(f"<{ndim}I") for ndim in range(MAX_NDIM + 1)]


def pack_ndarray(array: np.ndarray[Any, Any]) -> bytes:
    """Encode an array as the payload of an :data:`NDARRAY_EXT` extension.

    Raises:
        LocalProtocolError: The dtype cannot travel (object, string, structured...), or
            the array has more than :data:`MAX_NDIM` dimensions or a dimension of 2**32
            or more.
    """
    prefix = _PREFIX.get(array.dtype.str)
    if prefix is None:
        raise LocalProtocolError(f"arrays of dtype {array.dtype} cannot be sent")
    ndim = array.ndim
    if ndim > MAX_NDIM:
        raise LocalProtocolError(f"arrays of more than {MAX_NDIM} dimensions cannot be sent")
    try:
        shape = _SHAPES[ndim].pack(*array.shape)
    except struct.error:
        raise LocalProtocolError(
            f"array dimensions must be below 2**32, got {array.shape}"
        ) from None
    return b"".join((prefix, bytes((ndim,)), shape, array.tobytes()))


def unpack_ndarray(data: bytes) -> np.ndarray[Any, Any]:
    """Decode an :data:`NDARRAY_EXT` payload into a new, writable array.

    Raises:
        RemoteProtocolError: The payload is not a valid array encoding.
    """
    try:
        dtype_len = data[0]
        dtype = _DTYPE.get(bytes(data[1 : 1 + dtype_len]))
        ndim = data[1 + dtype_len]
    except IndexError as exc:
        raise RemoteProtocolError(f"truncated ndarray header: {exc}") from exc
    if dtype is None:
        try:
            name = bytes(data[1 : 1 + dtype_len]).decode("ascii")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"truncated ndarray header: {exc}") from exc
        raise RemoteProtocolError(f"ndarray dtype {name!r} is not allowed on the wire")
    if ndim > MAX_NDIM:
        raise RemoteProtocolError(f"ndarray has {ndim} dimensions, at most {MAX_NDIM} allowed")
    offset = 2 + dtype_len
    try:
        shape = _SHAPES[ndim].unpack_from(data, offset)
    except struct.error as exc:
        raise RemoteProtocolError(f"truncated ndarray header: {exc}") from exc
    start = offset + 4 * ndim
    count = 1
    for dim in shape:
        count *= dim
    size = count * dtype.itemsize
    if size != len(data) - start:
        raise RemoteProtocolError(
            f"ndarray of shape {shape} and dtype {dtype.str} needs {size} bytes, "
            f"got {len(data) - start}"
        )
    body = memoryview(data)[start:]
    if dtype.kind == "b" and size and bytes(body).translate(None, b"\x00\x01"):
        raise RemoteProtocolError("ndarray of dtype |b1 holds bytes other than 0 and 1")
    try:
        array = np.frombuffer(body, dtype=dtype).reshape(shape)
    except ValueError as exc:  # an empty array whose other dimensions overflow numpy's size
        raise RemoteProtocolError(f"ndarray of shape {shape} is too big: {exc}") from exc
    return array.copy()
