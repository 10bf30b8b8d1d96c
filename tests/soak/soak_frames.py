"""Hypothesis strategies of hostile frames for both wire protocols (and raw TCP bytes).

Not a test module; tests/soak/test_soak_fuzz.py draws from it. Each strategy yields a
:class:`Frame`: the bytes (or text) to send, whether it goes as a text frame, and what
it is (``kind``, for the failure report). Frames are *valid-ish*: mostly well-formed
requests whose fields hold random values of random types -- wrong types, huge and
negative numbers, NaN and infinities, lone surrogates, invalid UTF-8, unknown ops,
unopened slots -- mixed with random bytes, truncated and padded frames, frames of the
other protocol, and frames over the server's ``max_frame``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
from hypothesis import strategies as st

from openenv_gym.protocol.arrays import ALLOWED_DTYPES, pack_ndarray

OPEN_SLOTS = (0, 1, 2, 3)
"""Slots the fuzzed batched connections have open (and reset) before any case."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame to send.

    Attributes:
        data: Its payload: ``bytes`` (any frame) or ``str`` (a text frame, UTF-8 encoded
            by the WebSocket client).
        text: Send it as a text frame (``bytes`` payloads may then be invalid UTF-8).
        kind: What it is, for reports.
    """

    data: bytes | str
    text: bool
    kind: str

    @property
    def size(self) -> int:
        """Its payload's size in bytes."""
        return len(
            self.data.encode("utf-8", "surrogatepass") if isinstance(self.data, str) else self.data
        )

    @property
    def utf8(self) -> bool:
        """Whether its payload is valid UTF-8 (what a text frame must be)."""
        if isinstance(self.data, str):
            try:
                self.data.encode()
            except UnicodeEncodeError:
                return False
            return True
        try:
            self.data.decode()
        except UnicodeDecodeError:
            return False
        return True

    def wire(self) -> bytes | str:
        """What to hand the WebSocket client (a ``str`` that UTF-8 cannot encode as bytes)."""
        if isinstance(self.data, str) and not self.utf8:
            return self.data.encode("utf-8", "surrogatepass")
        return self.data

    def __repr__(self) -> str:
        shown = repr(self.data)
        if len(shown) > 300:
            shown = shown[:300] + f"... ({self.size} bytes)"
        return f"Frame({self.kind}, text={self.text}, {shown})"


@st.composite
def weighted(draw: st.DrawFn, *choices: tuple[int, st.SearchStrategy[Any]]) -> Any:
    """Draw from one of ``choices`` (weight, strategy), in proportion to the weights.

    (``st.one_of`` picks its branches unevenly, and repeating a branch does not weigh
    it.) Shrinking goes towards the first choice.
    """
    k = draw(st.integers(0, sum(weight for weight, _ in choices) - 1))
    for weight, strategy in choices:
        if k < weight:
            return draw(strategy)
        k -= weight
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------ leaves

characters = st.characters() | st.characters(categories=["Cs"])  # lone surrogates too
texts = st.text(characters, max_size=24)
special_ints = st.sampled_from(
    [0, 1, -1, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63)]
)
msgpack_ints = st.integers(-(2**63), 2**64 - 1) | special_ints
special_floats = st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 1e308, -1e308, 5e-324, 2.0**64]
)
floats = st.floats() | special_floats
binaries = st.binary(max_size=32)


def _ndarray_payload(dtype: bytes, ndim: int, dims: list[int], body: bytes) -> bytes:
    shape = b"".join(d.to_bytes(4, "little") for d in dims)
    return bytes([len(dtype) % 256]) + dtype + bytes([ndim % 256]) + shape + body


bad_ndarrays = st.builds(
    lambda payload: msgpack.ExtType(1, payload),
    st.builds(
        _ndarray_payload,
        st.sampled_from(
            [d.encode() for d in ALLOWED_DTYPES] + [b"O", b"|S4", b"<U2", b"<c16", b"|V8", b""]
        )
        | st.binary(max_size=6),
        st.integers(0, 40),
        st.lists(st.integers(0, 4) | st.integers(0, 2**32 - 1), max_size=6),
        st.binary(max_size=64),
    ),
)
good_ndarrays = st.builds(
    lambda dtype, shape, seed: msgpack.ExtType(
        1, pack_ndarray(np.random.default_rng(seed).integers(0, 2, shape).astype(dtype))
    ),
    st.sampled_from(sorted(ALLOWED_DTYPES)),
    st.lists(st.integers(0, 4), max_size=3).map(tuple),
    st.integers(0, 2**16),
)
extensions = (
    st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=32))
    | st.builds(msgpack.Timestamp, st.integers(0, 2**34), st.integers(0, 999_999_999))
    | bad_ndarrays
    | good_ndarrays
)
leaves = st.none() | st.booleans() | msgpack_ints | floats | texts | binaries | extensions
keys = texts | msgpack_ints | binaries | st.none() | st.booleans() | floats
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=10,
)

# ----------------------------------------------------------------------- /batch frames

_PACKER_OPTIONS: dict[str, Any] = {"use_bin_type": True, "unicode_errors": "surrogatepass"}


def pack(value: Any) -> bytes:
    """msgpack of ``value``; strings with lone surrogates go out as invalid UTF-8."""
    return msgpack.Packer(**_PACKER_OPTIONS).pack(value)


ops = st.sampled_from(["open", "reset", "step", "state", "close"])
junk_ops = st.sampled_from(["hello", "error", "bogus", "", "STEP", "step\x00"]) | leaves
slot_lists = st.lists(st.integers(0, 7), min_size=1, max_size=8, unique=True)
wild_slot_lists = (
    st.lists(st.integers(0, 7) | msgpack_ints, max_size=6)  # duplicates, negatives, huge
    | st.lists(leaves, max_size=4)  # wrong types
    | st.builds(
        lambda start, n: list(range(start, start + n)),
        st.integers(0, 2**32),
        st.integers(0, 20_000),
    )
    | leaves
)
# valid msgpack of every type but extensions, no lone surrogates: what a sloppy client sends
clean_texts = st.text(max_size=24)
clean_leaves = st.none() | st.booleans() | msgpack_ints | floats | clean_texts | binaries
clean_values = st.recursive(
    clean_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(clean_texts, inner, max_size=4),
    max_leaves=8,
)
messages = clean_texts | clean_texts | clean_texts | texts | clean_values | values
step_arguments = st.fixed_dictionaries(
    {"message": messages}, optional={"metadata": clean_values | values, "extra": values}
)
reset_arguments = st.fixed_dictionaries(
    {},
    optional={
        "seed": msgpack_ints | floats | clean_values,
        "episode_id": clean_texts | texts | binaries | clean_values,
        "extra": values,
    },
)
argument_maps = (
    step_arguments | reset_arguments | st.dictionaries(keys, values, max_size=4) | leaves
)

_PERTURBATIONS = ["op", "id", "slots", "args", "length", "key", "drop"]


@st.composite
def batch_requests(draw: st.DrawFn) -> dict[Any, Any]:
    """A well-formed request on open and unopened slots, then perturbed 0 to 2 times.

    Its arguments hold random values of random types (the server validates them per
    slot); a perturbation breaks the request itself: a wrong op, id, slot list or
    argument list, an argument list of the wrong length, an unknown key, a missing key.
    """
    op = draw(ops)
    slots = draw(slot_lists)
    request: dict[Any, Any] = {"op": op, "id": draw(st.integers(1, 2**32 - 1)), "slots": slots}
    n = len(slots)
    if op in ("reset", "step") or draw(st.integers(0, 9)) == 0:
        arguments = reset_arguments if op == "reset" else step_arguments
        if draw(st.integers(0, 3)) == 0:  # version 2: by column (refused on version 1)
            columns = draw(
                st.dictionaries(
                    st.sampled_from(["message", "seed", "episode_id"]),
                    st.lists(messages, min_size=n, max_size=n) | good_ndarrays,
                    max_size=2,
                )
            )
            request["cols"] = columns
            if draw(st.integers(0, 3)) == 0:
                request["numeric"] = draw(
                    st.lists(
                        st.sampled_from(list(columns) or ["message"]) | texts | leaves, max_size=2
                    )
                )
        else:
            request["args"] = draw(st.lists(arguments, min_size=n, max_size=n))
    for perturbation in draw(st.lists(st.sampled_from(_PERTURBATIONS), max_size=2)):
        if perturbation == "op":
            request["op"] = draw(junk_ops)
        elif perturbation == "id":
            request["id"] = draw(special_ints | st.integers(0, 2**32) | leaves)
        elif perturbation == "slots":
            request["slots"] = draw(wild_slot_lists)
        elif perturbation == "args":
            request[draw(st.sampled_from(["args", "cols", "numeric"]))] = draw(
                values | st.lists(argument_maps, max_size=4)
            )
        elif perturbation == "length":
            request["args"] = draw(st.lists(argument_maps, max_size=10))
        elif perturbation == "key":
            request[draw(keys)] = draw(values)
        else:
            request.pop(draw(st.sampled_from(["op", "id", "slots", "args"])), None)
    return request


hello_requests = st.fixed_dictionaries(
    {"op": st.just("hello"), "id": st.just(0) | st.just(0) | special_ints | leaves},
    optional={
        "versions": st.lists(st.integers(0, 3), max_size=3) | st.lists(leaves, max_size=3) | leaves,
        "client": clean_texts | texts | leaves,
    },
)


def _truncated(data: bytes, cut: float) -> bytes:
    return data[: int(len(data) * cut)]


def batch_frames(max_frame: int) -> st.SearchStrategy[Frame]:
    """Frames for an open ``/batch`` connection (after ``hello``)."""
    request_bytes = batch_requests().map(pack)
    return weighted(
        (50, request_bytes.map(lambda b: Frame(b, False, "request"))),
        (3, hello_requests.map(lambda m: Frame(pack(m), False, "hello"))),
        (5, values.map(lambda v: Frame(pack(v), False, "msgpack value"))),
        (4, st.binary(max_size=256).map(lambda b: Frame(b, False, "random bytes"))),
        (
            5,
            st.builds(_truncated, request_bytes, st.floats(0, 0.999)).map(
                lambda b: Frame(b, False, "truncated")
            ),
        ),
        (
            4,
            st.builds(lambda a, b: a + b, request_bytes, st.binary(min_size=1, max_size=16)).map(
                lambda b: Frame(b, False, "trailing bytes")
            ),
        ),
        (
            3,
            st.builds(lambda r, v: pack(r) + pack(v), batch_requests(), values).map(
                lambda b: Frame(b, False, "two maps")
            ),
        ),
        (
            8,
            json_frames(max_frame, oversize=False).map(
                lambda f: Frame(f.data, True, "text " + f.kind)
            ),
        ),
        (
            1,
            st.integers(1, 1024).map(lambda k: Frame(b"\x00" * (max_frame + k), False, "oversize")),
        ),
    )


def hello_frames() -> st.SearchStrategy[Frame]:
    """Frames for a ``/batch`` connection before ``hello``."""
    return weighted(
        (6, hello_requests.map(lambda m: Frame(pack(m), False, "hello"))),
        (3, batch_requests().map(lambda m: Frame(pack(m), False, "request before hello"))),
        (1, st.binary(max_size=64).map(lambda b: Frame(b, False, "random bytes"))),
    )


# ------------------------------------------------------------------------ /ws frames

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | special_ints
    | st.sampled_from([2**64, -(2**63) - 1, 10**30, -(10**30)])
    | floats
    | texts
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(texts, inner, max_size=5),
    max_leaves=10,
)
clean_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | clean_texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(clean_texts, inner, max_size=4),
    max_leaves=8,
)
json_messages_of_step = (
    clean_texts | clean_texts | clean_texts | texts | clean_json_values | json_values
)


@st.composite
def json_requests(draw: st.DrawFn) -> Any:
    """A well-formed ``/ws`` message (2.2), then perturbed 0 to 2 times."""
    kind = draw(st.sampled_from(["step", "step", "step", "reset", "reset", "state", "close"]))
    message: dict[str, Any] = {"type": kind}
    if kind == "step":
        message["data"] = draw(
            st.fixed_dictionaries(
                {"message": json_messages_of_step},
                optional={"metadata": clean_json_values | json_values},
            )
        )
    elif kind == "reset" and draw(st.booleans()):
        message["data"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "seed": st.integers() | json_values,
                    "episode_id": clean_texts | json_values,
                },
            )
        )
    for perturbation in draw(
        st.lists(st.sampled_from(["type", "data", "key", "drop", "value"]), max_size=2)
    ):
        if perturbation == "type":
            message["type"] = draw(
                st.sampled_from(["mcp", "observation", "error", "bogus", "", "Step"]) | json_values
            )
        elif perturbation == "data":
            message["data"] = draw(json_values)
        elif perturbation == "key":
            message[draw(texts)] = draw(json_values)
        elif perturbation == "drop":
            message.pop(draw(st.sampled_from(["type", "data"])), None)
        else:
            return draw(json_values)  # not an object at all, mostly
    return message


def _utf8ish(text: str) -> bytes:
    """UTF-8, except that lone surrogates are written as UTF-8 cannot (invalid bytes)."""
    return text.encode("utf-8", "surrogatepass")


def _dumps(value: Any, ascii_only: bool) -> str:
    """JSON with NaN / Infinity tokens; lone surrogates escaped (ASCII) or raw."""
    return json.dumps(value, allow_nan=True, ensure_ascii=ascii_only)


_NUMBER_TEXTS = st.sampled_from(
    ["NaN", "-NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "-0", "0.0e0"]
) | st.integers(300, 6000).map(lambda k: "9" * k)


def json_frames(max_frame: int, *, oversize: bool = True) -> st.SearchStrategy[Frame]:
    """Text (and a few binary) frames for a JSON ``/ws`` session."""
    dumped = st.builds(_dumps, json_requests(), st.booleans())
    valid_step = st.builds(lambda m: {"type": "step", "data": {"message": m}}, texts | json_values)
    strategies = [
        (55, dumped.map(lambda s: Frame(s, True, "message"))),
        (
            6,
            st.builds(
                lambda t, number: f'{{"type":"{t}","data":{{"message":{number},"seed":{number}}}}}',
                st.sampled_from(["step", "reset"]),
                _NUMBER_TEXTS,
            ).map(lambda s: Frame(s, True, "number")),
        ),
        (4, st.text(characters, max_size=64).map(lambda s: Frame(s, True, "random text"))),
        (4, st.binary(max_size=64).map(lambda b: Frame(b, True, "random bytes as text"))),
        (
            6,
            st.builds(_truncated, dumped.map(_utf8ish), st.floats(0, 0.999)).map(
                lambda b: Frame(b, True, "truncated")
            ),
        ),
        (
            3,
            st.builds(
                lambda depth, close: "[" * depth + "]" * (depth if close else 0),
                st.integers(1, 60_000),
                st.booleans(),
            ).map(lambda s: Frame(s, True, "deep nesting")),
        ),
        (
            3,
            st.builds(_dumps, valid_step, st.booleans()).map(
                lambda s: Frame(_utf8ish(s), False, "binary")
            ),
        ),
    ]
    if oversize:
        strategies.append(
            (1, st.integers(1, 1024).map(lambda k: Frame("x" * (max_frame + k), True, "oversize")))
        )
    return weighted(*strategies)


# -------------------------------------------------------------------------- raw bytes


def _ws_frame(
    fin: bool, rsv: int, opcode: int, masked: bool, payload: bytes, declared: int | None
) -> bytes:
    """One WebSocket frame as a client would write it, possibly lying about its length."""
    length = len(payload) if declared is None else declared
    head = bytes([(0x80 if fin else 0) | (rsv & 0x7) << 4 | (opcode & 0xF)])
    mask_bit = 0x80 if masked else 0
    if length < 126:
        head += bytes([mask_bit | length])
    elif length < 2**16:
        head += bytes([mask_bit | 126]) + length.to_bytes(2, "big")
    else:
        head += bytes([mask_bit | 127]) + length.to_bytes(8, "big")
    if masked:
        key = b"\x01\x02\x03\x04"
        head += key
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + payload


ws_frames = st.builds(
    _ws_frame,
    st.booleans(),
    st.integers(0, 7) | st.just(0),
    st.sampled_from([0, 1, 2, 8, 9, 10]) | st.integers(0, 15),
    st.booleans() | st.just(True),
    st.binary(max_size=200),
    st.none() | st.none() | st.integers(0, 2**63 - 1),
)


@dataclass(frozen=True, slots=True)
class RawCase:
    """Bytes written on a fresh TCP connection (then the write side is shut).

    Attributes:
        path: ``None``: the bytes are all there is (an HTTP head, or garbage); else a
            valid WebSocket upgrade to this path comes first.
        data: The bytes after it.
    """

    path: str | None
    data: bytes

    def __repr__(self) -> str:
        return f"RawCase(path={self.path!r}, data={self.data[:300]!r} ({len(self.data)} bytes))"


_REQUEST_LINES = st.sampled_from(
    [
        b"GET /ws HTTP/1.1",
        b"GET /batch HTTP/1.1",
        b"POST /health HTTP/1.1",
        b"GET / HTTP/1.0",
        b"GET /schema HTTP/1.1",
    ]
) | st.binary(max_size=40)
_HEADERS = st.lists(
    st.sampled_from(
        [
            b"Host: x",
            b"Upgrade: websocket",
            b"Connection: Upgrade",
            b"Sec-WebSocket-Version: 13",
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            b"Sec-WebSocket-Protocol: openenv-gym.batch.v2",
            b"Content-Length: 5",
            b"Content-Length: -1",
            b"Content-Length: 99999999999999999999",
            b"Transfer-Encoding: chunked",
            b"Origin: http://evil.example",
        ]
    )
    | st.binary(max_size=30),
    max_size=8,
)
http_heads = st.builds(
    lambda line, headers, end, body: (
        b"\r\n".join([line, *headers]) + (b"\r\n\r\n" if end else b"") + body
    ),
    _REQUEST_LINES,
    _HEADERS,
    st.booleans(),
    st.binary(max_size=32),
)
raw_cases = weighted(
    (
        4,
        st.builds(
            lambda path, frames, cut: RawCase(
                path, _truncated(b"".join(frames), cut) if cut else b"".join(frames)
            ),
            st.sampled_from(["/ws", "/batch"]),
            st.lists(ws_frames, min_size=1, max_size=4),
            st.none() | st.floats(0, 0.999),
        ),
    ),
    (3, http_heads.map(lambda b: RawCase(None, b))),
    (1, st.binary(max_size=256).map(lambda b: RawCase(None, b))),
    (
        2,
        st.builds(
            lambda path, b: RawCase(path, b),
            st.sampled_from(["/ws", "/batch"]),
            st.binary(max_size=256),
        ),
    ),
)
