"""The server end of one batched connection (``docs/protocol.md`` sections 3.4 - 3.9)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
import numpy as np

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.batch.codec import FrameBudgetError, decode_frame, encode_frame
from openenv_gym.protocol.batch.columns import (
    columns_to_rows,
    encode_columns,
    is_map,
    parse_columns,
)
from openenv_gym.protocol.batch.messages import (
    ARG_OPS,
    DEFAULT_MAX_FRAME,
    DONE_DTYPE,
    MAX_REQUEST_ID,
    OPS,
    PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    RESULT_OPS,
    REWARD_DTYPE,
    SMALL_REPLY,
    BatchRequestReceived,
    FrameErrorCode,
    HelloRequestReceived,
    Op,
    ResultTable,
    SlotError,
    SlotResult,
    check_id,
    check_slots,
    is_uint,
)
from openenv_gym.protocol.openenv.messages import brief
from openenv_gym.protocol.states import (
    BATCH_SERVER_TRANSITIONS,
    BatchServerEvent,
    ConnectionState,
    fire,
)

__all__ = ["BatchServer"]

_SE = BatchServerEvent
_TABLE = BATCH_SERVER_TRANSITIONS
# the events of every request, as globals (an Enum member read from its class is slow)
_RECEIVE_REQUEST = _SE.RECEIVE_REQUEST
_SEND_REPLY = _SE.SEND_REPLY


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
    op = OPS.get(name) if isinstance(name, str) else None
    if count <= max_slots or op in (None, Op.HELLO) or not is_uint(rid):
        return None
    if rid == 0 or rid > MAX_REQUEST_ID or rid in pending:
        return None
    return rid, str(_too_many_slots(op, count, max_slots))


def _request_id_early(data: bytes | str, pending: Mapping[int, Any]) -> int | None:
    """The id of a request whose first two keys are ``op`` (not hello) and ``id``, else None.

    For refusing a frame that cannot be decoded whole (over the value budget) with its
    id, so that the client's connection survives it (section 3.8). Nothing past those
    two entries is read.
    """
    fields: dict[str, Any] = {}
    try:
        unpacker = msgpack.Unpacker(
            io.BytesIO(data),  # type: ignore[arg-type]
            raw=False,
            max_buffer_size=len(data),
            read_size=min(len(data), 4096),
            max_str_len=64,
            max_bin_len=0,
            max_array_len=0,
            max_map_len=0,
            max_ext_len=0,
        )
        if unpacker.read_map_header() < 2:
            return None
        for _ in range(2):
            key = unpacker.unpack()
            if key not in ("op", "id") or key in fields:
                return None
            fields[key] = unpacker.unpack()
    except Exception:  # not msgpack, not a map, other keys first
        return None
    name, rid = fields["op"], fields["id"]
    if not isinstance(name, str) or OPS.get(name) in (None, Op.HELLO) or not is_uint(rid):
        return None
    if rid == 0 or rid > MAX_REQUEST_ID or rid in pending:
        return None
    return rid


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
        max_values: Most values one frame may decode into (None: no limit); the decode
            stops there, and the frame is refused (``INVALID_REQUEST`` with its id when its
            first keys are ``op`` and ``id``, else ``INVALID_FRAME``).
    """

    def __init__(
        self,
        max_frame: int = DEFAULT_MAX_FRAME,
        version: int = PROTOCOL_VERSION,
        max_slots: int | None = None,
        max_values: int | None = None,
    ) -> None:
        if version not in PROTOCOL_VERSIONS:
            raise LocalProtocolError(f"unknown protocol version {version}")
        self.max_frame = max_frame
        self.version = version
        self.max_slots = max_slots
        self.max_values = max_values
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
            message = decode_frame(data, self.max_frame, self.max_values)
            code = FrameErrorCode.INVALID_REQUEST
            rid = self._request_id(message)
            event = self._parse(message, rid)
        except FrameBudgetError as exc:  # refused with its id if it comes first
            rid = _request_id_early(data, self._pending)
            if rid is not None and (self.state, _RECEIVE_REQUEST) in _TABLE:
                code = FrameErrorCode.INVALID_REQUEST
            self._refuse(rid if code is FrameErrorCode.INVALID_REQUEST else None, code, str(exc))
            return
        except RemoteProtocolError as exc:
            self._refuse(rid, code, str(exc))
            return
        if isinstance(event, HelloRequestReceived):
            self.state = fire(_TABLE, self.state, _SE.RECEIVE_HELLO)
            self._pending[rid] = (Op.HELLO, ())
        else:
            self.state = fire(_TABLE, self.state, _RECEIVE_REQUEST)
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
        if max_slots is None or (self.state, _RECEIVE_REQUEST) not in _TABLE:
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
        self.state = fire(_TABLE, self.state, _SE.RECEIVE_BAD_FRAME)
        self._outgoing.append(frame)

    def _request_id(self, message: dict[Any, Any]) -> int:
        rid = check_id(message.get("id"))
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
        op = OPS.get(name) if isinstance(name, str) else None
        if op is None:
            raise RemoteProtocolError(f"unknown op {brief(name)}")
        if op is Op.HELLO:
            if (self.state, _SE.RECEIVE_HELLO) not in _TABLE:
                raise RemoteProtocolError("hello was already received")
            versions = message.get("versions")
            client = message.get("client", "")
            if (
                not isinstance(versions, list)
                or not all(is_uint(v) for v in versions)
                or not isinstance(client, str)
            ):
                raise RemoteProtocolError("hello needs 'versions' (list of int) and 'client' (str)")
            if self.version not in versions:
                raise RemoteProtocolError(
                    f"no common protocol version (this connection speaks {self.version})"
                )
            return HelloRequestReceived(rid, tuple(versions), client)
        if (self.state, _RECEIVE_REQUEST) not in _TABLE:
            raise RemoteProtocolError(f"{op.value} before hello")
        named = message.get("slots")
        if self.max_slots is not None and isinstance(named, list) and len(named) > self.max_slots:
            raise _too_many_slots(op, len(named), self.max_slots)  # before any per-slot work
        slots = check_slots(named)
        busy = self._busy and self._busy.intersection(slots)
        if busy:
            raise RemoteProtocolError(f"slots {sorted(busy)} are in a request in flight")
        args: tuple[Mapping[str, Any], ...] = ()
        width = 0
        if op in ARG_OPS and self.version >= 2 and "cols" in message:
            columns, numeric = parse_columns(
                message["cols"], message.get("numeric", []), len(slots), "cols"
            )
            args = tuple(columns_to_rows(columns, numeric, len(slots)))
            width = len(columns)
        elif op in ARG_OPS:
            raw = message.get("args")
            if not isinstance(raw, list) or len(raw) != len(slots):
                raise RemoteProtocolError(f"{op.value}: 'args' must be a list of {len(slots)} maps")
            if not all(isinstance(a, dict) and all(isinstance(k, str) for k in a) for a in raw):
                raise RemoteProtocolError(f"{op.value}: 'args' entries must be maps with str keys")
            args = tuple(raw)
            width = max(map(len, raw))
        return BatchRequestReceived(op, rid, slots, args, width)

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
        if op in RESULT_OPS and not all(isinstance(r, SlotResult | SlotError) for r in results):
            raise LocalProtocolError(f"{op.value} needs a SlotResult or SlotError per slot")
        message: dict[str, Any] = {"op": op.value, "id": rid}
        ok = [r if isinstance(r, SlotResult) else None for r in results]
        if op in ARG_OPS:
            message["obs"] = [None if r is None else r.observation or {} for r in ok]
            message["reward"] = np.array(
                [math.nan if r is None or r.reward is None else r.reward for r in ok],
                dtype=REWARD_DTYPE,
            )
            message["done"] = np.array([r is not None and r.done for r in ok], dtype=DONE_DTYPE)
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
        if op not in ARG_OPS:
            raise LocalProtocolError(f"send_table answers reset and step, not {op.value}")
        rewards, dones, errors = table.rewards, table.dones, table.errors
        if rewards.shape != (n,) or dones.shape != (n,):
            raise LocalProtocolError(f"rewards and dones need shape ({n},)")
        if errors and not all(is_uint(pos) and pos < n for pos in errors):
            raise LocalProtocolError("error positions must be positions of the request's slots")
        small = self.version >= 2 and n < SMALL_REPLY  # plain arrays: cheaper than ndarrays here
        message: dict[str, Any] = {
            "op": op.value,
            "id": rid,
            "reward": rewards.astype(REWARD_DTYPE, copy=False).tolist()
            if small
            else rewards.astype(REWARD_DTYPE, copy=False),
            "done": dones.astype(DONE_DTYPE, copy=False).tolist()
            if small
            else dones.astype(DONE_DTYPE, copy=False),
        }
        observations, metadata = table.observations, table.metadata
        if self.version >= 2 and is_map(observations):
            message["cols"] = encode_columns(observations, table.numeric, n)
            if table.numeric:
                message["numeric"] = sorted(table.numeric)
        else:
            rows = (
                columns_to_rows(encode_columns(observations, table.numeric, n), table.numeric, n)
                if isinstance(observations, Mapping)
                else list(observations)
            )
            if len(rows) != n:
                raise LocalProtocolError(f"{n} slots need {n} observations, got {len(rows)}")
            message["obs"] = [None if pos in errors else row or {} for pos, row in enumerate(rows)]
        if metadata is not None and self.version >= 2 and is_map(metadata):
            if not all(column.__class__ is list for column in metadata.values()):
                raise LocalProtocolError("metadata columns must be lists")
            message["meta_cols"] = encode_columns(metadata, frozenset(), n)
        elif metadata is not None:
            meta_rows = (
                columns_to_rows(encode_columns(metadata, frozenset(), n), frozenset(), n)
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
        if self._pending.get(rid) != expected:
            raise LocalProtocolError(f"no pending {expected[0].value} request with id {rid}")
        next_state = fire(_TABLE, self.state, _SEND_REPLY)  # legal: a request is pending
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
