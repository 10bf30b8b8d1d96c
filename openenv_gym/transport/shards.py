"""Shards: the sub-environments a vector env keeps on one server, and how to drive them.

A :class:`BatchShard` holds one batched connection whose slots are the sub-envs; one
request for many of them is one frame. A :class:`JsonShard` holds one OpenEnv ``/ws``
session per sub-env and drives them side by side. Both take a request without waiting
(:meth:`Shard.send`), read replies as they come (:meth:`Shard.poll`) and hand back one
:class:`Outcome` per request: the results of its sub-envs **by column**, exactly as the
batched protocol carried them (JSON replies are put in the same form), so callers never
care which protocol a server speaks.
"""

from __future__ import annotations

import abc
import concurrent.futures
import contextlib
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import ConnectError, EnvErrorGroup, OpenEnvGymError
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.transport.batch_connection import BatchConnection
from openenv_gym.transport.connection import BatchUnsupportedError, JsonSession, error_of
from openenv_gym.transport.handshake import NoAnswer
from openenv_gym.transport.outcome import Args, Ids, Outcome, rows_of
from openenv_gym.transport.raw import close_websockets
from openenv_gym.transport.wire import WebSocket

__all__ = [
    "Args",
    "BatchShard",
    "Ids",
    "JsonShard",
    "Outcome",
    "Shard",
    "close_shards",
    "connect_shard",
    "connect_shards",
    "rows_of",
    "split_evenly",
]

logger = logging.getLogger("openenv_gym.transport")

_OPS = {op_.value: op_ for op_ in bp.Op}


class Shard(abc.ABC):
    """The sub-envs of one server.

    Attributes:
        url: The server's base URL.
        indices: Global sub-env indices, by position on this shard.
        protocol: ``"batch"`` or ``"json"``.
    """

    protocol: str

    def __init__(self, url: str, indices: list[int]) -> None:
        self.url = url
        self.indices = indices

    @abc.abstractmethod
    def send(
        self,
        op_: str,
        positions: Sequence[int],
        ids: Ids,
        args: Args = None,
        numeric: frozenset[str] = frozenset(),
    ) -> Any:
        """Send one operation for the sub-envs at ``positions`` (global ``ids``); no wait.

        Returns a ticket for :meth:`done` and :meth:`take`. A failure to send is kept
        for :meth:`take`, never raised here.
        """

    def hold(self) -> None:  # noqa: B027 - optional: only frame-writing shards hold
        """Keep the frames of the next :meth:`send` calls back until :meth:`release`.

        A shard whose sends are not frames on one connection (JSON: one socket per
        sub-env) writes each at once and ignores this.
        """

    def release(self) -> None:  # noqa: B027 - optional, as hold
        """Write whatever :meth:`hold` kept back, in one write where it can. Never raises."""

    @property
    @abc.abstractmethod
    def sockets(self) -> list[WebSocket]:
        """The sockets to watch while a request of this shard is pending."""

    @abc.abstractmethod
    def poll(self, ready: Sequence[WebSocket] | None = None) -> None:
        """Read and decode whatever has arrived on ``ready`` (default: every socket).

        Never blocks.
        """

    @abc.abstractmethod
    def done(self, ticket: Any) -> bool:
        """Whether the request is answered (or failed)."""

    @abc.abstractmethod
    def deadline(self, ticket: Any) -> float | None:
        """When the request times out."""

    @abc.abstractmethod
    def expire(self, now: float) -> None:
        """Fail what is overdue at ``now`` (timeouts are fatal)."""

    @abc.abstractmethod
    def take(self, ticket: Any) -> Outcome:
        """The request's :class:`Outcome`, once :meth:`done`."""

    @property
    @abc.abstractmethod
    def broken(self) -> bool:
        """Whether some of its sub-envs can take no more requests.

        A connection of the shard timed out, was lost, broke the protocol, or was
        interrupted halfway (a ``KeyboardInterrupt`` while it was read or written).

        A broken shard is replaced, never repaired: open a new one for the same sub-envs
        (:func:`connect_shard` with its :attr:`url`, :attr:`indices` and :attr:`protocol`)
        and put it in its place (:meth:`Dispatcher.replace
        <openenv_gym.transport.dispatch.Dispatcher.replace>`), which drops this one at
        once. Its sub-envs start afresh there: their episodes are over.
        """

    @property
    @abc.abstractmethod
    def close_timeout(self) -> float | None:
        """How long a polite close may wait for the server (``timeouts.close``)."""

    @abc.abstractmethod
    def closing(self) -> list[tuple[WebSocket, Sequence[bytes | str]]]:
        """End every session: the sockets to close, each with the goodbye to send first.

        For :func:`~openenv_gym.transport.raw.close_websockets`, which closes the sockets
        of many shards within one deadline (:meth:`close` is one shard's).
        """

    def close(self) -> None:
        """Close every session of the shard politely, within one close timeout.

        Never raises.
        """
        close_websockets(self.closing(), self.close_timeout)

    @abc.abstractmethod
    def abort(self, why: str = "closed by the client") -> None:
        """Drop every connection of the shard at once, no closing handshake. Never raises.

        Requests in flight fail (:meth:`take` reports ``ConnectionLostError``, its message
        ending with ``why``); nothing waits for the server, so a frozen one costs nothing.
        """

    @abc.abstractmethod
    def interrupt(self) -> None:
        """From another thread: make a pending wait on this shard return at once."""


@dataclass(slots=True)
class _BatchTicket:
    op: str
    ids: Ids
    rid: int | None
    error: BaseException | None = None


class BatchShard(Shard):
    """Sub-envs as slots ``0..k-1`` of one batched connection."""

    protocol = "batch"

    def __init__(self, url: str, indices: list[int], conn: BatchConnection) -> None:
        super().__init__(url, indices)
        self.conn = conn
        self._sockets = [conn.ws]

    @property
    def sockets(self) -> list[WebSocket]:
        """See :attr:`Shard.sockets`."""
        return self._sockets

    def send(
        self,
        op_: str,
        positions: Sequence[int],
        ids: Ids,
        args: Args = None,
        numeric: frozenset[str] = frozenset(),
    ) -> _BatchTicket:
        """See :meth:`Shard.send`."""
        if isinstance(args, Mapping) and self.conn.version < 2:
            args = rows_of(args, len(ids), numeric)
            numeric = frozenset()
        try:
            rid = self.conn.send(_OPS[op_], positions, args, numeric)
        except (OpenEnvGymError, ValueError, TypeError) as exc:
            return _BatchTicket(op_, ids, None, exc)
        return _BatchTicket(op_, ids, rid)

    def hold(self) -> None:
        """See :meth:`Shard.hold`."""
        self.conn.hold()

    def release(self) -> None:
        """See :meth:`Shard.release`."""
        self.conn.release()

    def poll(self, ready: Sequence[WebSocket] | None = None) -> None:
        """See :meth:`Shard.poll`."""
        ws = self.conn.ws
        if ready is None or any(r is ws for r in ready):
            self.conn.poll()

    def done(self, ticket: _BatchTicket) -> bool:
        """See :meth:`Shard.done`."""
        return ticket.rid is None or self.conn.done(ticket.rid)

    def deadline(self, ticket: _BatchTicket) -> float | None:
        """See :meth:`Shard.deadline`."""
        return None if ticket.rid is None else self.conn.deadline(ticket.rid)

    def expire(self, now: float) -> None:
        """See :meth:`Shard.expire`."""
        self.conn.expire(now)

    def take(self, ticket: _BatchTicket) -> Outcome:
        """See :meth:`Shard.take`."""
        if ticket.rid is None:
            assert ticket.error is not None
            return Outcome.failed(ticket.ids, ticket.op, ticket.error)
        try:
            reply = self.conn.take(ticket.rid)
        except OpenEnvGymError as exc:
            return Outcome.failed(ticket.ids, ticket.op, exc)
        slots = reply.slots
        errors: dict[int, BaseException] = {}
        if reply.errors:
            errors = {
                k: error_of(reply.errors[s]) for k, s in enumerate(slots) if s in reply.errors
            }
        return Outcome(
            ticket.ids,
            ticket.op,
            reply.columns,
            reply.observations,
            reply.numeric,
            reply.rewards,
            reply.dones,
            reply.meta_columns,
            reply.metadata,
            errors,
        )

    @property
    def broken(self) -> bool:
        """See :attr:`Shard.broken`: the connection failed (all its slots)."""
        return self.conn.failure is not None

    @property
    def close_timeout(self) -> float | None:
        """See :attr:`Shard.close_timeout`."""
        return self.conn.timeouts.close

    def closing(self) -> list[tuple[WebSocket, Sequence[bytes | str]]]:
        """See :meth:`Shard.closing`."""
        return [self.conn.closing()]

    def abort(self, why: str = "closed by the client") -> None:
        """See :meth:`Shard.abort`."""
        self.conn.abort(why)

    def interrupt(self) -> None:
        """See :meth:`Shard.interrupt`."""
        self.conn.ws.interrupt()


@dataclass(slots=True)
class _JsonTicket:
    op: str
    ids: Ids
    positions: list[int]
    errors: dict[int, BaseException]
    waiting: set[int] = field(default_factory=set)  # positions whose reply is not in
    deadline: float | None = None


class JsonShard(Shard):
    """Sub-envs as one OpenEnv ``/ws`` session each, driven side by side."""

    protocol = "json"

    def __init__(self, url: str, indices: list[int], sessions: list[JsonSession]) -> None:
        super().__init__(url, indices)
        self.sessions = sessions
        self._busy: set[int] = set()
        self._ticket_of: dict[int, _JsonTicket] = {}
        self._tickets: list[_JsonTicket] = []  # sent, not taken
        self._where = {id(session.ws): pos for pos, session in enumerate(sessions)}
        self._sockets = [session.ws for session in sessions]

    @property
    def sockets(self) -> list[WebSocket]:
        """See :attr:`Shard.sockets`: every session's (idle ones report nothing)."""
        return self._sockets

    def send(
        self,
        op_: str,
        positions: Sequence[int],
        ids: Ids,
        args: Args = None,
        numeric: frozenset[str] = frozenset(),
    ) -> _JsonTicket:
        """See :meth:`Shard.send`."""
        ticket = _JsonTicket(op_, ids, list(positions), {})
        rows = rows_of(args, len(ticket.positions), numeric)
        for k, (pos, arg) in enumerate(zip(ticket.positions, rows, strict=True)):
            session = self.sessions[pos]
            try:
                if op_ == "step":
                    session.send_step(arg)
                elif op_ == "reset":
                    session.send_reset(**arg)
                else:
                    session.send_state()
            except (OpenEnvGymError, ValueError, TypeError) as exc:
                ticket.errors[k] = exc
                continue
            self._busy.add(pos)
            self._ticket_of[pos] = ticket
            if session.ready:  # failed at once (the connection was gone)
                continue
            ticket.waiting.add(pos)
            if ticket.deadline is None:
                ticket.deadline = session.deadline
        self._tickets.append(ticket)
        return ticket

    def poll(self, ready: Sequence[WebSocket] | None = None) -> None:
        """See :meth:`Shard.poll`."""
        sessions = self.sessions
        if ready is None:
            positions: Iterable[int] = list(self._busy)
        else:
            where = self._where
            positions = [pos for ws in ready if (pos := where.get(id(ws))) is not None]
        tickets = self._ticket_of
        for pos in positions:
            session = sessions[pos]
            with contextlib.suppress(OpenEnvGymError):  # closed: take() reports why
                session.poll()
            ticket = tickets.get(pos)
            if ticket is not None and session.ready:
                ticket.waiting.discard(pos)

    def done(self, ticket: _JsonTicket) -> bool:
        """See :meth:`Shard.done`."""
        return not ticket.waiting

    def deadline(self, ticket: _JsonTicket) -> float | None:
        """See :meth:`Shard.deadline` (a ticket's requests all left at once)."""
        return ticket.deadline

    def expire(self, now: float) -> None:
        """See :meth:`Shard.expire` (:meth:`take` reports the overdue sessions)."""
        for ticket in self._tickets:
            if ticket.waiting and ticket.deadline is not None and now >= ticket.deadline:
                for pos in list(ticket.waiting):
                    self.sessions[pos].expire(now)
                    if self.sessions[pos].ready:
                        ticket.waiting.discard(pos)

    def take(self, ticket: _JsonTicket) -> Outcome:
        """See :meth:`Shard.take`."""
        n = len(ticket.ids)
        rows: list[dict[str, Any] | None] = [None] * n
        meta: list[dict[str, Any] | None] = [None] * n
        rewards = np.full(n, math.nan)
        dones = np.zeros(n, dtype=bool)
        errors = dict(ticket.errors)
        if ticket in self._tickets:
            self._tickets.remove(ticket)
        for k, pos in enumerate(ticket.positions):
            if k in errors:
                continue
            self._busy.discard(pos)
            self._ticket_of.pop(pos, None)
            try:
                reply = self.sessions[pos].take()
            except OpenEnvGymError as exc:
                errors[k] = exc
                continue
            if isinstance(reply, op.StateReceived):
                rows[k] = reply.state
                continue
            assert isinstance(reply, op.ObservationReceived)
            rows[k] = reply.observation
            meta[k] = reply.metadata
            if reply.reward is not None:
                rewards[k] = reply.reward
            dones[k] = reply.done
        return Outcome(
            ticket.ids,
            ticket.op,
            None,
            rows,
            frozenset(),
            rewards,
            dones,
            None,
            meta if any(m is not None for m in meta) else None,
            errors,
        )

    @property
    def broken(self) -> bool:
        """See :attr:`Shard.broken`: a session ended (the others may still answer)."""
        return any(session.closed for session in self.sessions)

    @property
    def close_timeout(self) -> float | None:
        """See :attr:`Shard.close_timeout`."""
        return self.sessions[0].timeouts.close if self.sessions else None

    def closing(self) -> list[tuple[WebSocket, Sequence[bytes | str]]]:
        """See :meth:`Shard.closing`."""
        return [session.closing() for session in self.sessions]

    def abort(self, why: str = "closed by the client") -> None:
        """See :meth:`Shard.abort`."""
        for session in self.sessions:
            session.abort(why)

    def interrupt(self) -> None:
        """See :meth:`Shard.interrupt`."""
        for session in self.sessions:
            session.ws.interrupt()


def close_shards(shards: Iterable[Shard]) -> None:
    """Close every session of ``shards`` politely, side by side, within one close timeout.

    The timeout is the longest of theirs, and a frozen server costs it once. Never raises.
    """
    shards = list(shards)
    closings: list[tuple[WebSocket, Sequence[bytes | str]]] = []
    for shard in shards:
        with contextlib.suppress(Exception):
            closings += shard.closing()
    timeouts = [shard.close_timeout for shard in shards]
    timeout = None if None in timeouts else max((t for t in timeouts if t is not None), default=0)
    close_websockets(closings, timeout)


def split_evenly(n: int, k: int) -> list[list[int]]:
    """Split ``range(n)`` into ``k`` contiguous runs whose sizes differ by at most one."""
    base, extra = divmod(n, k)
    runs, start = [], 0
    for j in range(k):
        size = base + (1 if j < extra else 0)
        runs.append(list(range(start, start + size)))
        start += size
    return runs


def connect_shard(
    url: str,
    indices: list[int],
    protocol: str,
    timeouts: Timeouts,
    headers: Mapping[str, str] | None,
) -> Shard:
    """Connect the sub-envs ``indices`` on one server: batched if offered, else JSON.

    JSON sessions are opened side by side on a few threads (a remote server costs round
    trips per handshake).

    With ``protocol="auto"``, a server that refuses the batched protocol's upgrade, or
    hangs up on it without an answer, is tried with OpenEnv's JSON ``/ws``; errors say
    which protocol they come from (``docs/protocol.md`` section 1.3).

    Raises:
        BatchUnsupportedError: ``protocol="batch"`` and the server does not speak it.
        ConnectError: The server is unreachable (with ``"auto"``: by either protocol).
        EnvErrorGroup: Some sessions could not be opened (the others are closed).
    """
    if protocol != "json":
        try:
            conn = BatchConnection.connect(url, timeouts, headers)
        except BatchUnsupportedError:
            if protocol == "batch":
                raise
            logger.info("%s does not speak the batched protocol; using OpenEnv /ws", url)
        except NoAnswer as unanswered:
            if protocol == "batch":
                raise
            return _connect_json_instead(url, indices, timeouts, headers, unanswered)
        except ConnectError as exc:
            if protocol == "auto" and type(exc) is ConnectError:
                raise ConnectError(f"{exc} {_AUTO_HINT}") from exc
            raise
        else:
            try:
                slots = list(range(len(indices)))
                reply = conn.call(bp.Op.OPEN, slots)
                if reply.errors:
                    raise EnvErrorGroup(
                        f"{url}: could not open {len(reply.errors)} of {len(slots)} sessions",
                        {indices[s]: error_of(e) for s, e in reply.errors.items()},
                    )
            except BaseException:
                conn.abort()
                raise
            return BatchShard(url, indices, conn)
    return _connect_json(url, indices, timeouts, headers)


_AUTO_HINT = (
    "(protocol='auto' tries the batched protocol first; protocol='json' opens OpenEnv's "
    "JSON /ws only)"
)


def _connect_json_instead(
    url: str,
    indices: list[int],
    timeouts: Timeouts,
    headers: Mapping[str, str] | None,
    unanswered: NoAnswer,
) -> JsonShard:
    """``/batch`` got no answer at all: try ``/ws``; if that fails alike, say both."""
    logger.info("%s: no answer to the batched protocol (%s); trying OpenEnv /ws", url, unanswered)
    try:
        return _connect_json(url, indices, timeouts, headers)
    except EnvErrorGroup as group:
        errors = list(group.errors.values())
        if not all(isinstance(e, ConnectError) for e in errors):
            raise
        last = errors[0]
        raise ConnectError(
            f"{url}: no answer to either protocol: the batched protocol's upgrade "
            f"({unanswered}), then OpenEnv's JSON /ws ({last})"
        ) from (last.__cause__ or last)  # the OSError itself, as for one protocol


def _connect_json(
    url: str, indices: list[int], timeouts: Timeouts, headers: Mapping[str, str] | None
) -> JsonShard:
    def one(_: int) -> JsonSession | BaseException:
        try:
            return JsonSession.connect(url, timeouts, headers)
        except OpenEnvGymError as exc:
            return exc

    outcomes = _map(one, indices)
    sessions = [s for s in outcomes if isinstance(s, JsonSession)]
    failures = {indices[k]: e for k, e in enumerate(outcomes) if isinstance(e, BaseException)}
    if failures:
        for session in sessions:
            session.abort()
        raise EnvErrorGroup(f"{url}: could not open {len(failures)} sessions", failures)
    return JsonShard(url, indices, sessions)


def _map(function: Any, items: Sequence[Any]) -> list[Any]:
    """``function`` over ``items`` on up to 32 threads (in order); inline for one item."""
    if len(items) <= 1:
        return [function(item) for item in items]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(items))) as pool:
        return list(pool.map(function, items))


def connect_shards(
    urls: Sequence[str],
    num_envs: int,
    protocol: str,
    timeouts: Timeouts,
    headers: Mapping[str, str] | Sequence[Mapping[str, str] | None] | None = None,
) -> list[Shard]:
    """Spread ``num_envs`` sub-envs over ``urls`` (contiguous runs) and connect them all.

    ``headers``: for every server, or a list of them, one per URL (their tokens differ).

    Raises:
        EnvErrorGroup: Some sessions could not be opened (all others are closed).
        ConnectError: A server is unreachable.
    """
    k = min(len(urls), num_envs)
    runs = split_evenly(num_envs, k)
    per_url = list(headers) if isinstance(headers, Sequence) else [headers] * len(urls)

    def shard(job: tuple[str, list[int], Mapping[str, str] | None]) -> Shard | BaseException:
        try:
            return connect_shard(job[0], job[1], protocol, timeouts, job[2])
        except OpenEnvGymError as exc:
            return exc

    outcomes = _map(shard, list(zip(urls, runs, per_url, strict=False)))
    shards = [s for s in outcomes if isinstance(s, Shard)]
    failures = [e for e in outcomes if isinstance(e, BaseException)]
    if failures:
        close_shards(shards)
        raise failures[0]
    return shards
