"""Environment instances that live in worker processes: the class the runtime hosts.

For an environment class not marked ``SUPPORTS_CONCURRENT_SESSIONS``
(:mod:`openenv_gym.runtime.serving`), :func:`worker_environment` makes the class the
runtime hosts in its place. Its instances are handles: each leases a worker
(:class:`~openenv_gym.runtime.workers.WorkerPool`), which makes the real instance there,
and its ``reset_async`` / ``step_async`` send the call to that worker and await the
answer. The runtime awaits a request's slots side by side, so N workers compute at once
while the event loop serves other connections, and one batched frame still carries every
slot.

* ``state`` comes back with every reply, so reading it never waits on a worker.
* A worker that dies fails its instance's calls with
  :class:`~openenv_gym.runtime.workers.WorkerError` (``EXECUTION_ERROR`` for that slot
  only); the instance's next ``reset`` starts over in a new worker.
* An MCP environment's tools (``/mcp``) are called in its worker too.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

from openenv_gym.runtime.workers import Probe, Worker, WorkerError, WorkerPool

__all__ = ["worker_environment"]

logger = logging.getLogger("openenv_gym.runtime")


class _WorkerEnvironment:
    """One instance of the hosted environment, alive in a worker process (a handle).

    Made per session by the runtime (``env_factory()``): it leases a worker at once (when
    a loop runs) and has the real instance made there; ``reset_async`` / ``step_async``
    go to that worker. The class attributes are set per hosted environment by
    :func:`worker_environment`.
    """

    pool: ClassVar[WorkerPool]
    probe: ClassVar[Probe]
    initial_state: ClassVar[Any] = None

    def __init__(self) -> None:
        self._worker: Worker | None = None
        self._state: Any = type(self).initial_state
        self._starting: asyncio.Task[Worker] | None = None
        self._closed = False
        self._mcp_held = False
        with contextlib.suppress(RuntimeError):  # no running loop: at start-up, lazily
            self._starting = asyncio.get_running_loop().create_task(self._start())

    async def _start(self) -> Worker:
        pool = type(self).pool
        worker = await pool.lease()
        try:
            self._state = await worker.call(("create",))
        except asyncio.CancelledError:
            pool.retire(worker)
            raise
        except BaseException:
            pool.retire(worker)  # a worker whose factory failed is still a good worker
            raise
        if self._closed:
            pool.retire(worker)
            raise WorkerError("the environment was closed")
        self._worker = worker
        return worker

    async def _ready(self, *, renew: bool) -> Worker:
        """The worker of this instance; with ``renew``, a new one if it failed or died."""
        if self._closed:
            raise WorkerError("the environment is closed")
        worker = self._worker
        if worker is not None and worker.gone is None:  # started, alive: the hot path
            return worker
        starting = self._starting
        if starting is None or (renew and starting.done() and _failed(starting)):
            starting = self._starting = asyncio.get_running_loop().create_task(self._start())
        return await asyncio.shield(starting)

    async def _call(self, request: tuple[Any, ...], *, renew: bool = False) -> Any:
        worker = await self._ready(renew=renew)
        return await worker.call(request)

    async def reset_async(self, **kwargs: Any) -> Any:
        """``reset`` in the worker (a new worker if the last one died)."""
        observation, self._state = await self._call(("reset", kwargs), renew=True)
        return observation

    async def step_async(self, action: Any, **kwargs: Any) -> Any:
        """``step`` in the worker."""
        observation, self._state = await self._call(("step", action, kwargs))
        return observation

    def reset(self, **kwargs: Any) -> Any:
        """Not callable here: the runtime calls :meth:`reset_async`."""
        raise WorkerError("this environment lives in a worker process: call reset_async")

    def step(self, action: Any, **kwargs: Any) -> Any:
        """Not callable here: the runtime calls :meth:`step_async`."""
        raise WorkerError("this environment lives in a worker process: call step_async")

    @property
    def state(self) -> Any:
        """The state after the last call (as the worker read it)."""
        state = self._state
        if isinstance(state, BaseException):
            raise state
        if state is None:
            raise WorkerError("the environment has not started yet: reset it first")
        return state

    def get_metadata(self) -> Any:
        """What the instance made at start-up said (OpenEnv's ``EnvironmentMetadata``)."""
        return type(self).probe.metadata

    def close(self) -> None:
        """Close the real instance; its worker goes back to the pool."""
        if self._closed:
            return
        self._closed = True
        worker, self._worker = self._worker, None
        starting, self._starting = self._starting, None
        if worker is not None:
            type(self).pool.retire(worker)
        elif starting is not None and not starting.done():
            starting.cancel()  # _start retires the worker it leased

    # ------------------------------------------------------------------ MCP
    @property
    def mcp_client(self) -> _Tools | None:
        """The MCP tools of the real instance (None when it has none)."""
        return _Tools(self) if type(self).probe.mcp else None

    @contextlib.asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[None]:
        """Hold the real instance's MCP session open (OpenEnv's ``mcp_session``)."""
        await self._call(("mcp_enter",))
        self._mcp_held = True
        try:
            yield
        finally:
            self._mcp_held = False
            if self._worker is not None and self._worker.gone is None:
                with contextlib.suppress(Exception):
                    await self._call(("mcp_exit",))


def _failed(starting: asyncio.Task[Worker]) -> bool:
    """Whether a finished start failed, or its worker died since."""
    if starting.cancelled() or starting.exception() is not None:
        return True
    return starting.result().gone is not None


class _Tools:
    """The MCP client of a worker's instance, as the runtime's ``/mcp`` uses it."""

    def __init__(self, env: _WorkerEnvironment) -> None:
        self._env = env

    def is_connected(self) -> bool:
        return self._env._mcp_held

    async def list_tools(self) -> Any:
        return await self._env._call(("tools", "list"))

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self._env._call(("tools", "call", name, arguments))


def worker_environment(pool: WorkerPool, probe: Probe, name: str) -> type:
    """The class the runtime hosts for an environment whose instances live in ``pool``.

    Its ``reset`` / ``step`` (and their async forms) carry the real class's signatures, so
    the runtime keeps exactly the keyword arguments the real methods take, as for a class
    it hosts in process.
    """
    kind = probe.kind
    methods: dict[str, Any] = {
        "pool": pool,
        "probe": probe,
        "__doc__": f"{kind.__name__} instances, each alive in a worker process.",
        "__module__": __name__,
    }
    base = vars(_WorkerEnvironment)
    for name_, real in (
        ("reset", "reset"), ("reset_async", "reset"), ("step", "step"), ("step_async", "step"),
    ):  # fmt: skip
        methods[name_] = _with_signature(base[name_], getattr(kind, real, None))
    worker_cls = type(f"Workers[{kind.__name__}]", (_WorkerEnvironment,), methods)
    logger.info("hosting %s: one worker process per session", name)
    return worker_cls


def _with_signature(method: Callable[..., Any], real: Any) -> Callable[..., Any]:
    """A copy of ``method`` that reports ``real``'s signature (for keyword filtering)."""
    try:
        signature = inspect.signature(real)
    except (TypeError, ValueError):
        return method
    if inspect.iscoroutinefunction(method):

        async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await method(self, *args, **kwargs)

        wrapped: Callable[..., Any] = call_async
    else:

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            return method(self, *args, **kwargs)

        wrapped = call
    wrapped.__name__ = method.__name__
    wrapped.__qualname__ = method.__qualname__
    wrapped.__doc__ = method.__doc__
    wrapped.__signature__ = signature  # type: ignore[attr-defined]
    return wrapped
