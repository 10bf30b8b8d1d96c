"""The batched protocol's vocabulary: versions, operations, error codes, and the events.

Constants of ``docs/protocol.md`` sections 1.2 - 1.3 and 3.4 - 3.8, the messages both ends
exchange (requests and replies as events, per-slot results and errors), and the checks of
the few values every request carries (its id and slots).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeGuard

import numpy as np

from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.protocol.batch.columns import column_value
from openenv_gym.protocol.openenv.messages import ErrorReceived, brief

__all__ = [
    "ARG_OPS",
    "DEFAULT_MAX_FRAME",
    "DONE_DTYPE",
    "MAX_REQUEST_ID",
    "OPS",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "RESULT_OPS",
    "REWARD_DTYPE",
    "SMALL_REPLY",
    "SUBPROTOCOL",
    "SUBPROTOCOLS",
    "SUBPROTOCOL_V2",
    "BatchReplyReceived",
    "BatchRequestReceived",
    "FrameErrorCode",
    "HelloReceived",
    "HelloRequestReceived",
    "Op",
    "RequestFailed",
    "ResultTable",
    "SlotError",
    "SlotErrorCode",
    "SlotResult",
    "check_id",
    "check_slots",
    "is_uint",
    "plain_uints",
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


OPS = {op.value: op for op in Op}
"""Op by its name on the wire."""
ARG_OPS = (Op.RESET, Op.STEP)
"""The ops whose requests carry arguments and whose replies carry obs, reward and done."""
RESULT_OPS = (Op.RESET, Op.STEP, Op.STATE)
"""The ops that give every slot a result or an error."""
REWARD_DTYPE = np.dtype("<f8")
"""``reward`` travels as float64 (section 3.4)."""
DONE_DTYPE = np.dtype("|b1")
"""``done`` travels as bool (section 3.4)."""
SMALL_REPLY = 16
"""Version 2 sends ``reward`` and ``done`` of fewer slots as plain arrays (section 3.9)."""


class FrameErrorCode(enum.StrEnum):
    """Codes of a whole-frame ``op: "error"`` reply (section 3.6); the connection survives."""

    INVALID_FRAME = "INVALID_FRAME"  # not one msgpack map of at most max_frame bytes
    INVALID_REQUEST = "INVALID_REQUEST"  # a map, but not a valid request


class SlotErrorCode(enum.StrEnum):
    """Per-slot error codes that exist only in the batched protocol (section 3.6)."""

    NO_SUCH_SLOT = "NO_SUCH_SLOT"  # the slot is not open on this connection
    SLOT_IN_USE = "SLOT_IN_USE"  # open: the slot is already open


# ------------------------------------------------------------------ checks


def is_uint(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a non-negative ``int`` (a ``bool`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_id(value: Any) -> int:
    """``value`` as a request id (section 3.5).

    Raises:
        RemoteProtocolError: It is not an integer in [0, 2**32).
    """
    if not is_uint(value) or value > MAX_REQUEST_ID:
        raise RemoteProtocolError(
            f"request id must be an integer in [0, 2**32), got {brief(value)}"
        )
    return value


_INTS = {int}


def plain_uints(values: Sequence[Any]) -> bool:
    """Whether non-empty ``values`` are all plain non-negative ``int`` (checked in C)."""
    return set(map(type, values)) == _INTS and min(values) >= 0


def check_slots(value: Any) -> tuple[int, ...]:
    """``value`` as a request's slots: a non-empty list of unique uints (section 3.4).

    Raises:
        RemoteProtocolError: It is not one.
    """
    # msgpack gives ints as int exactly (booleans as bool): no per-slot is_uint call
    if not isinstance(value, list) or not value or not plain_uints(value):
        raise RemoteProtocolError(
            f"'slots' must be a non-empty list of non-negative integers, got {brief(value)}"
        )
    slots = tuple(value)
    if len(set(slots)) != len(slots):
        raise RemoteProtocolError("'slots' contains duplicates")
    return slots


# ------------------------------------------------------------------ messages


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
        width: The most entries one slot's mapping of :attr:`args` has (0 without args):
            a server may refuse a slot whose action has more keys than its model takes
            before validating it key by key.
    """

    op: Op
    request_id: int
    slots: tuple[int, ...]
    args: tuple[Mapping[str, Any], ...] = ()
    width: int = field(default=0, compare=False)  # derived from args


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
