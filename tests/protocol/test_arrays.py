"""The ndarray extension type (docs/protocol.md section 3.3)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.arrays import (
    ALLOWED_DTYPES,
    MAX_NDIM,
    NDARRAY_EXT,
    pack_ndarray,
    unpack_ndarray,
)

NAMES = [
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
    "int64", "uint64", "float16", "float32", "float64",
]  # fmt: skip


def raised(call: Any, *args: Any) -> BaseException | None:
    """The exception ``call(*args)`` raises, if any."""
    try:
        call(*args)
    except Exception as exc:
        return exc
    return None


def header(dtype: str, shape: tuple[int, ...]) -> bytes:
    return (
        bytes([len(dtype)])
        + dtype.encode("ascii")
        + bytes([len(shape)])
        + struct.pack(f"<{len(shape)}I", *shape)
    )


# -- 3.3: the allowed dtypes -------------------------------------------------------------


def test_extension_type_code_is_1() -> None:
    assert NDARRAY_EXT == 1


def test_allowed_dtypes_are_the_21_spelled_in_the_spec() -> None:
    """3.3: twelve numeric/bool types, both byte orders; one-byte types only as ``|``."""
    expected = {"|b1", "|i1", "|u1"} | {
        f"{order}{kind}{size}" for order in "<>" for kind in "iuf" for size in (2, 4, 8)
    }
    assert expected == ALLOWED_DTYPES
    assert len(ALLOWED_DTYPES) == 21
    assert {np.dtype(name).newbyteorder("<").str for name in NAMES} <= ALLOWED_DTYPES


# -- 3.3: layout ---------------------------------------------------------------------


def test_layout_is_dtype_ndim_u32_dims_then_c_order_bytes() -> None:
    array = np.arange(6, dtype="<i2").reshape(2, 3)
    payload = pack_ndarray(array)
    assert payload == (
        b"\x03<i2" + b"\x02" + b"\x02\x00\x00\x00\x03\x00\x00\x00" + array.tobytes(order="C")
    )


def test_zero_dimensional_array_has_no_dimensions() -> None:
    payload = pack_ndarray(np.array(1.5, dtype="<f8"))
    assert payload == b"\x03<f8\x00" + struct.pack("<d", 1.5)
    back = unpack_ndarray(payload)
    assert back.shape == ()
    assert back.item() == 1.5


def test_non_contiguous_arrays_travel_in_c_order() -> None:
    array = np.arange(12, dtype="<u4").reshape(3, 4).T  # Fortran-ordered view
    back = unpack_ndarray(pack_ndarray(array))
    np.testing.assert_array_equal(back, array)
    assert back.flags.c_contiguous


def test_byte_order_is_kept() -> None:
    array = np.arange(3, dtype=">f4")
    payload = pack_ndarray(array)
    assert payload[:4] == b"\x03>f4"
    back = unpack_ndarray(payload)
    assert back.dtype.str == ">f4"
    np.testing.assert_array_equal(back, array)


def test_unpacked_arrays_are_writable_copies() -> None:
    payload = pack_ndarray(np.zeros(4, dtype="|u1"))
    back = unpack_ndarray(payload)
    back[0] = 7
    assert back.flags.writeable
    assert unpack_ndarray(payload)[0] == 0


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from(sorted(ALLOWED_DTYPES)).map(np.dtype),
        shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
    )
)
def test_round_trip_every_allowed_dtype_and_shape(array: np.ndarray) -> None:
    """3.3: what is packed unpacks to the same dtype, shape and bytes."""
    back = unpack_ndarray(pack_ndarray(array))
    assert back.dtype == array.dtype
    assert back.shape == array.shape
    assert back.tobytes() == np.ascontiguousarray(array).tobytes()


# -- 3.3: what cannot be sent (LocalProtocolError) -------------------------------------


@pytest.mark.parametrize(
    "array",
    [
        np.array([object()], dtype=object),
        np.array(["a"]),
        np.array([b"a"]),
        np.array([1 + 2j]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.zeros(2, dtype=[("a", "<i4")]),
        np.zeros(2, dtype=np.longdouble),
    ],
)
def test_disallowed_dtypes_cannot_be_sent(array: np.ndarray) -> None:
    with pytest.raises(LocalProtocolError, match="dtype"):
        pack_ndarray(array)


def test_more_than_32_dimensions_cannot_be_sent() -> None:
    assert MAX_NDIM == 32
    pack_ndarray(np.zeros((1,) * 32, dtype="|u1"))
    with pytest.raises(LocalProtocolError, match="dimensions"):
        pack_ndarray(np.zeros((1,) * 33, dtype="|u1"))


def test_dimensions_of_2_to_the_32_cannot_be_sent() -> None:
    pack_ndarray(np.zeros((0, 2**32 - 1), dtype="<f4"))
    with pytest.raises(LocalProtocolError, match="below 2\\*\\*32"):
        pack_ndarray(np.zeros((0, 2**32), dtype="<f4"))


# -- 3.3: what a receiver rejects (RemoteProtocolError) --------------------------------


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"", "truncated"),  # no dtype length
        (b"\x03<f", "truncated"),  # dtype cut short, no ndim
        (b"\x03<f4", "truncated"),  # no ndim
        (b"\x03<f4\x02\x01\x00\x00\x00", "truncated"),  # second dimension missing
        (b"\x03\xff\xfe\xfd\x00", "truncated"),  # dtype is not ASCII
        (b"\x00\x00", "not allowed"),  # empty dtype
        (b"\x02|O\x00" + b"\x00" * 8, "not allowed"),  # object
        (b"\x03<U1\x00" + b"\x00" * 4, "not allowed"),  # unicode
        (b"\x03<c8\x00" + b"\x00" * 8, "not allowed"),  # complex
        (b"\x03=f4\x00" + b"\x00" * 4, "not allowed"),  # native order is not spelled '='
        (b"\x03<f4\x01\x02\x00\x00\x00" + b"\x00" * 4, "needs 8 bytes, got 4"),
        (b"\x03<f4\x01\x01\x00\x00\x00" + b"\x00" * 5, "needs 4 bytes, got 5"),
        (b"\x03|b1\x01\x03\x00\x00\x00\x00\x01\x02", "other than 0 and 1"),
    ],
)
def test_malformed_payloads_raise_remote_protocol_error(payload: bytes, match: str) -> None:
    with pytest.raises(RemoteProtocolError, match=match):
        unpack_ndarray(payload)


def test_more_than_32_dimensions_are_rejected() -> None:
    payload = header("|u1", (1,) * 33) + b"\x00"
    with pytest.raises(RemoteProtocolError, match="33 dimensions"):
        unpack_ndarray(payload)
    assert unpack_ndarray(header("|u1", (1,) * 32) + b"\x07").shape == (1,) * 32


def test_empty_array_whose_other_dimensions_overflow_is_rejected() -> None:
    """Zero elements, zero bytes, but numpy cannot even describe the shape."""
    payload = header("<f8", (0, 2**32 - 1, 2**32 - 1))
    with pytest.raises(RemoteProtocolError, match="too big"):
        unpack_ndarray(payload)


def test_canonical_booleans_are_accepted() -> None:
    back = unpack_ndarray(header("|b1", (3,)) + b"\x00\x01\x00")
    assert back.tolist() == [False, True, False]
    assert unpack_ndarray(header("|b1", (0,))).shape == (0,)


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_only_raise_remote_protocol_error(data: bytes) -> None:
    """3.3: untrusted payloads either decode or raise our error, nothing else."""
    error = raised(unpack_ndarray, data)
    assert error is None or isinstance(error, RemoteProtocolError), repr(error)


@settings(max_examples=300)
@given(
    st.sampled_from(sorted(ALLOWED_DTYPES)),
    st.lists(st.integers(0, 2**32 - 1), max_size=40),
    st.binary(max_size=32),
)
def test_arbitrary_headers_only_raise_remote_protocol_error(
    dtype: str, shape: list[int], body: bytes
) -> None:
    error = raised(unpack_ndarray, header(dtype, tuple(shape)) + body)
    assert error is None or isinstance(error, RemoteProtocolError), repr(error)
