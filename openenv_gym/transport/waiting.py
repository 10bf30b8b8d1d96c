"""Where the client blocks: waiting on sockets until they can make progress, or a deadline.

Every call of the package that talks to a server waits here, on the caller's thread:

* :func:`wait` blocks until any of several connections can make progress (bytes to read,
  or room to write for one with bytes left to write), or a deadline passes;
* :func:`wait_readable` is the one-connection case: a reply that usually comes within
  :data:`SPIN_S` is waited for by polling without sleeping first;
* :func:`readable` says, without blocking, which connections have bytes to read.

A connection is anything shaped like :class:`Waitable` (in practice
:class:`~openenv_gym.transport.wire.WebSocket`). Times: ``timeout`` arguments are seconds
from now, ``deadline`` arguments instants of :func:`time.monotonic` (:func:`deadline_after`);
None waits without limit.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import selectors
import socket
import time
from collections.abc import Iterable, Sequence, Sized
from typing import Protocol, TypeVar

from openenv_gym.config import env_str

__all__ = [
    "SPIN_S",
    "Waitable",
    "deadline_after",
    "readable",
    "remaining",
    "wait",
    "wait_one",
    "wait_readable",
]

logger = logging.getLogger("openenv_gym.transport")

_poll = getattr(select, "poll", None)
_POLLIN = getattr(select, "POLLIN", 1)
_POLLOUT = getattr(select, "POLLOUT", 4)
_SPIN_DEFAULT = 1e-3
_SPIN_MAX = 0.01
_WAIT_EWMA_GAIN = 0.25


class Waitable(Protocol):
    """What the waits need of a connection (:class:`~openenv_gym.transport.wire.WebSocket`).

    Attributes:
        wait_ewma: Moving average of its recent waits for bytes, s (kept by
            :func:`wait_readable`).
    """

    wait_ewma: float

    @property
    def sock(self) -> socket.socket:
        """Its socket."""

    @property
    def failure(self) -> BaseException | None:
        """Why it is gone, or None while it is open."""

    @property
    def messages(self) -> Sized:
        """Whole messages received and not yet taken."""

    @property
    def buffered(self) -> bool:
        """Whether bytes were received that no one has parsed yet (TLS records)."""

    @property
    def wants_write(self) -> bool:
        """Whether bytes wait to be written."""


_W = TypeVar("_W", bound=Waitable)


def deadline_after(seconds: float | None) -> float | None:
    """The ``time.monotonic()`` instant ``seconds`` from now (None: no deadline)."""
    return None if seconds is None else time.monotonic() + seconds


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (never negative; None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def wait(sockets: Sequence[Waitable], deadline: float | None) -> bool:
    """Block until one of ``sockets`` can make progress, or ``deadline`` passes.

    Progress: bytes to read (or buffered TLS bytes), or room to write for a socket with
    bytes left to write. Returns False on timeout. Closed sockets count as ready (reading
    them reports the end at once).
    """
    for ws in sockets:
        if ws.failure is not None or ws.buffered or ws.messages:
            return True
    timeout = remaining(deadline)
    if len(sockets) == 1:
        ws = sockets[0]
        if ws.wants_write:
            return wait_one(ws.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, timeout)
        return wait_readable(ws, timeout)
    with selectors.DefaultSelector() as selector:
        for ws in sockets:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if ws.wants_write else 0)
            with contextlib.suppress(ValueError, KeyError, OSError):
                selector.register(ws.sock, events)
        return bool(selector.select(timeout))


def wait_readable(ws: Waitable, timeout: float | None) -> bool:
    """Block until ``ws`` has bytes to read (True) or ``timeout`` s pass (False).

    A reply that usually comes within :data:`SPIN_S` is waited for by polling without
    sleeping, up to that long, before blocking: a loopback round trip of a small request
    is then no longer two sleeps and two cross-core wake-ups, and the work on the reply
    runs on a core that did not go idle (``benchmarks/README.md`` has the figures).
    Whether to spin follows a moving average of this connection's recent waits, so waits
    longer than the budget (a large batch, a slow env, a remote server) block at once and
    spend no CPU spinning.
    """
    start = time.perf_counter()
    spin = SPIN_S if ws.wait_ewma < SPIN_S else 0.0
    if timeout is not None:
        spin = min(spin, timeout)
    if spin > 0.0 and _spin_readable(ws.sock, start + spin):
        ready = True
    else:
        left = None if timeout is None else max(0.0, timeout - (time.perf_counter() - start))
        ready = wait_one(ws.sock, selectors.EVENT_READ, left)
    if ready:
        waited = time.perf_counter() - start
        ws.wait_ewma += (waited - ws.wait_ewma) * _WAIT_EWMA_GAIN
    return ready


def readable(sockets: Iterable[_W]) -> list[_W]:
    """The sockets that have something to read now (no blocking)."""
    return [ws for ws in sockets if ws.buffered or wait_one(ws.sock, selectors.EVENT_READ, 0)]


def _spin_budget(raw: str | None) -> float:
    """:data:`SPIN_S` from ``OPENENV_GYM_SPIN_US`` (µs, default 1000; 0 turns spinning off).

    One usable CPU: never (a spinning client would hold the core the server needs).
    """
    raw = (raw or "").strip()
    try:
        budget = float(raw) * 1e-6 if raw else _SPIN_DEFAULT
    except ValueError:
        logger.warning("OPENENV_GYM_SPIN_US=%r is not a number: using the default", raw)
        budget = _SPIN_DEFAULT
    if not math.isfinite(budget) or budget < 0.0:
        logger.warning("OPENENV_GYM_SPIN_US=%r is out of range: spinning is off", raw)
        budget = 0.0
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return min(budget, _SPIN_MAX) if cpus > 1 else 0.0


SPIN_S = _spin_budget(env_str("OPENENV_GYM_SPIN_US"))
"""How long a wait for a reply polls without sleeping first, s (``OPENENV_GYM_SPIN_US``)."""


def _spin_readable(sock: socket.socket, until: float) -> bool:
    """Poll ``sock`` without sleeping until it is readable (True) or ``until`` (False)."""
    if _poll is None:  # pragma: no cover - Windows: no poll()
        return False
    poller = _poll()
    try:
        poller.register(sock, _POLLIN)
    except (ValueError, OSError):  # closed under us: report it as ready
        return True
    clock = time.perf_counter
    while True:
        if poller.poll(0):
            return True
        if clock() >= until:
            return False


def wait_one(sock: socket.socket, events: int, timeout: float | None) -> bool:
    """Block until ``sock`` is ready for ``events`` (selectors' flags) or ``timeout`` s pass."""
    if _poll is None:  # pragma: no cover - Windows: no poll()
        writers = [sock] if events & selectors.EVENT_WRITE else []
        ready, writable, _ = select.select([sock], writers, [], timeout)
        return bool(ready or writable)
    poller = _poll()
    mask = _POLLIN | (_POLLOUT if events & selectors.EVENT_WRITE else 0)
    try:
        poller.register(sock, mask)
    except (ValueError, OSError):  # closed under us: report it as ready
        return True
    try:
        return bool(poller.poll(None if timeout is None else timeout * 1000.0))
    except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
        return True
