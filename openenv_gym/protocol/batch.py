"""openenv-gym's batched protocol, versions 1 and 2: msgpack binary frames, sans-I/O.

One WebSocket connection (path ``/batch``, subprotocol :data:`SUBPROTOCOL` for version 1,
:data:`SUBPROTOCOL_V2` for version 2) carries many environment *slots*. One frame carries
one operation for many slots; every reply lists a result or an error per slot, so one
failing env never fails the batch. Requests carry ids, so several may be in flight.
Version 2 adds the *columnar* forms: observations, metadata and actions may travel as
one column per field (``cols``, ``meta_cols``) instead of one map per slot, and numeric
columns as one ndarray. ``docs/protocol.md`` section 3 is the specification.

Usage, client side::

    conn = BatchClient()
    conn.send_hello()
    rid = conn.send_open([0, 1, 2])
    for frame in conn.data_to_send(): ...          # binary frames
    conn.receive_data(frame)
    for event in conn.events_received(): ...       # HelloReceived, BatchReplyReceived, ...

The server side (:class:`BatchServer`) turns frames into :class:`BatchRequestReceived`
events and replies with :meth:`BatchServer.send_results`.

One cohesive concern, over 600 lines: the batched protocol (docs/protocol.md section 3),
both ends of it: frames, columns, and the client's and the server's state machines.
"""

from __future__ import annotations

import enum
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeGuard

import msgpack
import numpy as np

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.arrays import NDARRAY_EXT, pack_ndarray, unpack_ndarray
from openenv_gym.protocol.openenv import ErrorReceived, _brief, code_ends_session

__all__ = [
    "DEFAULT_MAX_FRAME",
    "MAX_REQUEST_ID",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "SUBPROTOCOL",
    "SUBPROTOCOLS",
    "SUBPROTOCOL_V2",
    "BatchClient",
    "BatchReplyReceived",
    "BatchRequestReceived",
    "BatchServer",
    "ConnectionState",
    "FrameErrorCode",
    "HelloReceived",
    "HelloRequestReceived",
    "Op",
    "RequestFailed",
    "ResultTable",
    "SlotError",
    "SlotErrorCode",
    "SlotResult",
    "decode_frame",
    "encode_frame",
    "version_of",
]

PROTOCOL_VERSION = 1
"""Version 1: what :class:`BatchClient` and :class:`BatchServer` speak unless told otherwise."""

PROTOCOL_VERSIONS = (1, 2)
"""Every version this module speaks (section 1.2)."""

SUBPROTOCOL = "openenv-gym.batch.v1"
"""WebSocket subprotocol a server selects when it speaks batched protocol v1 (section 1.3)."""

SUBPROTOCOL_V2 = "openenv-gym.batch.v2"
"""WebSocket subprotocol of version 2 (section 3.9): v1 plus the columnar forms."""

SUBPROTOCOLS = {1: SUBPROTOCOL, 2: SUBPROTOCOL_V2}
"""Subprotocol name of each version; a client offers the newest first (section 1.3)."""


def version_of(subprotocol: str | None) -> int | None:
    """The protocol version a subprotocol name stands for (None: not ours).

    >>> version_of("openenv-gym.batch.v2"), version_of("chat")
    (2, None)
    """
    for version, name in SUBPROTOCOLS.items():
        if name == subprotocol:
            return version
    return None


MAX_REQUEST_ID = 2**32 - 1
"""Largest request id. Id 0 is reserved for ``hello`` (section 3.5)."""

DEFAULT_MAX_FRAME = 16 * 2**20
"""Largest frame a :class:`BatchServer` accepts unless told otherwise (section 3.8)."""


class Op(enum.StrEnum):
    """Operations of the batched protocol (section 3.4)."""

    HELLO = "hello"
    OPEN = "open"
    RESET = "reset"
    STEP = "step"
    STATE = "state"
    CLOSE = "close"


_OPS = {op.value: op for op in Op}
_ARG_OPS = (Op.RESET, Op.STEP)  # requests carry "args", replies "obs" / "reward" / "done"
_RESULT_OPS = (Op.RESET, Op.STEP, Op.STATE)  # every slot gets a result or an error
_F8 = np.dtype("<f8")
_B1 = np.dtype("|b1")


class FrameErrorCode(enum.StrEnum):
    """Codes of a whole-frame ``op: "error"`` reply (section 3.6); the connection survives."""

    INVALID_FRAME = "INVALID_FRAME"  # not one msgpack map of at most max_frame bytes
    INVALID_REQUEST = "INVALID_REQUEST"  # a map, but not a valid request


class SlotErrorCode(enum.StrEnum):
    """Per-slot error codes that exist only in the batched protocol (section 3.6)."""

    NO_SUCH_SLOT = "NO_SUCH_SLOT"  # the slot is not open on this connection
    SLOT_IN_USE = "SLOT_IN_USE"  # open: the slot is already open


# ------------------------------------------------------------------------------ codec


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


def _is_uint(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_id(value: Any) -> int:
    if not _is_uint(value) or value > MAX_REQUEST_ID:
        raise RemoteProtocolError(
            f"request id must be an integer in [0, 2**32), got {_brief(value)}"
        )
    return value


_INTS = {int}


def _plain_uints(values: Sequence[Any]) -> bool:
    """Whether non-empty ``values`` are all plain non-negative ``int`` (checked in C)."""
    return set(map(type, values)) == _INTS and min(values) >= 0


def _check_slots(value: Any) -> tuple[int, ...]:
    # msgpack gives ints as int exactly (booleans as bool): no per-slot _is_uint call
    if not isinstance(value, list) or not value or not _plain_uints(value):
        raise RemoteProtocolError(
            f"'slots' must be a non-empty list of non-negative integers, got {_brief(value)}"
        )
    slots = tuple(value)
    if len(set(slots)) != len(slots):
        raise RemoteProtocolError("'slots' contains duplicates")
    return slots


def _parse_columns(
    value: Any, numeric: Any, n: int, name: str
) -> tuple[dict[str, Any], frozenset[str]]:
    """Check a map of columns (section 3.9): string keys, each column n entries long."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise RemoteProtocolError(f"{name!r} must be a map with string keys, got {_brief(value)}")
    for key, column in value.items():
        if isinstance(column, np.ndarray):
            if column.ndim == 0 or column.shape[0] != n:
                raise RemoteProtocolError(
                    f"{name!r} column {_brief(key)}: ndarray of shape {column.shape}, "
                    f"needs ({n}, ...)"
                )
        elif not isinstance(column, list) or len(column) != n:
            raise RemoteProtocolError(f"{name!r} column {_brief(key)} must hold {n} entries")
    if not isinstance(numeric, list) or not all(
        isinstance(k, str) and isinstance(value.get(k), np.ndarray) for k in numeric
    ):
        raise RemoteProtocolError(
            f"'numeric' must list ndarray columns of {name!r}, got {_brief(numeric)}"
        )
    return value, frozenset(numeric)


def column_value(column: Any, k: int, numeric: bool) -> Any:
    """Entry ``k`` of a column, as it would travel in a per-slot map.

    A ``numeric`` ndarray column stands for JSON numbers: its entry becomes Python numbers
    (``tolist``); another ndarray column gives a copy of its row.
    """
    if isinstance(column, np.ndarray):
        row = column[k]
        return row.tolist() if numeric else np.array(row)
    return column[k]


def columns_to_rows(
    columns: Mapping[str, Any], numeric: frozenset[str], n: int
) -> list[dict[str, Any]]:
    """Per-slot maps from a map of columns (the v1 form of v2's ``cols``)."""
    if not columns:
        return [{} for _ in range(n)]
    items = iter(columns.items())
    key, column = next(items)
    # the first column makes the maps (a dict display is far cheaper than dict(zip()))
    rows = [{key: value} for value in _values(key, column, numeric)]
    for key, column in items:
        for row, value in zip(rows, _values(key, column, numeric), strict=True):
            row[key] = value
    return rows


def _values(key: str, column: Any, numeric: frozenset[str]) -> Any:
    """A column's entries as the per-slot maps hold them (3.9.2)."""
    if isinstance(column, np.ndarray):
        return column.tolist() if key in numeric else [np.array(row) for row in column]
    return column


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, without the ABC check for a dict."""
    return value.__class__ is dict or isinstance(value, Mapping)


def _encode_columns(columns: Mapping[str, Any], numeric: frozenset[str], n: int) -> dict[str, Any]:
    """Check a map of columns we are about to send (what :func:`_parse_columns` accepts)."""
    for key, column in columns.items():
        if not isinstance(key, str):
            raise LocalProtocolError(f"column names must be strings, got {_brief(key)}")
        if column.__class__ is list or isinstance(column, list | tuple):
            length = len(column)
        elif isinstance(column, np.ndarray):
            length = column.shape[0] if column.ndim else -1
        else:
            raise LocalProtocolError(
                f"column {key!r} must be a list or an ndarray, got {type(column).__name__}"
            )
        if length != n:
            raise LocalProtocolError(f"column {key!r} must hold {n} entries")
    if numeric and not all(isinstance(columns.get(k), np.ndarray) for k in numeric):
        raise LocalProtocolError("'numeric' may only name ndarray columns")
    return dict(columns)


# --------------------------------------------------------------------------- messages


class SlotResult(NamedTuple):
    """A successful per-slot result of reset / step / state.

    A named tuple, not a dataclass: one is built per slot per step on the hot path.

    Attributes:
        observation: Observation fields (reset / step), or the state (state).
        reward: Reward, ``None`` when the env gave none (reset / step only).
        done: Episode-over flag (reset / step only).
        metadata: Observation metadata (openenv >= 0.4 semantics), or None.
    """

    observation: dict[str, Any] | None = None
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SlotError:
    """A per-slot error. ``code`` is an OpenEnv :class:`ErrorCode` or a :class:`SlotErrorCode`."""

    code: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HelloRequestReceived:
    """Server side: the client's ``hello``. Answer with :meth:`BatchServer.send_hello`."""

    request_id: int
    versions: tuple[int, ...]
    client: str


@dataclass(frozen=True, slots=True)
class BatchRequestReceived:
    """Server side: one operation for many slots. Answer with :meth:`BatchServer.send_results`.

    Attributes:
        op: The operation.
        request_id: The id to echo in the reply.
        slots: Slot ids, unique.
        args: One mapping per slot for reset (kwargs) and step (action); else empty.
    """

    op: Op
    request_id: int
    slots: tuple[int, ...]
    args: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class HelloReceived:
    """Client side: the server's answer to ``hello``."""

    version: int
    server: str
    env: str
    max_slots: int
    max_frame: int


@dataclass(frozen=True, slots=True)
class BatchReplyReceived:
    """Client side: the reply to one batched request.

    A version-2 server may send the observations and the metadata of ``reset`` / ``step``
    as columns (section 3.9): then :attr:`columns` (and :attr:`meta_columns`) hold them
    and :attr:`observations` (:attr:`metadata`) is None. :meth:`observation` and
    :meth:`meta` read one slot's either way.

    Attributes:
        op: The operation answered.
        request_id: The request's id.
        slots: The request's slots, in request order.
        observations: Per slot: the observation (reset / step) or state (state), None on
            error; None when the observations came as columns.
        rewards: float64 array, NaN where the env sent no reward or the slot failed.
        dones: bool array.
        metadata: Per slot: metadata or None; None when it came as columns.
        errors: Slot id -> error, for the slots that failed.
        columns: Field -> column of one entry per slot (a list, or an ndarray whose first
            dimension is the slot), or None.
        numeric: The ndarray columns of :attr:`columns` that stand for JSON numbers.
        meta_columns: Metadata key -> list of one entry per slot, or None.
    """

    op: Op
    request_id: int
    slots: tuple[int, ...]
    observations: list[dict[str, Any] | None] | None
    rewards: np.ndarray[Any, np.dtype[np.float64]]
    dones: np.ndarray[Any, np.dtype[np.bool_]]
    metadata: list[dict[str, Any] | None] | None
    errors: dict[int, ErrorReceived]
    columns: dict[str, Any] | None = None
    numeric: frozenset[str] = frozenset()
    meta_columns: dict[str, list[Any]] | None = None

    def observation(self, k: int) -> dict[str, Any] | None:
        """Slot position ``k``'s observation (or state) as a map; None if it failed."""
        if self.columns is None:
            assert self.observations is not None
            return self.observations[k]
        if self.slots[k] in self.errors:
            return None
        numeric = self.numeric
        return {
            key: column_value(column, k, key in numeric) for key, column in self.columns.items()
        }

    def meta(self, k: int) -> dict[str, Any] | None:
        """Slot position ``k``'s metadata, or None (none sent, empty, or the slot failed)."""
        if self.meta_columns is None:
            return None if self.metadata is None else self.metadata[k]
        if self.slots[k] in self.errors:
            return None
        return {key: column[k] for key, column in self.meta_columns.items()} or None


@dataclass(frozen=True, slots=True)
class ResultTable:
    """Server side: the results of one ``reset`` / ``step`` request, by column (section 3.9).

    Answer with :meth:`BatchServer.send_table`: a version-2 connection sends the columns as
    they are, a version-1 connection gets one map per slot made from them.

    Attributes:
        observations: Field -> column (a list of one entry per slot, or an ndarray whose
            first dimension is the slot), or one map (None if failed) per slot.
        rewards: float64 array, NaN where there is no reward (and for failed slots).
        dones: bool array (False for failed slots).
        numeric: The ndarray columns that stand for JSON numbers (section 3.9).
        metadata: Key -> list of one entry per slot, or one map (or None) per slot, or
            None when no slot has metadata.
        errors: Position in the request's slots -> the error of that slot; the columns'
            entries at these positions are ignored.
    """

    observations: Mapping[str, Any] | Sequence[dict[str, Any] | None]
    rewards: np.ndarray[Any, np.dtype[np.float64]]
    dones: np.ndarray[Any, np.dtype[np.bool_]]
    numeric: frozenset[str] = frozenset()
    metadata: Mapping[str, list[Any]] | Sequence[dict[str, Any] | None] | None = None
    errors: Mapping[int, SlotError] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """Client side: the server rejected a whole frame (``op: "error"``).

    ``request_id`` is None when the server could not read one from our frame.
    """

    request_id: int | None
    code: str
    message: str


# ---------------------------------------------------------------------- client side


class ConnectionState(enum.Enum):
    """States of a batched connection (section 3.7)."""

    NEW = "new"  # client: nothing sent yet; server: no valid hello received yet
    HELLO_SENT = "hello_sent"  # client only: hello sent, its reply not received yet
    OPEN = "open"  # client: hello answered; server: valid hello received
    CLOSED = "closed"  # client only: hello refused, bad frame, or connection lost

    # Members are singletons, so identity is their equality: hash them by identity too, in
    # C (Enum's own __hash__ hashes the name in Python), for the transition tables' keys.
    __hash__ = object.__hash__


class _ClientEvent(enum.Enum):
    """What happens to a :class:`BatchClient`: the columns of its transition table."""

    SEND_HELLO = "send_hello"
    SEND_REQUEST = "send_request"  # send_open / send_reset / send_step / send_state / send_close
    RECEIVE_HELLO = "receive_hello"  # a valid hello reply
    RECEIVE_REPLY = "receive_reply"  # a reply, or an op: "error" with the id of a request
    RECEIVE_FATAL_ERROR = "receive_fatal_error"  # an op: "error" without id, or for hello
    PROTOCOL_ERROR = "protocol_error"  # a frame that breaks the protocol (3.6.2)
    CONNECTION_LOST = "connection_lost"

    __hash__ = object.__hash__


class _ServerEvent(enum.Enum):
    """What happens to a :class:`BatchServer`: the columns of its transition table."""

    RECEIVE_HELLO = "receive_hello"  # a valid hello
    RECEIVE_REQUEST = "receive_request"  # a valid open / reset / step / state / close
    RECEIVE_BAD_FRAME = "receive_bad_frame"  # a frame answered with op: "error" (3.6.2)
    SEND_REPLY = "send_reply"  # send_hello / send_results / send_table

    __hash__ = object.__hash__


_NEW = ConnectionState.NEW
_HELLO_SENT = ConnectionState.HELLO_SENT
_OPEN = ConnectionState.OPEN
_CLOSED = ConnectionState.CLOSED

_CE = _ClientEvent
_CLIENT_TRANSITIONS: dict[tuple[ConnectionState, _ClientEvent], ConnectionState] = {
    (_NEW, _CE.SEND_HELLO): _HELLO_SENT,
    (_NEW, _CE.RECEIVE_FATAL_ERROR): _CLOSED,
    (_NEW, _CE.PROTOCOL_ERROR): _CLOSED,
    (_NEW, _CE.CONNECTION_LOST): _CLOSED,
    (_HELLO_SENT, _CE.SEND_REQUEST): _HELLO_SENT,  # pipelined behind hello
    (_HELLO_SENT, _CE.RECEIVE_HELLO): _OPEN,
    (_HELLO_SENT, _CE.RECEIVE_REPLY): _HELLO_SENT,
    (_HELLO_SENT, _CE.RECEIVE_FATAL_ERROR): _CLOSED,
    (_HELLO_SENT, _CE.PROTOCOL_ERROR): _CLOSED,
    (_HELLO_SENT, _CE.CONNECTION_LOST): _CLOSED,
    (_OPEN, _CE.SEND_REQUEST): _OPEN,
    (_OPEN, _CE.RECEIVE_REPLY): _OPEN,
    (_OPEN, _CE.RECEIVE_FATAL_ERROR): _CLOSED,
    (_OPEN, _CE.PROTOCOL_ERROR): _CLOSED,
    (_OPEN, _CE.CONNECTION_LOST): _CLOSED,
    (_CLOSED, _CE.CONNECTION_LOST): _CLOSED,
}
"""``BatchClient``: (state, event) -> next state. A pair not listed is illegal (3.7)."""

_SE = _ServerEvent
_SERVER_TRANSITIONS: dict[tuple[ConnectionState, _ServerEvent], ConnectionState] = {
    (_NEW, _SE.RECEIVE_HELLO): _OPEN,  # at once: requests pipelined behind it are accepted
    (_NEW, _SE.RECEIVE_BAD_FRAME): _NEW,
    (_OPEN, _SE.RECEIVE_REQUEST): _OPEN,
    (_OPEN, _SE.RECEIVE_BAD_FRAME): _OPEN,
    (_OPEN, _SE.SEND_REPLY): _OPEN,
}
"""``BatchServer``: (state, event) -> next state. A pair not listed is illegal (3.7)."""

_CLIENT_RECEIVES = (
    _CE.RECEIVE_HELLO,
    _CE.RECEIVE_REPLY,
    _CE.RECEIVE_FATAL_ERROR,
    _CE.PROTOCOL_ERROR,
)
# where a frame may be fed at all: the states with some receive event in their table row
_CLIENT_READING = frozenset(s for s, e in _CLIENT_TRANSITIONS if e in _CLIENT_RECEIVES)
# the events of every step, as globals (an Enum member read from its class is slow)
_SEND_REQUEST = _CE.SEND_REQUEST
_RECEIVE_REPLY = _CE.RECEIVE_REPLY
_RECEIVE_REQUEST = _SE.RECEIVE_REQUEST
_SEND_REPLY = _SE.SEND_REPLY


@dataclass(slots=True)
class _Pending:
    op: Op
    slots: tuple[int, ...]


class BatchClient:
    """Client side of one batched connection.

    Send ``hello`` first (:meth:`send_hello`); other requests may follow at once, without
    waiting for its reply. Every ``send_*`` returns the request id, queues one frame
    (:meth:`data_to_send`), and raises :class:`LocalProtocolError` with the state unchanged
    when the call is illegal: unknown or busy slots, closed connection, a frame larger
    than the server's ``max_frame``. Feed received frames to :meth:`receive_data`, read
    :meth:`events_received`. Once :attr:`state` is ``CLOSED``, close the socket and feed
    nothing more.

    The state is one :class:`ConnectionState`; every call is an event, and one table gives
    the next state of each legal (state, event) pair (``docs/protocol.md`` section 3.7):

    ================  ================================  ===========================
    state             event                             next state
    ================  ================================  ===========================
    NEW               send_hello                        HELLO_SENT
    HELLO_SENT, OPEN  send_open/reset/step/state/close  unchanged
    HELLO_SENT        valid hello reply                 OPEN
    HELLO_SENT, OPEN  reply, or error with its id       unchanged
    any but CLOSED    error without id, or for hello    CLOSED
    any but CLOSED    a frame that breaks 3.6.2         CLOSED, RemoteProtocolError
    any               connection_lost                   CLOSED
    ================  ================================  ===========================

    Any other pair is illegal: a ``send_*`` raises :class:`LocalProtocolError` with nothing
    changed; a frame fed to a ``CLOSED`` client raises :class:`RemoteProtocolError`. A
    reply that would make an illegal pair answers no request in flight (nothing is in
    flight in ``NEW``, and ``hello`` is not once answered), so it is a protocol error.
    Entering ``CLOSED`` forgets every slot and request in flight. Which slots are open or
    busy and which ids are in flight is data checked per request, not connection state.

    Args:
        client_name: Sent in ``hello``.
        version: The protocol version to speak: the one whose subprotocol the server
            selected (:func:`version_of`). Version 2 allows the columnar forms.
    """

    def __init__(self, client_name: str = "openenv-gym", version: int = PROTOCOL_VERSION) -> None:
        if version not in PROTOCOL_VERSIONS:
            raise LocalProtocolError(f"unknown protocol version {version}")
        self.state = ConnectionState.NEW
        self.client_name = client_name
        self.version = version
        self.server_info: HelloReceived | None = None
        self.open_slots: set[int] = set()
        self._busy: set[int] = set()
        self._pending: dict[int, _Pending] = {}
        self._next_id = 1
        self._outgoing: list[bytes] = []
        self._events: list[HelloReceived | BatchReplyReceived | RequestFailed] = []

    @property
    def in_flight(self) -> int:
        """Number of requests sent and not answered yet."""
        return len(self._pending)

    def _free_id(self) -> int:
        """The next request id not in flight, skipping 0 (hello's); nothing is changed."""
        rid = self._next_id
        while rid in self._pending or rid == 0:
            rid = (rid + 1) % (MAX_REQUEST_ID + 1)
        return rid

    def send_hello(self) -> int:
        """Queue ``hello`` (request id 0). Must be the first request."""
        next_state = _CLIENT_TRANSITIONS.get((self.state, _CE.SEND_HELLO))
        if next_state is None:
            raise LocalProtocolError(f"hello must be sent first, state is {self.state.value}")
        frame = encode_frame(
            {
                "op": Op.HELLO.value,
                "id": 0,
                "versions": [self.version],
                "client": self.client_name,
            }
        )
        self._pending[0] = _Pending(Op.HELLO, ())
        self.state = next_state
        self._outgoing.append(frame)
        return 0

    def _send(
        self,
        op: Op,
        slots: Iterable[int],
        args: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None,
        numeric: Iterable[str] = (),
    ) -> int:
        next_state = _CLIENT_TRANSITIONS.get((self.state, _SEND_REQUEST))
        if next_state is None:
            raise LocalProtocolError(f"cannot send {op.value} in state {self.state.value}")
        slot_tuple = tuple(slots)
        if not slot_tuple:
            raise LocalProtocolError(f"{op.value} needs at least one slot")
        if not _plain_uints(slot_tuple) and not all(_is_uint(s) for s in slot_tuple):
            # plain ints (the usual case) are checked in C, other int kinds one by one
            raise LocalProtocolError(f"{op.value}: slots must be non-negative integers")
        if len(set(slot_tuple)) != len(slot_tuple):
            raise LocalProtocolError(f"{op.value}: duplicate slots")
        busy = self._busy.intersection(slot_tuple)
        if busy:
            raise LocalProtocolError(f"{op.value}: slots {sorted(busy)} have a request in flight")
        if op is Op.OPEN:
            already = self.open_slots.intersection(slot_tuple)
            if already:
                raise LocalProtocolError(f"open: slots {sorted(already)} are already open")
        else:
            unknown = set(slot_tuple) - self.open_slots
            if unknown:
                raise LocalProtocolError(f"{op.value}: slots {sorted(unknown)} are not open")
        message: dict[str, Any] = {"op": op.value, "id": 0, "slots": list(slot_tuple)}
        if op in _ARG_OPS:
            if isinstance(args, Mapping):
                self._columns_message(op, message, args, frozenset(numeric), len(slot_tuple))
            else:
                if args is None or len(args) != len(slot_tuple):
                    raise LocalProtocolError(
                        f"{op.value}: {len(slot_tuple)} slots need as many arguments, got "
                        f"{'none' if args is None else len(args)}"
                    )
                if not all(isinstance(key, str) for arg in args for key in arg):
                    raise LocalProtocolError(f"{op.value}: argument maps need string keys")
                message["args"] = [dict(a) for a in args]
        rid = self._free_id()
        message["id"] = rid
        frame = encode_frame(message)
        limit = None if self.server_info is None else self.server_info.max_frame
        if limit is not None and len(frame) > limit:
            raise LocalProtocolError(
                f"{op.value}: frame of {len(frame)} bytes exceeds the server's max_frame {limit}"
            )
        self._next_id = (rid + 1) % (MAX_REQUEST_ID + 1)
        self._pending[rid] = _Pending(op, slot_tuple)
        self._busy.update(slot_tuple)
        self.state = next_state
        self._outgoing.append(frame)
        return rid

    def _columns_message(
        self,
        op: Op,
        message: dict[str, Any],
        columns: Mapping[str, Any],
        numeric: frozenset[str],
        n: int,
    ) -> None:
        if self.version < 2:
            raise LocalProtocolError(f"{op.value}: columnar arguments need protocol version 2")
        if not all(isinstance(key, str) for key in columns):
            raise LocalProtocolError(f"{op.value}: argument columns need string keys")
        message["cols"] = _encode_columns(columns, numeric, n)
        if numeric:
            message["numeric"] = sorted(numeric)

    def send_open(self, slots: Iterable[int]) -> int:
        """Queue ``open``: create one environment instance per slot."""
        return self._send(Op.OPEN, slots, None)

    def send_reset(
        self,
        slots: Iterable[int],
        kwargs: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        *,
        numeric: Iterable[str] = (),
    ) -> int:
        """Queue ``reset`` with one kwargs mapping per slot (``seed``, ``episode_id``...).

        Version 2: ``kwargs`` may instead be a map of columns, one entry per slot
        (section 3.9); ``numeric`` names its ndarray columns that stand for JSON numbers.
        """
        return self._send(Op.RESET, slots, kwargs, numeric)

    def send_step(
        self,
        slots: Iterable[int],
        actions: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        *,
        numeric: Iterable[str] = (),
    ) -> int:
        """Queue ``step`` with one action (its fields) per slot.

        Version 2: ``actions`` may instead be a map of columns, field -> one entry per
        slot (section 3.9); ``numeric`` names its ndarray columns that stand for JSON
        numbers.
        """
        return self._send(Op.STEP, slots, actions, numeric)

    def send_state(self, slots: Iterable[int]) -> int:
        """Queue ``state`` for the slots."""
        return self._send(Op.STATE, slots, None)

    def send_close(self, slots: Iterable[int]) -> int:
        """Queue ``close``: destroy the slots' environment instances."""
        return self._send(Op.CLOSE, slots, None)

    def data_to_send(self) -> list[bytes]:
        """Return and forget the binary frames queued for sending."""
        frames, self._outgoing = self._outgoing, []
        return frames

    def receive_data(self, data: bytes | str) -> None:
        """Feed one received frame. Next: :meth:`events_received`, then check :attr:`state`.

        An ``op: "error"`` reply without an id, or one that refuses ``hello``, is returned
        as a :class:`RequestFailed` event and closes the connection (section 3.6).

        Raises:
            RemoteProtocolError: The frame is malformed or answers no pending request;
                the connection is closed (its replies can no longer be matched).
        """
        if self.state not in _CLIENT_READING:
            raise RemoteProtocolError("frame received on a closed connection")
        try:
            event = self._parse(decode_frame(data))
        except RemoteProtocolError:
            self._enter(_CE.PROTOCOL_ERROR)
            raise
        if type(event) is BatchReplyReceived:
            self._enter(_RECEIVE_REPLY)
        elif isinstance(event, HelloReceived):
            self._enter(_CE.RECEIVE_HELLO)
        # Without an id some request of ours will never be answered; after a refused
        # hello (id 0) nothing will be: either way the connection is unusable.
        elif event.request_id is None or event.request_id == 0:
            self._enter(_CE.RECEIVE_FATAL_ERROR)
        else:
            self._enter(_RECEIVE_REPLY)
        self._events.append(event)

    def _enter(self, event: _ClientEvent) -> None:
        """Take the table's transition for ``event`` (legal here: the caller checked)."""
        self.state = state = _CLIENT_TRANSITIONS[(self.state, event)]
        if state is _CLOSED:
            self.open_slots.clear()
            self._busy.clear()
            self._pending.clear()

    def _parse(self, message: dict[Any, Any]) -> HelloReceived | BatchReplyReceived | RequestFailed:
        op = message.get("op")
        if not isinstance(op, str):
            raise RemoteProtocolError(f"reply has no 'op' string: {_brief(op)}")
        if op == "error":
            return self._parse_error(message)
        rid = _check_id(message.get("id"))
        pending = self._pop(rid)
        if op != pending.op.value:
            raise RemoteProtocolError(f"reply op {_brief(op)} does not match {pending.op.value}")
        if pending.op is Op.HELLO:
            return self._parse_hello(message)
        return self._parse_reply(message, rid, pending)

    def _parse_error(self, message: dict[Any, Any]) -> RequestFailed:
        raw_id, code, text = message.get("id"), message.get("code"), message.get("message")
        if not isinstance(code, str) or not isinstance(text, str):
            raise RemoteProtocolError(f"malformed error frame: {_brief(message)}")
        rid = None if raw_id is None else _check_id(raw_id)
        if rid is not None:
            self._pop(rid)
        return RequestFailed(rid, code, text)

    def _pop(self, rid: int) -> _Pending:
        pending = self._pending.pop(rid, None)
        if pending is None:
            raise RemoteProtocolError(f"reply to unknown request id {rid}")
        self._busy.difference_update(pending.slots)
        return pending

    def _parse_hello(self, message: dict[Any, Any]) -> HelloReceived:
        version, server, env, max_slots, max_frame = (
            message.get(name) for name in ("version", "server", "env", "max_slots", "max_frame")
        )
        if not (
            _is_uint(version)
            and isinstance(server, str)
            and isinstance(env, str)
            and _is_uint(max_slots)
            and _is_uint(max_frame)
        ):
            raise RemoteProtocolError(
                "hello reply needs non-negative integers 'version', 'max_slots', 'max_frame' "
                "and strings 'server', 'env'"
            )
        if version != self.version:
            raise RemoteProtocolError(
                f"server chose protocol version {version}, this connection speaks {self.version}"
            )
        # Only a pending hello is answered here, and it is pending only in HELLO_SENT.
        self.server_info = HelloReceived(version, server, env, max_slots, max_frame)
        return self.server_info

    def _parse_reply(
        self, message: dict[Any, Any], rid: int, pending: _Pending
    ) -> BatchReplyReceived:
        n = len(pending.slots)
        errors = _parse_errors(message["errors"], n) if "errors" in message else {}
        observations: list[dict[str, Any] | None] | None
        metadata: list[dict[str, Any] | None] | None
        columns: dict[str, Any] | None = None
        numeric: frozenset[str] = frozenset()
        meta_columns: dict[str, Any] | None = None
        if pending.op in _ARG_OPS:
            if self.version >= 2 and "cols" in message:
                columns, numeric = _parse_columns(
                    message["cols"], message.get("numeric", []), n, "cols"
                )
                observations = None
            else:
                observations = _parse_list(message.get("obs"), n, "obs", dict)
            if self.version >= 2 and "meta_cols" in message:
                meta_columns, _ = _parse_columns(message["meta_cols"], [], n, "meta_cols")
                if any(isinstance(c, np.ndarray) for c in meta_columns.values()):
                    raise RemoteProtocolError("'meta_cols' columns must be arrays, not ndarrays")
                metadata = None
            elif "meta" in message:
                metadata = _parse_list(message["meta"], n, "meta", dict)
            else:
                metadata = [None] * n
            rewards = _parse_column(message.get("reward"), n, "reward", _F8, self.version)
            dones = _parse_column(message.get("done"), n, "done", _B1, self.version)
        else:
            observations, metadata = [None] * n, [None] * n
            rewards, dones = np.full(n, math.nan), np.zeros(n, dtype=bool)
            if pending.op is Op.STATE:
                observations = _parse_list(message.get("state"), n, "state", dict)
        if pending.op in _RESULT_OPS and observations is not None:
            for pos, (slot, obs) in enumerate(zip(pending.slots, observations, strict=True)):
                if (pos in errors) == (obs is not None):
                    raise RemoteProtocolError(f"slot {slot}: needs either a result or an error")
        slot_errors = {pending.slots[pos]: err for pos, err in errors.items()}
        self._update_slots(pending, slot_errors)
        return BatchReplyReceived(
            pending.op,
            rid,
            pending.slots,
            observations,
            rewards,
            dones,
            metadata,
            slot_errors,
            columns,
            numeric,
            meta_columns,
        )

    def _update_slots(self, pending: _Pending, errors: Mapping[int, ErrorReceived]) -> None:
        if pending.op is Op.OPEN:
            self.open_slots.update(s for s in pending.slots if s not in errors)
        elif pending.op is Op.CLOSE:
            self.open_slots.difference_update(pending.slots)
        else:
            self.open_slots.difference_update(s for s, e in errors.items() if e.ends_session)

    def connection_lost(self) -> None:
        """Record that the socket is gone: every slot and pending request is lost."""
        self._enter(_CE.CONNECTION_LOST)

    def events_received(self) -> list[HelloReceived | BatchReplyReceived | RequestFailed]:
        """Return and forget the events parsed so far."""
        events, self._events = self._events, []
        return events


def _parse_errors(value: Any, n: int) -> dict[int, ErrorReceived]:
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"'errors' must be a map, got {type(value).__name__}")
    errors: dict[int, ErrorReceived] = {}
    for pos, err in value.items():
        if not _is_uint(pos) or pos >= n:
            raise RemoteProtocolError(f"'errors' key {_brief(pos)} is not a slot position")
        if (
            not isinstance(err, list)
            or len(err) != 3
            or not isinstance(err[0], str)
            or not isinstance(err[1], str)
            or not isinstance(err[2], dict)
        ):
            raise RemoteProtocolError(f"malformed slot error {_brief(err)}")
        code, message, details = err
        errors[pos] = ErrorReceived(code, message, details, _slot_error_fatal(code))
    return errors


def _slot_error_fatal(code: str) -> bool:
    return code_ends_session(code) or code == SlotErrorCode.NO_SUCH_SLOT.value


def _parse_list(value: Any, n: int, name: str, kind: type) -> list[Any]:
    if not isinstance(value, list) or len(value) != n:
        raise RemoteProtocolError(f"{name!r} must be a list of {n} entries")
    for item in value:
        if item is not None and not isinstance(item, kind):
            raise RemoteProtocolError(f"{name!r} entries must be {kind.__name__} or nil")
    return value


_SMALL = 16
"""Version 2 sends ``reward`` and ``done`` of fewer slots as plain arrays (section 3.9)."""


def _parse_column(value: Any, n: int, name: str, dtype: np.dtype[Any], version: int) -> Any:
    if isinstance(value, list) and version >= 2 and len(value) == n:
        kinds = (bool,) if dtype == _B1 else (float, int)
        if all(type(v) in kinds for v in value):
            return np.array(value, dtype=dtype)
    if not isinstance(value, np.ndarray) or value.shape != (n,) or value.dtype != dtype:
        raise RemoteProtocolError(f"{name!r} must be a {dtype.str} array of shape ({n},)")
    return value


# ---------------------------------------------------------------------- server side


_PRESCAN = 64 * 1024
"""Frames larger than this are checked for too many slots before they are decoded."""


def _too_many_slots(op: Op, count: int, max_slots: int) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"{op.value} names {count} slots; this server takes at most {max_slots} per request"
    )


def _too_many_slots_early(
    data: bytes | str, max_slots: int, pending: Mapping[int, Any]
) -> tuple[int, str] | None:
    """The request id and refusal of a frame naming too many slots, read from its headers.

    Reads the top-level keys up to ``slots``; when ``op`` (not ``hello``) and a valid
    ``id`` not in flight come first, as every client writes them, the length of the
    ``slots`` array is known without decoding its items (section 3.8). None: the frame is
    left to the full decode, which refuses the same frames, more slowly.
    """
    fields: dict[str, Any] = {}
    try:  # read from a view of the frame: only the bytes up to the array header are copied
        unpacker = msgpack.Unpacker(
            io.BytesIO(data),  # type: ignore[arg-type]
            raw=False,
            max_buffer_size=len(data),
            read_size=min(len(data), _PRESCAN),
        )
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key == "slots":
                count = unpacker.read_array_header()
                break
            if key in ("op", "id"):
                fields[key] = unpacker.unpack()
            else:
                unpacker.skip()
        else:
            return None
    except Exception:  # not msgpack, not a map, slots not an array: the decode will say
        return None
    name, rid = fields.get("op"), fields.get("id")
    op = _OPS.get(name) if isinstance(name, str) else None
    if count <= max_slots or op in (None, Op.HELLO) or not _is_uint(rid):
        return None
    if rid == 0 or rid > MAX_REQUEST_ID or rid in pending:
        return None
    return rid, str(_too_many_slots(op, count, max_slots))


class BatchServer:
    """Server side of one batched connection.

    Feed every received frame to :meth:`receive_data`; read requests with
    :meth:`events_received`; answer each with :meth:`send_hello` or :meth:`send_results`
    (replies may go in any order); write :meth:`data_to_send`. Malformed frames are
    answered here with an ``op: "error"`` frame and the connection survives (section 3.6).
    Which slots are open is the caller's business: answer ``NO_SUCH_SLOT``,
    ``SLOT_IN_USE`` and ``CAPACITY_REACHED`` per slot with :class:`SlotError`.

    The state is one :class:`ConnectionState` (``NEW`` or ``OPEN``); every frame and reply
    is an event, and one table gives the next state of each legal (state, event) pair
    (``docs/protocol.md`` section 3.7):

    ==========  =====================================  ===========================
    state       event                                  next state
    ==========  =====================================  ===========================
    NEW         valid hello                            OPEN
    OPEN        valid open/reset/step/state/close      OPEN
    NEW, OPEN   a frame answered with op: "error"      unchanged
    OPEN        send_hello, send_results, send_table   OPEN
    ==========  =====================================  ===========================

    A frame that makes an illegal pair (``hello`` in ``OPEN``, any other request in
    ``NEW``) is answered with ``INVALID_REQUEST`` (a frame answered with op: "error"); a
    reply in ``NEW`` raises :class:`LocalProtocolError`. Which request ids are in flight,
    and their slots, is data checked per request (section 3.5), not connection state.

    Args:
        max_frame: Largest frame accepted, in bytes (also announced in ``hello``).
        version: The protocol version of the connection: the one whose subprotocol was
            selected (:func:`version_of`). ``hello`` must list it.
        max_slots: Most slots one request may name (None: no limit); a larger request is
            refused whole with ``INVALID_REQUEST`` before any of it is looked at further.
    """

    def __init__(
        self,
        max_frame: int = DEFAULT_MAX_FRAME,
        version: int = PROTOCOL_VERSION,
        max_slots: int | None = None,
    ) -> None:
        if version not in PROTOCOL_VERSIONS:
            raise LocalProtocolError(f"unknown protocol version {version}")
        self.max_frame = max_frame
        self.version = version
        self.max_slots = max_slots
        self.state = ConnectionState.NEW
        self._pending: dict[int, tuple[Op, tuple[int, ...]]] = {}
        self._busy: set[int] = set()
        self._outgoing: list[bytes] = []
        self._events: list[HelloRequestReceived | BatchRequestReceived] = []

    def receive_data(self, data: bytes | str) -> None:
        """Feed one received frame. Next: :meth:`events_received`, :meth:`data_to_send`.

        Any frame is either turned into one request event or answered with an error frame.
        """
        if len(data) > _PRESCAN and self._refused_early(data):
            return  # answered from the headers: the slots are never decoded
        rid: int | None = None
        code = FrameErrorCode.INVALID_FRAME
        try:
            message = decode_frame(data, self.max_frame)
            code = FrameErrorCode.INVALID_REQUEST
            rid = self._request_id(message)
            event = self._parse(message, rid)
        except RemoteProtocolError as exc:
            self._refuse(rid, code, str(exc))
            return
        if isinstance(event, HelloRequestReceived):
            self.state = _SERVER_TRANSITIONS[(self.state, _SE.RECEIVE_HELLO)]
            self._pending[rid] = (Op.HELLO, ())
        else:
            self.state = _SERVER_TRANSITIONS[(self.state, _RECEIVE_REQUEST)]
            self._pending[rid] = (event.op, event.slots)
            self._busy.update(event.slots)
        self._events.append(event)

    def receive_head(self, head: bytes, size: int) -> bool:
        """The first bytes of a frame of ``size`` bytes whose rest has not been read yet.

        A frame over 64 KiB naming more than ``max_slots`` slots is refused from its first
        entries (section 3.8); ``head`` needs the bytes up to the ``slots`` array's header
        (the first 64 KiB are always enough for a frame as clients write it). Next:
        :meth:`data_to_send`.

        Returns:
            True: the frame is answered (an ``INVALID_REQUEST`` error frame is queued); drop
            the rest of it, never feed it to :meth:`receive_data`. False: nothing happened;
            feed the whole frame to :meth:`receive_data` once it is read.
        """
        if size <= _PRESCAN or size > self.max_frame:
            return False
        return self._refused_early(head)

    def _refused_early(self, data: bytes | str) -> bool:
        """Refuse a frame naming too many slots from its headers (queue the error frame)."""
        max_slots = self.max_slots
        if max_slots is None or (self.state, _RECEIVE_REQUEST) not in _SERVER_TRANSITIONS:
            return False
        refused = _too_many_slots_early(data, max_slots, self._pending)
        if refused is None:
            return False
        refused_id, error = refused
        self._refuse(refused_id, FrameErrorCode.INVALID_REQUEST, error)
        return True

    def _refuse(self, rid: int | None, code: FrameErrorCode, message: str) -> None:
        """Answer a frame with ``op: "error"`` (section 3.6.2)."""
        frame = encode_frame({"op": "error", "id": rid, "code": code.value, "message": message})
        self.state = _SERVER_TRANSITIONS[(self.state, _SE.RECEIVE_BAD_FRAME)]
        self._outgoing.append(frame)

    def _request_id(self, message: dict[Any, Any]) -> int:
        rid = _check_id(message.get("id"))
        if rid in self._pending:
            raise RemoteProtocolError(f"request id {rid} is already in flight")
        op = message.get("op")
        is_hello = isinstance(op, str) and op == Op.HELLO.value
        if is_hello != (rid == 0):
            raise RemoteProtocolError("id 0 is reserved for hello, and hello must use it")
        return rid

    def _parse(
        self, message: dict[Any, Any], rid: int
    ) -> HelloRequestReceived | BatchRequestReceived:
        name = message.get("op")
        op = _OPS.get(name) if isinstance(name, str) else None
        if op is None:
            raise RemoteProtocolError(f"unknown op {_brief(name)}")
        if op is Op.HELLO:
            if (self.state, _SE.RECEIVE_HELLO) not in _SERVER_TRANSITIONS:
                raise RemoteProtocolError("hello was already received")
            versions = message.get("versions")
            client = message.get("client", "")
            if (
                not isinstance(versions, list)
                or not all(_is_uint(v) for v in versions)
                or not isinstance(client, str)
            ):
                raise RemoteProtocolError("hello needs 'versions' (list of int) and 'client' (str)")
            if self.version not in versions:
                raise RemoteProtocolError(
                    f"no common protocol version (this connection speaks {self.version})"
                )
            return HelloRequestReceived(rid, tuple(versions), client)
        if (self.state, _RECEIVE_REQUEST) not in _SERVER_TRANSITIONS:
            raise RemoteProtocolError(f"{op.value} before hello")
        named = message.get("slots")
        if self.max_slots is not None and isinstance(named, list) and len(named) > self.max_slots:
            raise _too_many_slots(op, len(named), self.max_slots)  # before any per-slot work
        slots = _check_slots(named)
        busy = self._busy and self._busy.intersection(slots)
        if busy:
            raise RemoteProtocolError(f"slots {sorted(busy)} are in a request in flight")
        args: tuple[Mapping[str, Any], ...] = ()
        if op in _ARG_OPS and self.version >= 2 and "cols" in message:
            columns, numeric = _parse_columns(
                message["cols"], message.get("numeric", []), len(slots), "cols"
            )
            args = tuple(columns_to_rows(columns, numeric, len(slots)))
        elif op in _ARG_OPS:
            raw = message.get("args")
            if not isinstance(raw, list) or len(raw) != len(slots):
                raise RemoteProtocolError(f"{op.value}: 'args' must be a list of {len(slots)} maps")
            if not all(isinstance(a, dict) and all(isinstance(k, str) for k in a) for a in raw):
                raise RemoteProtocolError(f"{op.value}: 'args' entries must be maps with str keys")
            args = tuple(raw)
        return BatchRequestReceived(op, rid, slots, args)

    def send_hello(self, *, server: str, env: str, max_slots: int) -> None:
        """Answer the pending ``hello``. Next: :meth:`data_to_send`.

        Raises:
            LocalProtocolError: No ``hello`` is pending.
        """
        frame = encode_frame(
            {
                "op": Op.HELLO.value,
                "id": 0,
                "version": self.version,
                "server": server,
                "env": env,
                "max_slots": max_slots,
                "max_frame": self.max_frame,
            }
        )
        self._answer(0, (Op.HELLO, ()), frame)

    def send_results(
        self, request: BatchRequestReceived, results: Sequence[SlotResult | SlotError | None]
    ) -> None:
        """Answer a batched request with one entry per slot, in request order.

        ``reset`` / ``step`` / ``state`` need a :class:`SlotResult` or a :class:`SlotError`
        per slot; ``open`` / ``close`` take ``None`` (or a :class:`SlotResult`) for success.
        Next: :meth:`data_to_send`.

        Raises:
            LocalProtocolError: The request is not pending, ``results`` does not fit it,
                or a value cannot be serialised.
        """
        rid, op = request.request_id, request.op
        if len(results) != len(request.slots):
            raise LocalProtocolError(
                f"{len(request.slots)} slots need {len(request.slots)} results, got {len(results)}"
            )
        if op in _RESULT_OPS and not all(isinstance(r, SlotResult | SlotError) for r in results):
            raise LocalProtocolError(f"{op.value} needs a SlotResult or SlotError per slot")
        message: dict[str, Any] = {"op": op.value, "id": rid}
        ok = [r if isinstance(r, SlotResult) else None for r in results]
        if op in _ARG_OPS:
            message["obs"] = [None if r is None else r.observation or {} for r in ok]
            message["reward"] = np.array(
                [math.nan if r is None or r.reward is None else r.reward for r in ok], dtype=_F8
            )
            message["done"] = np.array([r is not None and r.done for r in ok], dtype=_B1)
            if any(r is not None and r.metadata for r in ok):
                message["meta"] = [None if r is None else r.metadata or None for r in ok]
        elif op is Op.STATE:
            message["state"] = [None if r is None else r.observation or {} for r in ok]
        errors = {
            pos: [r.code, r.message, dict(r.details)]
            for pos, r in enumerate(results)
            if isinstance(r, SlotError)
        }
        if errors:
            message["errors"] = errors
        self._answer(rid, (op, request.slots), encode_frame(message))

    def send_table(self, request: BatchRequestReceived, table: ResultTable) -> None:
        """Answer a ``reset`` / ``step`` request with its results by column (section 3.9).

        On a version-2 connection the columns travel as they are; on version 1 they
        become one map per slot. Next: :meth:`data_to_send`.

        Raises:
            LocalProtocolError: The request is not a pending reset/step, a column or
                array does not have one entry per slot, or a value cannot be serialised.
        """
        rid, op, n = request.request_id, request.op, len(request.slots)
        if op not in _ARG_OPS:
            raise LocalProtocolError(f"send_table answers reset and step, not {op.value}")
        rewards, dones, errors = table.rewards, table.dones, table.errors
        if rewards.shape != (n,) or dones.shape != (n,):
            raise LocalProtocolError(f"rewards and dones need shape ({n},)")
        if errors and not all(_is_uint(pos) and pos < n for pos in errors):
            raise LocalProtocolError("error positions must be positions of the request's slots")
        small = self.version >= 2 and n < _SMALL  # plain arrays: cheaper than ndarrays here
        message: dict[str, Any] = {
            "op": op.value,
            "id": rid,
            "reward": rewards.astype(_F8, copy=False).tolist()
            if small
            else rewards.astype(_F8, copy=False),
            "done": dones.astype(_B1, copy=False).tolist()
            if small
            else dones.astype(_B1, copy=False),
        }
        observations, metadata = table.observations, table.metadata
        if self.version >= 2 and _is_map(observations):
            message["cols"] = _encode_columns(observations, table.numeric, n)
            if table.numeric:
                message["numeric"] = sorted(table.numeric)
        else:
            rows = (
                columns_to_rows(_encode_columns(observations, table.numeric, n), table.numeric, n)
                if isinstance(observations, Mapping)
                else list(observations)
            )
            if len(rows) != n:
                raise LocalProtocolError(f"{n} slots need {n} observations, got {len(rows)}")
            message["obs"] = [None if pos in errors else row or {} for pos, row in enumerate(rows)]
        if metadata is not None and self.version >= 2 and _is_map(metadata):
            if not all(column.__class__ is list for column in metadata.values()):
                raise LocalProtocolError("metadata columns must be lists")
            message["meta_cols"] = _encode_columns(metadata, frozenset(), n)
        elif metadata is not None:
            meta_rows = (
                columns_to_rows(_encode_columns(metadata, frozenset(), n), frozenset(), n)
                if isinstance(metadata, Mapping)
                else list(metadata)
            )
            if len(meta_rows) != n:
                raise LocalProtocolError(f"{n} slots need {n} metadata entries")
            meta = [None if pos in errors else row or None for pos, row in enumerate(meta_rows)]
            if any(m is not None for m in meta):
                message["meta"] = meta
        if errors:
            message["errors"] = {
                pos: [e.code, e.message, dict(e.details)] for pos, e in sorted(errors.items())
            }
        self._answer(rid, (op, request.slots), encode_frame(message))

    def _answer(self, rid: int, expected: tuple[Op, tuple[int, ...]], frame: bytes) -> None:
        next_state = _SERVER_TRANSITIONS.get((self.state, _SEND_REPLY))
        if next_state is None or self._pending.get(rid) != expected:
            raise LocalProtocolError(f"no pending {expected[0].value} request with id {rid}")
        del self._pending[rid]
        self._busy.difference_update(expected[1])
        self.state = next_state
        self._outgoing.append(frame)

    def events_received(self) -> list[HelloRequestReceived | BatchRequestReceived]:
        """Return and forget the requests parsed so far."""
        events, self._events = self._events, []
        return events

    def data_to_send(self) -> list[bytes]:
        """Return and forget the binary frames queued for sending."""
        frames, self._outgoing = self._outgoing, []
        return frames
