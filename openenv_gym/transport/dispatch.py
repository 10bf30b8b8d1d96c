"""The vector env's transport: one plan of requests in, one columnar outcome per request out.

:class:`Dispatcher` owns the shards (one per server). The vector env hands it a plan --
the requests of one step, at most a frame's worth of sub-envs each (:class:`Request`) --
with :meth:`Dispatcher.submit`, which writes every frame to every server at once and
returns without waiting. :meth:`Dispatcher.collect` then waits on all the sockets
together; each reply is decoded as soon as it arrives, while the servers still compute the
others, and comes back as an :class:`~openenv_gym.transport.shards.Outcome` whose rewards,
dones and observations are columns. Everything runs on the caller's thread; nothing here
touches an event loop, and the vector env never touches a socket.

After a timeout, a lost connection or an interrupt. A reply that does not come within
``timeouts.step`` fails its request (:class:`~openenv_gym.exceptions.RequestTimeoutError`
in the outcome's ``errors``) and its connection is dropped at once: a JSON session has no
request ids, so a late reply could be taken for the next request's, and a batched
connection's slots stay busy on a frozen server. Nothing is ever reused after that; the
shard says so, and is replaced whole:

1. after :meth:`Dispatcher.take`, a shard whose :attr:`Shard.broken
   <openenv_gym.transport.shards.Shard.broken>` is true can take no more requests for
   some of its sub-envs (every one of a batched shard; the sessions that failed of a JSON
   one). Requests still pending on it will complete with that failure;
2. to go on (``on_server_loss="restart"``): open a new shard for the same sub-envs,
   ``connect_shard(shard.url, shard.indices, shard.protocol, timeouts, headers)`` (a
   :class:`~openenv_gym.exceptions.ConnectError` if the server still does not answer:
   restart it, then connect again), and :meth:`Dispatcher.replace` the old one with it.
   That drops the old connections without waiting on the server (a frozen one costs
   nothing) and forgets its pending requests: never collect them. The sub-envs start
   afresh on the new sessions: their episodes are over (report them truncated);
3. not to go on (``"raise"``): keep the shard as it is; every request sent to it fails
   at once with the same kind of error. The caller decides to say "broken, close it".

A ``KeyboardInterrupt`` while :meth:`Dispatcher.collect` waits leaves every request
pending (call it again); one that lands while a connection is being read or written
breaks that shard (:data:`~openenv_gym.transport.raw.BROKEN_OFF`), as a lost connection
does. :meth:`Dispatcher.close` closes every shard within one ``timeouts.close``, however
many servers are frozen.
"""

from __future__ import annotations

import contextlib
import selectors
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from openenv_gym.exceptions import UsageError
from openenv_gym.transport.raw import BROKEN_OFF, broken_off
from openenv_gym.transport.shards import Args, Ids, Outcome, Shard, close_shards
from openenv_gym.transport.waiting import deadline_after, wait
from openenv_gym.transport.wire import WebSocket

__all__ = ["Dispatcher", "Pending", "Request", "collect_rounds", "wait_until"]


@dataclass(frozen=True, slots=True)
class Request:
    """One operation for some sub-envs of one shard (one frame on the batched protocol).

    Attributes:
        shard: Index of the shard in the dispatcher.
        op: ``"reset"``, ``"step"`` or ``"state"``.
        positions: The sub-envs' positions on the shard.
        ids: Their global indices (what the outcome is keyed by).
        args: One map per sub-env, or a map of columns; None for ``state``.
        numeric: The ndarray columns of ``args`` that stand for JSON numbers.
    """

    shard: int
    op: str
    positions: list[int]
    ids: Ids
    args: Args = None
    numeric: frozenset[str] = frozenset()


@dataclass(slots=True)
class Pending:
    """A submitted request: wait for it with :meth:`Dispatcher.collect`."""

    shard: Shard
    ticket: Any
    ids: Ids


class Dispatcher:
    """Drives the shards of one vector env (see the module docstring).

    Not for use from several threads at once, except :meth:`interrupt`.

    Args:
        shards: One per server.
    """

    def __init__(self, shards: Sequence[Shard]) -> None:
        self.shards = list(shards)
        self._selector: selectors.BaseSelector | None = None
        self._registered: dict[int, Shard] = {}
        self._writers: list[WebSocket] = []
        self._interrupted = threading.Event()

    # ------------------------------------------------------------------ submit
    def submit(self, requests: Sequence[Request]) -> list[Pending]:
        """Send every request now (all servers at once); never waits for replies.

        A request that cannot be sent (a lost connection) is already done: its outcome
        holds the error.
        """
        shards = self.shards
        # every frame for one server (a reset and a step frame, or frame_size windows)
        # leaves in one write, as soon as its last one is queued: the server wakes once
        # and reads them together, and starts while the next server's are encoded
        last = {r.shard: i for i, r in enumerate(requests)}
        for k in last:
            shards[k].hold()
        pending: list[Pending] = []
        i = 0
        try:
            for i, r in enumerate(requests):
                shard = shards[r.shard]
                pending.append(
                    Pending(shard, shard.send(r.op, r.positions, r.ids, r.args, r.numeric), r.ids)
                )
                if last[r.shard] == i:
                    shard.release()
        except BaseException as exc:
            if broken_off(exc):  # what was sent can never be collected: drop those shards
                for k in {r.shard for r in requests[: i + 1]}:
                    shards[k].abort(BROKEN_OFF)
            raise
        finally:
            for k in last:
                shards[k].release()  # after a failure: release is a no-op once released
        return pending

    # ------------------------------------------------------------------ collect
    def collect(
        self, pending: Sequence[Pending], want: int | None = None, timeout: float | None = None
    ) -> list[Pending]:
        """Wait until requests covering at least ``want`` sub-envs are done (default: all).

        Returns the done requests of ``pending``, in completion order (take each outcome
        with :meth:`take`); fewer than ``want`` sub-envs' worth when ``timeout`` passed
        first (the others stay pending). Replies are decoded as they arrive.

        Raises:
            UsageError: :meth:`interrupt` was called meanwhile.
        """
        if want is None:
            want = sum(len(p.ids) for p in pending)
        shards = list({id(p.shard): p.shard for p in pending}.values())
        deadline = deadline_after(timeout)
        if len(shards) == 1 and len(sockets := shards[0].sockets) == 1:
            # one socket (one server, one frame: the usual case): no stack of locks
            with sockets[0].lock:
                return self._collect(pending, want, deadline, shards)
        with contextlib.ExitStack() as held:
            # while this call waits on them, the keepalive thread keeps off the sockets
            for shard in shards:
                for ws in shard.sockets:
                    held.enter_context(ws.lock)
            return self._collect(pending, want, deadline, shards)

    def _collect(
        self, pending: Sequence[Pending], want: int, deadline: float | None, shards: list[Shard]
    ) -> list[Pending]:
        rounds = collect_rounds(pending, want, deadline, shards, self._check_interrupt)
        try:
            waiting = next(rounds)
            while True:
                waiting = rounds.send(self._wait(waiting, deadline))
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]

    def _wait(self, waiting: Sequence[Pending], deadline: float | None) -> list[WebSocket]:
        """Block until a socket of ``waiting`` is ready, the earliest timeout, or ``deadline``."""
        until = wait_until(waiting, deadline)
        shards = list({id(p.shard): p.shard for p in waiting}.values())
        if len(shards) == 1 and len(shards[0].sockets) == 1:
            sockets = shards[0].sockets
            return sockets if wait(sockets, until) else []
        return self._select(shards, until)

    def _select(self, shards: list[Shard], until: float | None) -> list[WebSocket]:
        """Wait on every socket of ``shards`` at once (epoll: registered once per shard)."""
        selector = self._selector
        if selector is None:
            selector = self._selector = selectors.DefaultSelector()
        for shard in shards:
            if id(shard) not in self._registered:
                self._registered[id(shard)] = shard
                for ws in shard.sockets:
                    self._watch(selector, ws, selectors.EVENT_READ)
        for ws in self._writers:  # sockets that had bytes left to write last time
            if not ws.wants_write:
                self._watch(selector, ws, selectors.EVENT_READ)
        self._writers = [ws for shard in shards for ws in shard.sockets if ws.wants_write]
        for ws in self._writers:
            self._watch(selector, ws, selectors.EVENT_READ | selectors.EVENT_WRITE)
        timeout = None if until is None else max(0.0, until - time.monotonic())
        ready = [key.data for key, _ in selector.select(timeout)]
        return [ws for ws in ready if ws is not None]

    @staticmethod
    def _watch(selector: selectors.BaseSelector, ws: WebSocket, events: int) -> None:
        fd = ws.fileno()
        if fd < 0:  # closed: nothing to watch (reading it reports the end)
            return
        try:
            key = selector.get_key(fd)
        except KeyError:
            selector.register(fd, events, ws)
            return
        if key.data is not ws:  # a new socket got a closed one's descriptor
            selector.unregister(fd)
            selector.register(fd, events, ws)
        elif key.events != events:
            selector.modify(fd, events, ws)

    # ------------------------------------------------------------------ results
    @staticmethod
    def take(pending: Pending) -> Outcome:
        """The outcome of a request :meth:`collect` returned."""
        return pending.shard.take(pending.ticket)

    def run(self, requests: Sequence[Request]) -> list[Outcome]:
        """Submit, collect all and take: the outcomes, in request order."""
        pending = self.submit(requests)
        self.collect(pending)
        return [self.take(p) for p in pending]

    # ------------------------------------------------------------------ ending
    def _check_interrupt(self) -> None:
        if self._interrupted.is_set():
            raise UsageError("the environment was closed while the call was waiting")

    def replace(self, index: int, shard: Shard) -> None:
        """Put ``shard`` in the place of shard ``index``, dropping the old one at once.

        The old one's connections are aborted, not closed politely: it is replaced
        because it broke (:attr:`Shard.broken`), and its server may be frozen. Requests
        still pending on it are abandoned: never collect them.
        """
        old, self.shards[index] = self.shards[index], shard
        self._registered.pop(id(old), None)
        gone = {id(ws) for ws in old.sockets}
        self._writers = [ws for ws in self._writers if id(ws) not in gone]
        selector = self._selector
        if selector is not None:
            for ws in old.sockets:
                fd = ws.fileno()
                with contextlib.suppress(KeyError, ValueError, OSError):
                    if fd >= 0 and selector.get_key(fd).data is ws:
                        selector.unregister(fd)
        with contextlib.suppress(Exception):
            old.abort("closed by the client (replaced by a new connection)")

    def interrupt(self) -> None:
        """From another thread: make a :meth:`collect` in progress raise at once."""
        self._interrupted.set()
        for shard in self.shards:
            shard.interrupt()

    def close(self) -> None:
        """Close every shard politely, side by side, within one close timeout.

        A frozen server costs that timeout once, not once per socket. Never raises.
        """
        shards, self.shards = self.shards, []
        close_shards(shards)
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        self._registered.clear()


def wait_until(waiting: Sequence[Pending], deadline: float | None) -> float | None:
    """The earliest of the requests' own timeouts and ``deadline`` (None: no limit)."""
    limits = [d for p in waiting if (d := p.shard.deadline(p.ticket)) is not None]
    if deadline is not None:
        limits.append(deadline)
    return min(limits) if limits else None


def collect_rounds(
    pending: Sequence[Pending],
    want: int,
    deadline: float | None,
    shards: list[Shard],
    check: Callable[[], None],
) -> Generator[list[Pending], Sequence[WebSocket], list[Pending]]:
    """The rounds of a collect, without waiting: each driver waits its own way.

    Yields the requests still waiting whenever it needs sockets to read; the driver sends
    back the sockets that became ready by :func:`wait_until` (none: that time passed).
    Returns the done requests, in completion order, once they cover ``want`` sub-envs, all
    are done, or ``deadline`` passed. ``check`` runs at the start of every round (it raises
    to end the call: an interrupt, a closed env). :meth:`Dispatcher.collect` drives it on
    the caller's thread, ``openenv_gym.aio`` on the event loop.
    """
    waiting = list(pending)
    done: list[Pending] = []
    count = 0
    started = time.monotonic()
    late = any((d := p.shard.deadline(p.ticket)) is not None and d <= started for p in waiting)
    # first round: what already came in; everything when the caller comes back after a
    # deadline (step_async, a long pause, step_wait: replies sent in time still count)
    ready: Sequence[WebSocket] | None = (
        None
        if late
        else [
            ws for shard in shards for ws in shard.sockets if ws.messages or ws.failure is not None
        ]
    )
    while True:
        check()
        # shards whose requests are all done are polled too: harmless (replies wait)
        for shard in shards:
            shard.poll(ready)
        now = time.monotonic()
        for shard in shards:
            shard.expire(now)  # after reading: what came by now counts
        still = []
        for p in waiting:
            if p.shard.done(p.ticket):
                done.append(p)
                count += len(p.ids)
            else:
                still.append(p)
        waiting = still
        if count >= want or not waiting:
            return done
        ready = yield waiting
        if not ready:
            now = time.monotonic()
            for shard in shards:
                shard.expire(now)
            if deadline is not None and now >= deadline:
                return done
