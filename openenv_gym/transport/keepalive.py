"""Idle connections keep answering pings: one background thread reads them now and then.

Calls do their socket I/O on the caller's thread (:mod:`openenv_gym.transport.wire`), so
between calls nobody reads a connection. Servers ping (OpenEnv's uvicorn every 20 s, with
20 s to answer; ours too), and a training loop may leave an environment idle for minutes
while a model generates. This thread wakes every :data:`INTERVAL` seconds and, for every
open connection no call is using (its lock is free), reads what has arrived: pings are
answered, a close from the server is noticed, and data messages stay queued on the
connection for the next call to take. It never blocks on a connection and holds no lock
for longer than one non-blocking read.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref

from openenv_gym.transport.waiting import readable
from openenv_gym.transport.wire import WebSocket

__all__ = ["INTERVAL", "track"]

logger = logging.getLogger("openenv_gym.transport")

INTERVAL = 5.0
"""Seconds between two rounds over the idle connections."""

_lock = threading.Lock()
_sockets: weakref.WeakSet[WebSocket] = weakref.WeakSet()
_thread: threading.Thread | None = None
_wake = threading.Event()


def track(ws: WebSocket) -> None:
    """Keep ``ws`` answering pings while no call uses it, until it closes or is collected."""
    global _thread
    with _lock:
        _sockets.add(ws)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="openenv-gym-keepalive", daemon=True)
            _thread.start()


def _run() -> None:
    while True:
        _wake.wait(INTERVAL)
        _wake.clear()
        with _lock:
            sockets = [ws for ws in _sockets if not ws.closed]
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
