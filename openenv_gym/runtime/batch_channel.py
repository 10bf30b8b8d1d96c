"""One ``/batch`` connection on the server: many environment instances (slots), one protocol end.

The batched protocol's server end (:class:`~openenv_gym.protocol.batch.BatchServer`) over one
WebSocket, and the slots it holds open (``docs/protocol.md`` section 3). Small requests are
answered where they arrive; larger ones, and requests whose environment calls are
coroutines, are answered by one task per connection, :data:`CHUNK` slots at a time, so one
large request never stalls other connections for more than a chunk's work.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.runtime.calls import (
    Capacity,
    EnvCalls,
    EpisodeOutcome,
    FactoryFailed,
    no_such_slot,
    state_result,
)
from openenv_gym.runtime.environment import ObservationBatch
from openenv_gym.runtime.errors import describe, execution_error, validation_error
from openenv_gym.runtime.interfaces import Socket
from openenv_gym.runtime.mcp import close_env
from openenv_gym.runtime.settings import SERVER_NAME, ServerConfig

__all__ = ["CHUNK", "BatchChannel"]

logger = logging.getLogger("openenv_gym.runtime")

CHUNK = 64
"""Slots of one request stepped before other connections get a turn (if 2 ms passed)."""
_TURN = 0.002


class BatchChannel:
    """One ``/batch`` connection: many instances (slots), requests answered in order.

    A request of at most :data:`CHUNK` slots is answered where it arrives; a larger one,
    or any request while others wait, is queued and answered by one task per connection,
    :data:`CHUNK` slots at a time, giving other connections a turn in between. Requests wait
    while the peer does not read (the send buffer is full); reading pauses while more than
    ``max_queue_bytes`` of requests wait.

    Args:
        calls: The environment class.
        capacity: The instances shared over every endpoint.
        config: The server's settings (sizes, slots per request and per connection).
        socket: The WebSocket.
        version: The protocol version of the connection (its subprotocol's).
    """

    def __init__(
        self,
        calls: EnvCalls,
        capacity: Capacity,
        config: ServerConfig,
        socket: Socket,
        version: int,
    ) -> None:
        self.calls = calls
        self.capacity = capacity
        self.config = config
        self.socket = socket
        self.conn = bp.BatchServer(
            max_frame=config.max_frame,
            version=version,
            max_slots=config.max_request_slots,
            max_values=config.max_values,
        )
        self.slots: dict[int, Any] = {}
        self._queue: collections.deque[tuple[Any, int]] = collections.deque()
        self._queued_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_turn = time.monotonic()

    def on_invalid_text(self, data: bytes) -> None:
        """A text frame that is not UTF-8: refused as any text frame (``INVALID_FRAME``)."""
        self.on_message(data.decode(errors="replace"))

    def on_message_head(self, head: bytes, size: int) -> bool:
        """A large frame's first bytes: True if it names too many slots (refused, 3.8).

        The connection then drops the rest of the frame unread (never buffered).
        """
        if not self.conn.receive_head(head, size):
            return False
        self._flush()
        return True

    def on_message(self, message: bytes | str) -> None:
        """Parse a frame; answer its request now if it is small and nothing waits."""
        conn = self.conn
        conn.receive_data(message)
        events = conn.events_received()
        size = len(message)
        if not events:  # answered by the protocol itself (an error frame)
            self._flush()
            return
        if (
            self._task is None
            and not self._queue
            and self.socket.writable
            and all(_inline(event, self.calls) for event in events)
        ):
            for event in events:
                try:
                    self._answer_now(event)
                except Exception as exc:
                    self._fail(event, exc)
            self._flush()
            return
        for event in events:
            self._queue.append((event, size))
            self._queued_bytes += size
            size = 0
        if self._queued_bytes > self.config.max_queue_bytes:
            self.socket.pause_reading()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _flush(self) -> None:
        for out in self.conn.data_to_send():
            self.socket.send(out)

    async def _run(self) -> None:
        try:
            while self._queue and not self._closed:
                if not self.socket.writable:
                    await self.socket.wait_writable()
                    continue
                event, size = self._queue.popleft()
                self._queued_bytes -= size
                if self._queued_bytes <= self.config.max_queue_bytes // 2:
                    self.socket.resume_reading()
                try:
                    await self._answer_in_turns(event)
                except Exception as exc:
                    self._fail(event, exc)
                self._flush()
                await self._turn()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("answering a batched request failed")
            self.socket.close(1011, "internal error")
        finally:
            self._task = None

    async def _turn(self) -> None:
        """Let other connections run if this one has had the loop for a while."""
        now = time.monotonic()
        if now - self._last_turn >= _TURN:
            await asyncio.sleep(0)
            self._last_turn = time.monotonic()

    def _fail(self, event: Any, exc: Exception) -> None:
        """Last resort: a request that could not be answered fails in every slot, alone."""
        logger.error("answering a batched request failed", exc_info=exc)
        failed = bp.SlotError(
            op.ErrorCode.EXECUTION_ERROR.value, "internal error: " + describe(exc)
        )
        try:
            self.conn.send_results(event, [failed] * len(event.slots))
        except Exception:  # not pending any more, or hello: nothing sane to answer
            logger.exception("the request cannot be answered: closing the connection")
            self.socket.close(1011, "internal error")

    def _answer_now(self, event: Any) -> None:
        conn, calls = self.conn, self.calls
        if isinstance(event, bp.HelloRequestReceived):
            conn.send_hello(server=SERVER_NAME, env=calls.name, max_slots=self.capacity.limit)
        elif event.op in (bp.Op.STEP, bp.Op.RESET):
            outcome = calls.run_episode_op(event, self.slots)
            assert isinstance(outcome, tuple), "an awaited op is never answered inline"
            calls.answer_table(conn, event, outcome)
        else:
            calls.answer_results(conn, event, self._run_batch(event))

    async def _answer_in_turns(self, event: Any) -> None:
        calls = self.calls
        if _inline(event, calls):
            self._answer_now(event)
            return
        if event.op in (bp.Op.STEP, bp.Op.RESET):
            parts = []
            for part in _chunks(event):
                outcome = calls.run_episode_op(part, self.slots)
                parts.append(outcome if isinstance(outcome, tuple) else await outcome)
                await self._turn()
            calls.answer_table(self.conn, event, _merge_parts(parts))
            return
        if event.op is bp.Op.OPEN and calls.builds_in_thread:
            opened = await self._open_slots_off_loop(event.slots)
            if not self._closed:
                calls.answer_results(self.conn, event, opened)
            return
        results: list[Any] = []
        for part in _chunks(event):
            results += self._run_batch(part)
            await self._turn()
        calls.answer_results(self.conn, event, results)

    # ------------------------------------------------------------------ slots
    def _run_batch(
        self, request: bp.BatchRequestReceived
    ) -> list[bp.SlotResult | bp.SlotError | None]:
        """``open`` / ``state`` / ``close`` for every slot of a request."""
        op_, slots = request.op, self.slots
        if op_ is bp.Op.OPEN:
            return self._open_slots(request.slots)
        guarded = self._guarded
        if op_ is bp.Op.STATE:
            return [guarded(slots, slot, state_result, None) for slot in request.slots]
        return [guarded(slots, slot, self._close_slot, (slots, slot)) for slot in request.slots]

    def _close_slot(self, env: Any, where: tuple[dict[int, Any], int]) -> None:
        slots, slot = where
        del slots[slot]
        self.capacity.release()
        close_env(env)

    @staticmethod
    def _guarded(
        slots: dict[int, Any],
        slot: int,
        call: Callable[[Any, Any], bp.SlotResult | None],
        arg: Any,
    ) -> bp.SlotResult | bp.SlotError | None:
        """Run ``call(env, arg)`` for one slot; any failure becomes that slot's error."""
        env = slots.get(slot)
        if env is None:
            return no_such_slot(slot)
        try:
            return call(env, arg)
        except ValidationError as exc:  # e.g. a state model refusing what reset stored
            return validation_error(exc)
        except Exception as exc:
            return execution_error(exc)

    def _open_slots(self, wanted: tuple[int, ...]) -> list[bp.SlotResult | bp.SlotError | None]:
        """``open``, its instances built here, on the loop (a class built on the loop)."""
        results, todo = self._reserve(wanted)
        return self._place(results, todo, self.calls.create_many(len(todo)))

    async def _open_slots_off_loop(
        self, wanted: tuple[int, ...]
    ) -> list[bp.SlotResult | bp.SlotError | None]:
        """``open``, its instances built off the loop (:meth:`EnvCalls.build`)."""
        results, todo = self._reserve(wanted)
        built = await self.calls.build(len(todo), self.capacity.release) if todo else []
        return self._place(results, todo, built)

    def _reserve(
        self, wanted: tuple[int, ...]
    ) -> tuple[list[bp.SlotResult | bp.SlotError | None], list[tuple[int, int]]]:
        """Who may open: per slot, its refusal or None, and the slots to build.

        A refusal: the slot is in use, or the connection or the server is at capacity. The
        slots to build come as (position, slot), a slot of capacity held for each.
        """
        slots, capacity = self.slots, self.capacity
        limit = self.config.max_connection_slots
        results: list[bp.SlotResult | bp.SlotError | None] = []
        todo: list[tuple[int, int]] = []
        for slot in wanted:
            if slot in slots:
                results.append(
                    bp.SlotError(bp.SlotErrorCode.SLOT_IN_USE.value, f"slot {slot} is already open")
                )
                continue
            opened = len(slots) + len(todo)
            if opened >= limit:
                results.append(
                    bp.SlotError(
                        op.ErrorCode.CAPACITY_REACHED.value,
                        f"Connection at capacity: {opened}/{limit} slots open.",
                        {"open_slots": opened, "max_connection_slots": limit},
                    )
                )
                continue
            if not capacity.acquire():
                results.append(
                    bp.SlotError(
                        op.ErrorCode.CAPACITY_REACHED.value,
                        capacity.refusal(),
                        {"active_sessions": capacity.active, "max_sessions": capacity.limit},
                    )
                )
                continue
            todo.append((len(results), slot))
            results.append(None)
        return results, todo

    def _place(
        self,
        results: list[bp.SlotResult | bp.SlotError | None],
        todo: list[tuple[int, int]],
        built: list[Any],
    ) -> list[bp.SlotResult | bp.SlotError | None]:
        """Open the built instances in their slots; a failed one frees its capacity."""
        slots = self.slots
        for (k, slot), env in zip(todo, built, strict=True):
            if isinstance(env, FactoryFailed):
                self.capacity.release()
                results[k] = bp.SlotError(
                    op.ErrorCode.FACTORY_ERROR.value, str(env), {"factory_name": env.factory}
                )
            else:
                slots[slot] = env
        return results

    def on_close(self) -> None:
        """The connection is gone: stop its work, close its instances, free capacity."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        slots, self.slots = self.slots, {}
        for env in slots.values():
            close_env(env)
        self.capacity.release(len(slots))


def _inline(event: Any, calls: EnvCalls) -> bool:
    """Whether a request is answered as it arrives: small, and no coroutine to await."""
    if isinstance(event, bp.HelloRequestReceived):
        return True
    return len(event.slots) <= CHUNK and not calls.awaits_op(event.op)


def _chunks(event: bp.BatchRequestReceived) -> list[bp.BatchRequestReceived]:
    """The request split into parts of at most :data:`CHUNK` slots (for the env work only)."""
    slots, args = event.slots, event.args
    return [
        replace(event, slots=slots[k : k + CHUNK], args=args[k : k + CHUNK] if args else ())
        for k in range(0, len(slots), CHUNK)
    ]


def _merge_parts(parts: list[EpisodeOutcome]) -> EpisodeOutcome:
    """One request's outcome from its chunks' (see :meth:`EnvCalls.run_episode_op`)."""
    results: list[Any] = []
    covered: list[int] = []
    batches: list[ObservationBatch] = []
    for part_results, batch, ready in parts:
        offset = len(results)
        if batch is not None:
            batches.append(batch)
            covered += [offset + k for k in ready]
        results += part_results
    if not batches:
        return results, None, []
    if len(batches) != sum(1 for _, b, r in parts if r):  # a hook that answered both ways
        failed = execution_error(RuntimeError("the batched hook answered in two forms"))
        return [failed if r is None else r for r in results], None, []
    return results, _merge_batches(batches), covered


def _merge_batches(batches: list[ObservationBatch]) -> ObservationBatch:
    if len(batches) == 1:
        return batches[0]
    fields = {key: [v for b in batches for v in b.fields[key]] for key in batches[0].fields}
    errors: dict[int, BaseException] = {}
    offset = 0
    for batch in batches:
        errors.update({offset + j: e for j, e in batch.errors.items()})
        offset += len(batch.dones)
    metadata: Any = None
    metas = [b.metadata for b in batches]
    if all(isinstance(m, dict) for m in metas) and len({tuple(m) for m in metas}) == 1:  # type: ignore[arg-type]
        metadata = {key: [v for m in metas for v in m[key]] for key in metas[0]}  # type: ignore[index,union-attr]
    elif any(m is not None for m in metas):
        metadata = []
        for batch in batches:
            meta = batch.metadata
            count = len(batch.dones)
            if meta is None:
                metadata += [None] * count
            elif isinstance(meta, dict):
                keys = list(meta)
                metadata += (
                    [dict(zip(keys, row, strict=True)) for row in zip(*meta.values(), strict=True)]
                    if keys
                    else [None] * count
                )
            else:
                metadata += list(meta)
    return ObservationBatch(
        fields,
        rewards=[r for b in batches for r in b.rewards],
        dones=[d for b in batches for d in b.dones],
        metadata=metadata,
        errors=errors,
    )
