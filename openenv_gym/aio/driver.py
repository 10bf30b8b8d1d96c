"""The asyncio driver of the engine: its waits as awaits, on the caller's running loop.

The engine's operations (:mod:`openenv_gym.vector.engine`) yield what they wait for;
:func:`drive` awaits it: requests until enough are answered (:func:`collect`, which reads
the same non-blocking sockets the sync driver reads, woken by the loop's readers rather
than by ``poll``), a blocking call in a worker thread (a server restart), or a single
env's request. Nothing else differs from the sync envs: the same transport, protocol,
bookkeeping and errors. Any loop that implements ``add_reader`` runs it (asyncio's
selector loop, uvloop).

A cancelled call leaves its requests on the wire, as an interrupted sync call does: the
engine takes their replies at its next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from openenv_gym.exceptions import UsageError
from openenv_gym.transport.dispatch import Pending, collect_rounds, wait_until
from openenv_gym.transport.waiting import deadline_after
from openenv_gym.transport.wire import WebSocket
from openenv_gym.vector.drive import Blocking, Collect, One, Op
from openenv_gym.vector.engine import Engine
from openenv_gym.vector.state import CallState

__all__ = ["collect", "drive"]

T = TypeVar("T")


async def drive(engine: Engine, op: Op[T]) -> T:
    """Run ``op`` on the running loop: each wait is an await."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            need = op.send(result) if error is None else op.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        result = error = None
        try:
            if type(need) is Collect:
                result = await collect(engine, need.pending, need.want, need.timeout)
            elif type(need) is One:
                result = await drive(engine, engine.one_exchange(need))
            else:
                assert type(need) is Blocking
                result = await _in_thread(need)
        except UsageError as exc:
            error = engine.closed_meanwhile(exc)
        except BaseException as exc:  # handed to the operation (CancelledError too)
            error = exc


async def _in_thread(blocking: Blocking) -> Any:
    """``blocking.fn()`` in a worker thread.

    If the caller is cancelled, the result is handed to ``blocking.abandon`` once it
    comes (a connection nobody will use is closed).
    """
    future = asyncio.ensure_future(asyncio.to_thread(blocking.fn))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        abandon = blocking.abandon
        if abandon is not None:
            future.add_done_callback(lambda f: f.exception() is None and abandon(f.result()))
        raise


async def collect(
    engine: Engine, pending: Sequence[Pending], want: int | None, seconds: float | None
) -> list[Pending]:
    """Wait until requests covering at least ``want`` sub-envs are done (default: all).

    As :meth:`Dispatcher.collect <openenv_gym.transport.dispatch.Dispatcher.collect>`:
    the done requests, in completion order; fewer when ``seconds`` passed first. Replies
    are decoded as they arrive; overdue requests fail their connection.

    Raises:
        UsageError: The env was closed meanwhile.
    """
    if want is None:
        want = sum(len(p.ids) for p in pending)
    shards = list({id(p.shard): p.shard for p in pending}.values())
    sockets = [ws for shard in shards for ws in shard.sockets]
    deadline = deadline_after(seconds)
    with _held(sockets), _Readers(sockets) as readers:
        rounds = collect_rounds(pending, want, deadline, shards, lambda: _check_open(engine))
        try:
            waiting = next(rounds)
            while True:
                waiting = rounds.send(await readers.wait(wait_until(waiting, deadline)))
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]


def _check_open(engine: Engine) -> None:
    if engine.state is CallState.CLOSED:
        raise UsageError("the environment was closed while the call was waiting")


@contextlib.contextmanager
def _held(sockets: Sequence[WebSocket]) -> Iterator[None]:
    """Hold the sockets' locks: the keepalive thread keeps off them while the call waits."""
    with contextlib.ExitStack() as stack:
        for ws in sockets:
            stack.enter_context(ws.lock)
        yield


class _Readers:
    """The loop watches ``sockets`` for the whole of one collect (registered once)."""

    def __init__(self, sockets: Sequence[WebSocket]) -> None:
        self.sockets = sockets
        self.loop = asyncio.get_running_loop()
        self.ready: list[WebSocket] = []
        self.event = asyncio.Event()
        self.readers: list[int] = []
        self.writers: set[int] = set()

    def __enter__(self) -> _Readers:
        for ws in self.sockets:
            fd = ws.fileno()
            if fd >= 0:
                self.loop.add_reader(fd, self._wake, ws)
                self.readers.append(fd)
        return self

    def __exit__(self, *exc_info: object) -> None:
        loop = self.loop
        for fd in self.readers:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(fd)
        for fd in self.writers:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_writer(fd)

    def _wake(self, ws: WebSocket) -> None:
        self.ready.append(ws)
        self.event.set()

    def _watch_writes(self) -> None:
        """Writability too, for sockets with bytes left to write (a full send buffer)."""
        for ws in self.sockets:
            fd = ws.fileno()
            if fd < 0:
                continue
            if ws.wants_write and fd not in self.writers:
                self.loop.add_writer(fd, self._wake, ws)
                self.writers.add(fd)
            elif not ws.wants_write and fd in self.writers:
                self.loop.remove_writer(fd)
                self.writers.discard(fd)

    async def wait(self, until: float | None) -> list[WebSocket]:
        """The sockets that became ready (empty: ``until`` passed first)."""
        now_ready = [
            ws
            for ws in self.sockets
            if ws.failure is not None or ws.buffered or ws.messages or ws.fileno() < 0
        ]
        if now_ready:
            return now_ready
        self._watch_writes()
        if not self.ready:
            self.event.clear()
            timeout = None if until is None else max(0.0, until - time.monotonic())
            try:
                async with asyncio.timeout(timeout):
                    await self.event.wait()
            except TimeoutError:
                return []
        ready, self.ready = self.ready, []
        return list({id(ws): ws for ws in ready}.values())
