"""Idle connections stay alive: one background thread answers and sends pings now and then.

Calls do their socket I/O on the caller's thread (:mod:`openenv_gym.transport.wire`), so
between calls nobody reads a connection. Servers ping (OpenEnv's uvicorn every 20 s, with
20 s to answer; ours too), and a training loop may leave an environment idle for minutes
while a model generates, or for much longer while it checkpoints or evaluates. This thread
wakes every :data:`INTERVAL` seconds (more often when a server's idle timeout is short)
and, for every open connection no call is using (its lock is free):

* reads what has arrived: pings are answered, a close from the server is noticed, and
  data messages stay queued on the connection for the next call to take;
* pings it, :data:`PINGS_PER_IDLE_TIMEOUT` times per idle timeout, when the server said
  that our pings count as activity (:mod:`openenv_gym.protocol.upgrade`; our servers do):
  a server closes a connection that sent nothing for its idle timeout (900 s by
  default), and every episode on it would be lost. Servers that do not say so (OpenEnv's)
  are not pinged: they do not close idle connections, or would not count the pings.

It never blocks on a connection and holds no lock for longer than one non-blocking read
or write. While this process lives, its connections live; when it is gone, so are they.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref

from openenv_gym.exceptions import OpenEnvGymError
from openenv_gym.transport.waiting import readable
from openenv_gym.transport.wire import WebSocket

__all__ = ["INTERVAL", "PING", "PINGS_PER_IDLE_TIMEOUT", "track"]

logger = logging.getLogger("openenv_gym.transport")

INTERVAL = 5.0
"""Seconds between two rounds over the idle connections (at most)."""

PINGS_PER_IDLE_TIMEOUT = 4
"""Keepalive pings sent per server idle timeout (one lost or late ping is harmless)."""

PING = b"keepalive"
"""The payload of a keepalive ping (a JSON session's own pings, its barriers, differ)."""

_SHORTEST = 0.05
"""The shortest wait between two rounds, s, however short an idle timeout."""

_lock = threading.Lock()
_sockets: weakref.WeakSet[WebSocket] = weakref.WeakSet()
_thread: threading.Thread | None = None
_wake = threading.Event()


def track(ws: WebSocket) -> None:
    """Keep ``ws`` answering pings, and pinging, while no call uses it, until it closes."""
    global _thread
    with _lock:
        _sockets.add(ws)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="openenv-gym-keepalive", daemon=True)
            _thread.start()
    if ws.idle_timeout is not None and ws.idle_timeout / PINGS_PER_IDLE_TIMEOUT < INTERVAL:
        _wake.set()  # a short idle timeout: the next round comes sooner


def _run() -> None:
    wait = INTERVAL
    while True:
        _wake.wait(wait)
        _wake.clear()
        with _lock:
            sockets = [ws for ws in _sockets if not ws.closed]
        wait = _interval(sockets)
        if not sockets:
            continue
        for ws in _idle_and_readable(sockets):
            if not ws.lock.acquire(blocking=False):
                continue  # a call is using it: that call reads it
            try:
                ws.read()
            except Exception:  # never let a bad socket stop the thread
                logger.debug("keepalive read failed on %s", ws.url, exc_info=True)
            finally:
                ws.lock.release()
        _ping_due(sockets, time.monotonic())


def _interval(sockets: list[WebSocket]) -> float:
    """Seconds until the next round: :data:`INTERVAL`, or sooner for short idle timeouts."""
    wait = INTERVAL
    for ws in sockets:
        if ws.idle_timeout is not None:
            wait = min(wait, ws.idle_timeout / PINGS_PER_IDLE_TIMEOUT)
    return max(wait, _SHORTEST)


def _ping_due(sockets: list[WebSocket], now: float) -> None:
    """Ping the idle connections whose server counts pings and has not had one lately."""
    for ws in sockets:
        timeout = ws.idle_timeout
        if timeout is None or now - ws.keepalive_at < timeout / PINGS_PER_IDLE_TIMEOUT:
            continue
        if not ws.lock.acquire(blocking=False):
            continue  # a call is using it: it is not idle
        try:
            ws.keepalive_at = now
            if not ws.closed:
                ws.queue_ping(PING)
                ws.flush()
        except OpenEnvGymError:  # gone: the next call reports it
            logger.debug("keepalive ping failed on %s", ws.url, exc_info=True)
        finally:
            ws.lock.release()


def _idle_and_readable(sockets: list[WebSocket]) -> list[WebSocket]:
    idle = [ws for ws in sockets if _free(ws)]
    try:
        return readable(idle)
    except (OSError, ValueError):  # a socket closed between the two lines: try the rest
        return [ws for ws in idle if not ws.closed]


def _after_fork_in_child() -> None:
    global _thread, _lock
    _thread = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _free(ws: WebSocket) -> bool:
    """Whether no call holds ``ws`` (a call holds it while it uses or waits on it)."""
    if not ws.lock.acquire(blocking=False):
        return False
    ws.lock.release()
    return True
