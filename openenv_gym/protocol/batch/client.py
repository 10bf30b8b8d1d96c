"""The client end of one batched connection (``docs/protocol.md`` sections 3.4 - 3.7, 3.9)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.batch.codec import decode_frame, encode_frame
from openenv_gym.protocol.batch.columns import encode_columns, parse_columns
from openenv_gym.protocol.batch.messages import (
    ARG_OPS,
    DONE_DTYPE,
    MAX_REQUEST_ID,
    PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    RESULT_OPS,
    REWARD_DTYPE,
    BatchReplyReceived,
    HelloReceived,
    Op,
    RequestFailed,
    SlotErrorCode,
    check_id,
    is_uint,
    plain_uints,
)
from openenv_gym.protocol.openenv.messages import ErrorReceived, brief, code_ends_session
from openenv_gym.protocol.states import (
    BATCH_CLIENT_READING,
    BATCH_CLIENT_TRANSITIONS,
    BatchClientEvent,
    ConnectionState,
    IllegalTransition,
    fire,
)

__all__ = ["BatchClient"]

_CE = BatchClientEvent
_TABLE = BATCH_CLIENT_TRANSITIONS
_CLOSED = ConnectionState.CLOSED
# the events of every step, as globals (an Enum member read from its class is slow)
_SEND_REQUEST = _CE.SEND_REQUEST
_RECEIVE_REPLY = _CE.RECEIVE_REPLY


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
        try:
            next_state = fire(_TABLE, self.state, _CE.SEND_HELLO)
        except IllegalTransition:
            raise LocalProtocolError(
                f"hello must be sent first, state is {self.state.value}"
            ) from None
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
        try:
            next_state = fire(_TABLE, self.state, _SEND_REQUEST)
        except IllegalTransition:
            raise LocalProtocolError(
                f"cannot send {op.value} in state {self.state.value}"
            ) from None
        slot_tuple = tuple(slots)
        if not slot_tuple:
            raise LocalProtocolError(f"{op.value} needs at least one slot")
        if not plain_uints(slot_tuple) and not all(is_uint(s) for s in slot_tuple):
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
        if op in ARG_OPS:
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
        message["cols"] = encode_columns(columns, numeric, n)
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
        if self.state not in BATCH_CLIENT_READING:
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

    def _enter(self, event: BatchClientEvent) -> None:
        """Take the table's transition for ``event`` (legal here: the caller checked)."""
        self.state = state = fire(_TABLE, self.state, event)
        if state is _CLOSED:
            self.open_slots.clear()
            self._busy.clear()
            self._pending.clear()

    def _parse(self, message: dict[Any, Any]) -> HelloReceived | BatchReplyReceived | RequestFailed:
        op = message.get("op")
        if not isinstance(op, str):
            raise RemoteProtocolError(f"reply has no 'op' string: {brief(op)}")
        if op == "error":
            return self._parse_error(message)
        rid = check_id(message.get("id"))
        pending = self._pop(rid)
        if op != pending.op.value:
            raise RemoteProtocolError(f"reply op {brief(op)} does not match {pending.op.value}")
        if pending.op is Op.HELLO:
            return self._parse_hello(message)
        return self._parse_reply(message, rid, pending)

    def _parse_error(self, message: dict[Any, Any]) -> RequestFailed:
        raw_id, code, text = message.get("id"), message.get("code"), message.get("message")
        if not isinstance(code, str) or not isinstance(text, str):
            raise RemoteProtocolError(f"malformed error frame: {brief(message)}")
        rid = None if raw_id is None else check_id(raw_id)
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
            is_uint(version)
            and isinstance(server, str)
            and isinstance(env, str)
            and is_uint(max_slots)
            and is_uint(max_frame)
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
        if pending.op in ARG_OPS:
            if self.version >= 2 and "cols" in message:
                columns, numeric = parse_columns(
                    message["cols"], message.get("numeric", []), n, "cols"
                )
                observations = None
            else:
                observations = _parse_list(message.get("obs"), n, "obs", dict)
            if self.version >= 2 and "meta_cols" in message:
                meta_columns, _ = parse_columns(message["meta_cols"], [], n, "meta_cols")
                if any(isinstance(c, np.ndarray) for c in meta_columns.values()):
                    raise RemoteProtocolError("'meta_cols' columns must be arrays, not ndarrays")
                metadata = None
            elif "meta" in message:
                metadata = _parse_list(message["meta"], n, "meta", dict)
            else:
                metadata = [None] * n
            rewards = _parse_column(message.get("reward"), n, "reward", REWARD_DTYPE, self.version)
            dones = _parse_column(message.get("done"), n, "done", DONE_DTYPE, self.version)
        else:
            observations, metadata = [None] * n, [None] * n
            rewards, dones = np.full(n, math.nan), np.zeros(n, dtype=bool)
            if pending.op is Op.STATE:
                observations = _parse_list(message.get("state"), n, "state", dict)
        if pending.op in RESULT_OPS and observations is not None:
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
        if not is_uint(pos) or pos >= n:
            raise RemoteProtocolError(f"'errors' key {brief(pos)} is not a slot position")
        if (
            not isinstance(err, list)
            or len(err) != 3
            or not isinstance(err[0], str)
            or not isinstance(err[1], str)
            or not isinstance(err[2], dict)
        ):
            raise RemoteProtocolError(f"malformed slot error {brief(err)}")
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


def _parse_column(value: Any, n: int, name: str, dtype: np.dtype[Any], version: int) -> Any:
    if isinstance(value, list) and version >= 2 and len(value) == n:
        kinds = (bool,) if dtype == DONE_DTYPE else (float, int)
        if all(type(v) in kinds for v in value):
            return np.array(value, dtype=dtype)
    if not isinstance(value, np.ndarray) or value.shape != (n,) or value.dtype != dtype:
        raise RemoteProtocolError(f"{name!r} must be a {dtype.str} array of shape ({n},)")
    return value
