"""Shards: the sub-environments a vector env keeps on one server, and how to drive them.

A :class:`BatchShard` holds one batched connection whose slots are the sub-envs; a
request for many of them is one frame per operation. A :class:`JsonShard` holds one
OpenEnv ``/ws`` session per sub-env and drives them concurrently. Both answer
:meth:`Shard.run` with one result (or exception) per position, so callers never care
which protocol a server speaks.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import EnvErrorGroup
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.transport.connection import (
    BatchConnection,
    BatchUnsupportedError,
    JsonSession,
    slot_error,
)

__all__ = ["BatchShard", "JsonShard", "Shard", "connect_shard", "connect_shards", "split_evenly"]

logger = logging.getLogger("openenv_gym.transport")

Result = tuple[Any, ObservationReceived | BaseException | None] | BaseException
"""Per position: ``(first reply, reset reply or None)`` or the exception that failed it."""


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
    async def run(
        self,
        positions: Sequence[int],
        ops: Sequence[str],
        args: Sequence[Mapping[str, Any]],
        reset_after: Sequence[bool] | None = None,
    ) -> list[Result]:
        """Run one operation per position (``reset`` / ``step`` / ``state``).

        ``reset_after`` (SAME_STEP autoreset): per position, reset right after a step
        whose reply is ``done`` or whose flag is true (a truncation decided by the caller).
        """

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close every session of the shard. Never raises."""


class BatchShard(Shard):
    """Sub-envs as slots ``0..k-1`` of one batched connection."""

    protocol = "batch"

    def __init__(self, url: str, indices: list[int], conn: BatchConnection) -> None:
        super().__init__(url, indices)
        self.conn = conn

    async def _call(
        self, op_: bp.Op, slots: list[int], args: list[Mapping[str, Any]] | None
    ) -> dict[int, ObservationReceived | dict[str, Any] | BaseException]:
        try:
            reply = await self.conn.call(op_, slots, args)
        except Exception as exc:
            return dict.fromkeys(slots, exc)
        results: dict[int, ObservationReceived | dict[str, Any] | BaseException] = {}
        for k, slot in enumerate(slots):
            error = reply.errors.get(slot)
            obs = reply.observations[k]
            if error is not None:
                results[slot] = slot_error(error)
            elif op_ is bp.Op.STATE:
                results[slot] = obs or {}
            else:
                reward = float(reply.rewards[k])
                results[slot] = ObservationReceived(
                    obs or {},
                    None if reward != reward else reward,
                    bool(reply.dones[k]),
                    reply.metadata[k],
                )
        return results

    async def run(
        self,
        positions: Sequence[int],
        ops: Sequence[str],
        args: Sequence[Mapping[str, Any]],
        reset_after: Sequence[bool] | None = None,
    ) -> list[Result]:
        """See :meth:`Shard.run`."""
        groups: dict[str, tuple[list[int], list[Mapping[str, Any]]]] = {}
        for pos, op_, arg in zip(positions, ops, args, strict=True):
            slots, op_args = groups.setdefault(op_, ([], []))
            slots.append(pos)
            op_args.append(arg)
        outcomes = await asyncio.gather(
            *(
                self._call(bp.Op(op_), slots, None if op_ == "state" else op_args)
                for op_, (slots, op_args) in groups.items()
            )
        )
        merged: dict[int, Any] = {}
        for outcome in outcomes:
            merged.update(outcome)
        second: dict[int, Any] = {}
        if reset_after is not None:
            again = [
                pos
                for pos, op_, flag in zip(positions, ops, reset_after, strict=True)
                if op_ == "step"
                and isinstance(merged[pos], ObservationReceived)
                and (merged[pos].done or flag)
            ]
            if again:
                second = await self._call(bp.Op.RESET, again, [{}] * len(again))
        return [
            merged[pos]
            if isinstance(merged[pos], BaseException)
            else (merged[pos], second.get(pos))
            for pos in positions
        ]

    async def aclose(self) -> None:
        """See :meth:`Shard.aclose`."""
        await self.conn.aclose()


class JsonShard(Shard):
    """Sub-envs as one OpenEnv ``/ws`` session each, driven concurrently."""

    protocol = "json"

    def __init__(self, url: str, indices: list[int], sessions: list[JsonSession]) -> None:
        super().__init__(url, indices)
        self.sessions = sessions

    async def _one(
        self, pos: int, op_: str, arg: Mapping[str, Any], reset_after: bool | None
    ) -> Result:
        session = self.sessions[pos]
        try:
            if op_ == "state":
                return (await session.state(), None)
            if op_ == "reset":
                return (await session.reset(**arg), None)
            reply = await session.step(arg)
        except Exception as exc:
            return exc
        if reset_after is None or not (reply.done or reset_after):
            return (reply, None)
        try:
            return (reply, await session.reset())
        except Exception as exc:
            return (reply, exc)

    async def run(
        self,
        positions: Sequence[int],
        ops: Sequence[str],
        args: Sequence[Mapping[str, Any]],
        reset_after: Sequence[bool] | None = None,
    ) -> list[Result]:
        """See :meth:`Shard.run`."""
        flags: Sequence[bool | None] = (
            reset_after if reset_after is not None else [None] * len(positions)
        )
        return list(
            await asyncio.gather(
                *(
                    self._one(pos, op_, arg, flag)
                    for pos, op_, arg, flag in zip(positions, ops, args, flags, strict=True)
                )
            )
        )

    async def aclose(self) -> None:
        """See :meth:`Shard.aclose`."""
        await asyncio.gather(*(s.aclose() for s in self.sessions), return_exceptions=True)


def split_evenly(n: int, k: int) -> list[list[int]]:
    """Split ``range(n)`` into ``k`` contiguous runs whose sizes differ by at most one."""
    base, extra = divmod(n, k)
    runs, start = [], 0
    for j in range(k):
        size = base + (1 if j < extra else 0)
        runs.append(list(range(start, start + size)))
        start += size
    return runs


async def connect_shard(
    url: str,
    indices: list[int],
    protocol: str,
    timeouts: Timeouts,
    headers: Mapping[str, str] | None,
) -> Shard:
    """Connect the sub-envs ``indices`` on one server: batched if offered, else JSON.

    Raises:
        BatchUnsupportedError: ``protocol="batch"`` and the server does not speak it.
        EnvErrorGroup: Some sessions could not be opened (the others are closed).
    """
    if protocol != "json":
        try:
            conn = await BatchConnection.connect(url, timeouts, headers)
        except BatchUnsupportedError:
            if protocol == "batch":
                raise
            logger.info("%s does not speak the batched protocol; using OpenEnv /ws", url)
        else:
            try:
                slots = list(range(len(indices)))
                reply = await conn.call(bp.Op.OPEN, slots)
                if reply.errors:
                    raise EnvErrorGroup(
                        f"{url}: could not open {len(reply.errors)} of {len(slots)} sessions",
                        {indices[s]: slot_error(e) for s, e in reply.errors.items()},
                    )
            except BaseException:
                await conn.aclose()
                raise
            return BatchShard(url, indices, conn)
    outcomes = await asyncio.gather(
        *(JsonSession.connect(url, timeouts, headers) for _ in indices), return_exceptions=True
    )
    sessions = [s for s in outcomes if isinstance(s, JsonSession)]
    failures = {indices[k]: e for k, e in enumerate(outcomes) if isinstance(e, BaseException)}
    if failures:
        await asyncio.gather(*(s.aclose() for s in sessions), return_exceptions=True)
        raise EnvErrorGroup(f"{url}: could not open {len(failures)} sessions", failures)
    return JsonShard(url, indices, sessions)


async def connect_shards(
    urls: Sequence[str],
    num_envs: int,
    protocol: str,
    timeouts: Timeouts,
    headers: Mapping[str, str] | None = None,
) -> list[Shard]:
    """Spread ``num_envs`` sub-envs over ``urls`` (contiguous runs) and connect them all.

    Raises:
        EnvErrorGroup: Some sessions could not be opened (all others are closed).
        ConnectError: A server is unreachable.
    """
    k = min(len(urls), num_envs)
    runs = split_evenly(num_envs, k)
    outcomes = await asyncio.gather(
        *(
            connect_shard(url, run, protocol, timeouts, headers)
            for url, run in zip(urls, runs, strict=False)
        ),
        return_exceptions=True,
    )
    shards = [s for s in outcomes if isinstance(s, Shard)]
    failures = [e for e in outcomes if isinstance(e, BaseException)]
    if failures:
        await asyncio.gather(*(s.aclose() for s in shards), return_exceptions=True)
        raise failures[0]
    return shards
