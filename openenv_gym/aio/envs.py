"""The asyncio envs: ``AsyncOpenEnvEnv`` and ``AsyncOpenEnvVectorEnv``, and ``make`` / ``make_vec``.

The same engine as the sync envs (:class:`~openenv_gym.vector.engine.Engine`), driven on
the caller's running loop (:mod:`openenv_gym.aio.driver`): the same spaces, seeding,
autoreset, errors and providers; every call is awaited. Set-up and closing (starting
servers, reading ``/schema``, closing handshakes) run in a worker thread, so they never
block the loop either.

>>> import asyncio, openenv_gym.aio
>>> async def main():
...     async with openenv_gym.aio.make("openenv/Catch-v0") as env:
...         obs, info = await env.reset(seed=1)
...         obs, reward, terminated, truncated, info = await env.step(1)
...     return obs.shape
>>> asyncio.run(main())
(50,)

One call at a time per env (another call while one runs raises
:class:`~openenv_gym.exceptions.PendingCallError`); many envs run concurrently in one loop.
A call that is cancelled leaves the env consistent: its requests stay on the wire and
their replies are taken by the next call (their bookkeeping applied), so nothing is ever
taken for another request's reply; a vector env's cancelled ``step`` stays pending, as
after ``step_wait(timeout=...)``: ``step_wait()`` collects it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from typing import Any, Generic, Self, SupportsFloat

import gymnasium
import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils import seeding
from typing_extensions import TypeVar, Unpack

from openenv_gym.aio.driver import _in_thread, drive
from openenv_gym.env import EnvCommon
from openenv_gym.exceptions import ConfigurationError, PendingCallError
from openenv_gym.options import EnvOptions, Settings, VectorOptions, settle
from openenv_gym.vector.drive import Blocking
from openenv_gym.vector.engine import Engine
from openenv_gym.vector.state import CallState
from openenv_gym.vector.vector_env import VectorCommon

__all__ = ["AsyncOpenEnvEnv", "AsyncOpenEnvVectorEnv", "Making", "make", "make_vec"]

ObsType = TypeVar("ObsType", default=Any)
ActType = TypeVar("ActType", default=Any)
ArrayType = TypeVar("ArrayType", default=Any)
E = TypeVar("E")

_OUR_ENTRY_POINT = "openenv_gym.env:OpenEnvEnv"


async def _start(settings: Settings, single: bool) -> Engine:
    """Set up the engine in a worker thread (servers, ``/schema``, sessions)."""
    engine = await _in_thread(
        Blocking(lambda: Engine.start(settings, single=single), lambda made: made.close())
    )
    assert isinstance(engine, Engine)
    return engine


class _Calls:
    """One call at a time per env, and ``close`` waits for the one running."""

    def __init__(self) -> None:
        self.running: str | None = None
        self.idle = asyncio.Event()
        self.idle.set()

    @contextlib.contextmanager
    def call(self, name: str) -> Iterator[None]:
        if self.running is not None:
            raise PendingCallError(
                f"{self.running}() is still running on this env: await it (or cancel it) "
                f"before calling {name}()",
                self.running,
            )
        self.running = name
        self.idle.clear()
        try:
            yield
        finally:
            self.running = None
            self.idle.set()


async def _close(engine: Engine, calls: _Calls) -> None:
    """Close ``engine``: a call that waits ends first (EnvClosedError), then the sockets."""
    if engine.state is CallState.CLOSED and not engine.dispatcher.shards:
        return
    engine.state = CallState.CLOSED
    if calls.running is not None:
        engine.dispatcher.interrupt()  # wakes the waiting call: it raises and lets go
        await calls.idle.wait()
    await asyncio.to_thread(engine.close)


class AsyncOpenEnvEnv(EnvCommon[ObsType, ActType]):
    """One OpenEnv session with an asyncio API: ``await env.reset()``, ``await env.step(a)``.

    Made by :func:`make` (or :meth:`create`); the arguments are
    :class:`~openenv_gym.env.OpenEnvEnv`'s. Not a ``gymnasium.Env`` (its calls are
    coroutines), but the same spaces, ``info``, ``spec``, ``np_random``, ``render`` and
    errors. ``async with`` closes it.
    """

    def __init__(self, engine: Engine) -> None:
        self._setup(engine)
        self._calls = _Calls()
        self._np_random: np.random.Generator | None = None
        self._np_random_seed: int | None = None
        self.closed = False

    @classmethod
    async def create(cls, env: str = "wordle", **options: Unpack[EnvOptions]) -> Self:
        """Set up the env (its servers in a worker thread) on the running loop.

        Raises:
            ConfigurationError: An option out of range (before any server starts).
        """
        settings = settle(env, options)
        return cls(await _start(settings, single=True))

    @property
    def unwrapped(self) -> Self:
        """The env itself (no wrappers)."""
        return self

    @property
    def np_random(self) -> np.random.Generator:
        """The generator of the last seeded reset (as ``gymnasium.Env.np_random``)."""
        if self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random()
        return self._np_random

    @property
    def np_random_seed(self) -> int:
        """The seed of :attr:`np_random`."""
        if self._np_random_seed is None:
            self._np_random, self._np_random_seed = seeding.np_random()
        return self._np_random_seed

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start an episode (see :meth:`OpenEnvEnv.reset <openenv_gym.env.OpenEnvEnv.reset>`)."""
        seed, kwargs = self._reset_kwargs(seed, options)
        with self._calls.call("reset"):
            if seed is not None:
                self._np_random, self._np_random_seed = seeding.np_random(seed)
            engine = self._engine
            reply = await drive(engine, engine.reset_one(kwargs))
        return self._reply_result(reply)

    async def step(
        self, action: ActType
    ) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one action (see :meth:`OpenEnvEnv.step <openenv_gym.env.OpenEnvEnv.step>`)."""
        with self._calls.call("step"):
            engine = self._engine
            step = await drive(engine, engine.step_one(action))
        return self._step_result(step)

    async def state(self) -> dict[str, Any]:
        """The server-side state (``episode_id``, ``step_count``, env fields)."""
        with self._calls.call("state"):
            engine = self._engine
            return await drive(engine, engine.state_one())

    async def close(self) -> None:
        """Close the session and stop a local server. Idempotent.

        A call still waiting ends first, with :class:`~openenv_gym.exceptions.EnvClosedError`.
        """
        self.closed = True
        engine = self.engine
        if engine is not None:
            await _close(engine, self._calls)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncOpenEnvEnv({self.codec.name!r}, protocol={self.protocol!r})"


class AsyncOpenEnvVectorEnv(VectorCommon[ObsType, ActType], Generic[ObsType, ActType, ArrayType]):
    """N OpenEnv sessions stepped in lockstep, with an asyncio API.

    Made by :func:`make_vec` (or :meth:`create`); the arguments are
    :class:`~openenv_gym.vector.OpenEnvVectorEnv`'s, and so are the calls, each awaited:
    ``reset``, ``step``, ``step_async`` / ``step_wait``, ``send`` / ``recv``, ``call``,
    ``close``. Not a ``gymnasium.vector.VectorEnv`` (its calls are coroutines), but the
    same spaces, arrays, infos, autoreset modes, seeds and errors. ``async with`` closes it.
    """

    def __init__(self, engine: Engine) -> None:
        self._setup(engine)
        self._calls = _Calls()
        self.closed = False

    @classmethod
    async def create(
        cls, env: str = "wordle", num_envs: int = 1, **options: Unpack[VectorOptions]
    ) -> Self:
        """Set up the vector env (its servers in a worker thread) on the running loop.

        Raises:
            ConfigurationError: An option out of range (before any server starts).
        """
        settings = settle(env, options, num_envs)
        return cls(await _start(settings, single=False))

    @property
    def unwrapped(self) -> Self:
        """The vector env itself (no wrappers)."""
        return self

    async def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset every sub-env (or those in ``options["reset_mask"]``)."""
        with self._calls.call("reset"):
            return await drive(self.engine, self.engine.reset(seed, options))

    async def step(
        self, actions: ActType
    ) -> tuple[ObsType, ArrayType, ArrayType, ArrayType, dict[str, Any]]:
        """Step every sub-env (a cancelled step stays pending: :meth:`step_wait` takes it)."""
        with self._calls.call("step"):
            engine = self.engine
            await drive(engine, engine.step_async(actions))
            return await drive(engine, engine.step_wait(None))

    async def step_async(self, actions: ActType) -> None:
        """Send every sub-env's action; :meth:`step_wait` collects the step."""
        with self._calls.call("step_async"):
            await drive(self.engine, self.engine.step_async(actions))

    async def step_wait(
        self,
        timeout: float | None = None,  # noqa: ASYNC109 - Gymnasium's step_wait(timeout)
    ) -> tuple[ObsType, ArrayType, ArrayType, ArrayType, dict[str, Any]]:
        """The step :meth:`step_async` sent (``timeout``: as the sync env's)."""
        with self._calls.call("step_wait"):
            return await drive(self.engine, self.engine.step_wait(timeout))

    async def send(
        self, actions: Any, env_ids: Sequence[int] | np.ndarray[Any, Any] | None = None
    ) -> None:
        """Send actions for some sub-envs (EnvPool style); :meth:`recv` takes them."""
        with self._calls.call("send"):
            await drive(self.engine, self.engine.send(actions, env_ids))

    async def recv(
        self,
        batch_size: int | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the sync env's recv(timeout)
    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """The first ``batch_size`` sub-envs whose step finished (``infos["env_id"]``)."""
        with self._calls.call("recv"):
            want = batch_size or self.batch_size
            return await drive(self.engine, self.engine.recv(want, timeout))

    async def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method on every sub-env; supported: ``state``, ``render``."""
        self.engine.check_open()
        if name == "state":
            with self._calls.call("call"):
                return await drive(self.engine, self.engine.state_all())
        if name == "render":
            return self._render_all()
        return self.get_attr(name)

    async def close(self, **kwargs: Any) -> None:
        """Close every connection and stop local servers. Idempotent.

        A call still waiting ends first, with :class:`~openenv_gym.exceptions.EnvClosedError`.
        """
        self.closed = True
        await _close(self.engine, self._calls)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class Making(Generic[E]):
    """What :func:`make` and :func:`make_vec` return: await it, or ``async with`` it.

    ``env = await make(...)`` gives the env; ``async with make(...) as env:`` also closes
    it on the way out (as ``websockets.connect``).
    """

    def __init__(self, create: Callable[[], Awaitable[E]]) -> None:
        self._create = create
        self._made: Any = None

    def __await__(self) -> Generator[Any, None, E]:
        return self._create().__await__()

    async def __aenter__(self) -> E:
        self._made = await self._create()
        return self._made  # type: ignore[no-any-return]

    async def __aexit__(self, *exc_info: object) -> None:
        await self._made.close()


def _our_spec(env_id: str) -> EnvSpec:
    """The registered spec of one of our ids (``"module:id"`` imports the module first).

    Raises:
        ConfigurationError: Not registered, or not an openenv-gym env.
    """
    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigurationError(f"cannot import {module!r} for {env_id!r}: {exc}") from exc
    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error as exc:
        raise ConfigurationError(str(exc)) from exc
    if spec.entry_point != _OUR_ENTRY_POINT:
        raise ConfigurationError(
            f"{env_id!r} is not an openenv-gym env (its entry point is {spec.entry_point!r}): "
            "openenv_gym.aio makes openenv/* ids and those added with register_environment"
        )
    return spec


def make(
    id: str,
    max_episode_steps: int | None = None,
    disable_env_checker: bool | None = None,
    **kwargs: Any,
) -> Making[AsyncOpenEnvEnv[Any, Any]]:
    """``gymnasium.make`` for the asyncio API: an :class:`AsyncOpenEnvEnv` of ``id``.

    The same arguments as ``gymnasium.make``: the id's registered kwargs updated with
    ``kwargs`` (:class:`~openenv_gym.options.EnvOptions`), ``max_episode_steps`` (default:
    the registered one) applied as the env's own time limit. No wrappers (they are sync);
    ``disable_env_checker`` is accepted and has nothing to disable.

    ``env = await make(...)``, or ``async with make(...) as env:``.

    Raises:
        ConfigurationError: Unknown id, an id that is not ours, or a bad option (before
            any server starts).
    """

    async def create() -> AsyncOpenEnvEnv[Any, Any]:
        spec = _our_spec(id)
        merged = {**(spec.kwargs or {}), **kwargs}
        limit = max_episode_steps if max_episode_steps is not None else spec.max_episode_steps
        if limit is not None:
            merged["max_episode_steps"] = limit
        env_name = str(merged.pop("env", "wordle"))
        env: AsyncOpenEnvEnv[Any, Any] = await AsyncOpenEnvEnv.create(env_name, **merged)
        made = dataclasses.replace(spec, kwargs={"env": env_name, **merged})
        made.max_episode_steps = limit
        env.spec = made
        return env

    return Making(create)


def make_vec(
    id: str,
    num_envs: int = 1,
    vectorization_mode: str | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    wrappers: Sequence[Callable[[Any], Any]] | None = None,
    **kwargs: Any,
) -> Making[AsyncOpenEnvVectorEnv[Any, Any, Any]]:
    """``gymnasium.make_vec`` for the asyncio API: an :class:`AsyncOpenEnvVectorEnv`.

    The same arguments as ``gymnasium.make_vec``, for our ids' vector entry point: the
    registered kwargs updated with ``kwargs`` (:class:`~openenv_gym.options.VectorOptions`)
    and the registered ``max_episode_steps`` unless given. ``vectorization_mode`` may only
    be ``"vector_entry_point"`` (or None); ``vector_kwargs`` and ``wrappers`` only empty.

    ``envs = await make_vec(...)``, or ``async with make_vec(...) as envs:``.

    Raises:
        ConfigurationError: Unknown id, not ours, another vectorization, or a bad option.
    """

    async def create() -> AsyncOpenEnvVectorEnv[Any, Any, Any]:
        if vectorization_mode not in (None, "vector_entry_point") or vector_kwargs or wrappers:
            raise ConfigurationError(
                "openenv_gym.aio.make_vec steps the sub-envs itself (the vector entry point): "
                "vectorization_mode, vector_kwargs and wrappers do not apply"
            )
        spec = _our_spec(id)
        merged = {**(spec.kwargs or {}), **kwargs}
        if spec.max_episode_steps is not None and "max_episode_steps" not in merged:
            merged["max_episode_steps"] = spec.max_episode_steps
        env_name = str(merged.pop("env", "wordle"))
        envs: AsyncOpenEnvVectorEnv[Any, Any, Any] = await AsyncOpenEnvVectorEnv.create(
            env_name, num_envs, **merged
        )
        recorded: dict[str, Any] = {"env": env_name, **merged}
        if num_envs != 1:
            recorded["num_envs"] = num_envs
        recorded["vectorization_mode"] = "vector_entry_point"
        envs.spec = dataclasses.replace(spec, kwargs=recorded)
        return envs

    return Making(create)
