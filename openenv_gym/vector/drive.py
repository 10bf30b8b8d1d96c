"""What an engine operation waits for, and the driver that runs it on the caller's thread.

An operation of the engine (:mod:`openenv_gym.vector.engine`) is a generator that yields
what it waits for and is sent the result back:

* :class:`Collect` -- requests that were sent, until enough are answered;
* :class:`Blocking` -- a blocking call (restart a server, reconnect);
* :class:`One` -- one request of a single env (its lean path: one frame out, one in).

:func:`run` drives one on the caller's thread, each wait blocking there (the sync envs);
:mod:`openenv_gym.aio.driver` drives the same operations on an event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from openenv_gym.exceptions import UsageError
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.transport.dispatch import Dispatcher, Pending

__all__ = ["Blocking", "Collect", "Driven", "One", "OneStep", "Op", "run"]

T = TypeVar("T")


@dataclass(slots=True)
class Collect:
    """Wait until requests covering ``want`` sub-envs are answered (None: all).

    The result is the done ones (:meth:`Dispatcher.collect
    <openenv_gym.transport.dispatch.Dispatcher.collect>`); fewer after ``timeout``.
    """

    pending: list[Pending]
    want: int | None = None
    timeout: float | None = None


@dataclass(slots=True)
class Blocking:
    """Run ``fn()``, which blocks (a server restart, a reconnection); its result.

    ``abandon``: what to do with the result if the call waiting for it is gone (cancelled).
    """

    fn: Callable[[], Any]
    abandon: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class One:
    """A single env's request: ``op`` (reset, step, state) with ``arg``; its reply."""

    op: str
    arg: Any = None


Op = Generator[Collect | Blocking | One, Any, T]
"""An engine operation: yields what it waits for, returns its result."""

OneStep = tuple[ObservationReceived, float, bool, bool, bool]
"""A single env's step: its reply (the last one, if the server was lost), the reward,
terminated, truncated, and whether the server was lost."""


class Driven(Protocol):
    """What :func:`run` needs of an :class:`~openenv_gym.vector.engine.Engine`."""

    lock: threading.RLock
    dispatcher: Dispatcher

    def call_session(self, one: One) -> Any:
        """A single env's request, on its session (blocking)."""

    def closed_meanwhile(self, exc: UsageError) -> UsageError:
        """``exc``, or the env-closed error if :meth:`close` interrupted the wait."""


def run(engine: Driven, op: Op[T]) -> T:
    """Drive ``op`` on the caller's thread: each wait blocks here."""
    result: Any = None
    error: BaseException | None = None
    with engine.lock:
        while True:
            try:
                need = op.send(result) if error is None else op.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            result = error = None
            try:
                if type(need) is One:
                    result = engine.call_session(need)
                elif type(need) is Collect:
                    result = engine.dispatcher.collect(need.pending, need.want, need.timeout)
                else:
                    assert type(need) is Blocking
                    result = need.fn()
            except UsageError as exc:
                error = engine.closed_meanwhile(exc)
            except BaseException as exc:  # handed to the operation
                error = exc
