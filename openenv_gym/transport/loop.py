"""The one background event loop that owns every socket of the process.

Sync code calls :func:`run`; the coroutine runs on a daemon thread's loop (uvloop when
installed, unless ``OPENENV_GYM_NO_UVLOOP=1``). A forked child gets a fresh loop thread on
first use (the parent's thread does not survive ``fork``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from openenv_gym.config import env_flag
from openenv_gym.exceptions import UsageError

__all__ = ["call_soon", "get_loop", "on_loop_thread", "run"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _new_loop() -> asyncio.AbstractEventLoop:
    if not env_flag("OPENENV_GYM_NO_UVLOOP"):
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def get_loop() -> asyncio.AbstractEventLoop:
    """Return the background loop, starting its thread on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = _new_loop()
            ready = threading.Event()

            def _run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=_run, name="openenv-gym-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and block until it finishes.

    Timeouts are enforced inside the coroutines. If the caller is interrupted
    (``KeyboardInterrupt``), the coroutine is cancelled before the exception propagates.

    Raises:
        UsageError: Called from the loop thread itself (it would deadlock).
    """
    loop = get_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise UsageError("blocking openenv-gym call made from its own event-loop thread")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        if not future.done():  # interrupted: do not leave the coroutine running
            future.cancel()
            with contextlib.suppress(BaseException):
                future.result(timeout=1.0)
        raise


def on_loop_thread() -> bool:
    """True on the background loop's own thread (where blocking calls are refused)."""
    return _thread is not None and threading.current_thread() is _thread


def call_soon(factory: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Schedule ``factory()`` on the loop without waiting (safe from finalizers).

    Does nothing if the loop thread is not running (e.g. at interpreter exit).
    """
    loop, thread = _loop, _thread
    if loop is None or thread is None or not thread.is_alive() or loop.is_closed():
        return

    def _start() -> None:
        loop.create_task(factory())

    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_start)


def _after_fork_in_child() -> None:
    global _loop, _thread, _lock
    _lock = threading.Lock()
    _loop = None
    _thread = None


os.register_at_fork(after_in_child=_after_fork_in_child)
