"""``OpenEnvVectorEnv``: N remote environments stepped in lockstep as a Gymnasium VectorEnv.

The N sub-environments are spread over K servers (with the local provider: K server
processes). A vector step hands the transport **one plan** -- one batched frame per server
and operation, split into frames of ``frame_size`` sub-envs (more when some sub-envs
auto-reset) -- and gets back one **columnar** outcome per frame: rewards, dones and
observations arrive as columns and stay columns until they are the step's arrays. A
server without the batched protocol is driven over OpenEnv's JSON ``/ws`` instead: one
session per sub-env, all in flight at once, same API and semantics.

>>> import gymnasium, openenv_gym
>>> envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=4)
>>> obs, infos = envs.reset(seed=0)
>>> obs.shape
(4, 50)
>>> obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
>>> envs.close()

EnvPool-style partial batches: :meth:`OpenEnvVectorEnv.send` and
:meth:`OpenEnvVectorEnv.recv` (``info["env_id"]`` says which sub-envs came back).

This class is a facade: the rules live in the engine
(:class:`~openenv_gym.vector.engine.Engine`), which it drives on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic

import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space
from typing_extensions import TypeVar, Unpack

from openenv_gym.assemble import marked_spec, render_modes
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.options import VectorOptions, settle
from openenv_gym.providers import Provider
from openenv_gym.spaces import Codec
from openenv_gym.vector.drive import run
from openenv_gym.vector.engine import Engine

__all__ = ["OpenEnvVectorEnv", "VectorCommon"]

ObsType = TypeVar("ObsType", default=Any)
ActType = TypeVar("ActType", default=Any)
ArrayType = TypeVar("ArrayType", default=Any)


class VectorCommon(Generic[ObsType, ActType]):
    """What the sync and the asyncio vector envs share besides their calls.

    The attributes, spaces, seeds, ``get_attr`` / ``set_attr``, ``info_of``, ``render``.
    """

    engine: Engine
    _spec: EnvSpec | None = None

    def _setup(self, engine: Engine) -> None:
        self.engine = engine
        settings = engine.settings
        n = settings.num_envs
        self.num_envs = n
        mode = settings.autoreset_mode
        self.metadata = {
            "render_modes": render_modes(engine.codec),
            "render_fps": 4,
            "autoreset_mode": mode,
        }
        self.render_mode = settings.render_mode
        self.autoreset_mode = mode
        self.batch_size = settings.batch_size
        self.frame_size = settings.frame_size
        self.codec: Codec = engine.codec
        self.single_observation_space = engine.codec.observation_space
        self.single_action_space = engine.codec.action_space
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self.protocols: tuple[str, ...] = engine.protocols
        """Per server: ``"batch"`` or ``"json"``."""

    @property
    def _provider(self) -> Provider:
        return self.engine.provider

    @property
    def max_episode_steps(self) -> int | None:
        """The time limit (``set_attr("max_episode_steps", n)`` changes it)."""
        return self.engine.episodes.max_episode_steps

    @max_episode_steps.setter
    def max_episode_steps(self, value: int | None) -> None:
        self.engine.episodes.max_episode_steps = value

    @property
    def spec(self) -> EnvSpec | None:
        """The ``EnvSpec`` that ``make_vec`` set.

        ``nondeterministic`` is True when determinism depends on the servers: any server
        but our own Wordle, Echo and Catch started by us
        (:func:`~openenv_gym.assemble.serves_seeded`).
        """
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._spec = marked_spec(value, self.engine.seeded)

    @property
    def base_urls(self) -> list[str]:
        """The servers' URLs, one per shard."""
        return list(self.engine.urls)

    def request_headers(self, k: int = 0) -> dict[str, str] | None:
        """The HTTP headers this env sends server ``k`` (its bearer token included).

        A restarted server may have a new token: these are the current ones.
        """
        return self.engine.request_headers(k)

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """Per sub-env, the generator its last seeded reset made (as ``SyncVectorEnv``).

        A sub-env never reset with a seed gets one from a random seed, on first use.
        """
        return tuple(rng for rng, _ in self.engine.episodes.sub_rngs())

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """Per sub-env, the seed of :attr:`np_random` (as ``SyncVectorEnv``).

        ``reset(seed=s)`` gives ``(s, s + 1, ...)``; ``reset()`` keeps them.
        """
        return tuple(seed for _, seed in self.engine.episodes.sub_rngs())

    def info_of(self, i: int) -> dict[str, Any]:
        """Sub-env ``i``'s info from its latest reply, as a single env's ``info``.

        What the batched ``infos`` of ``step`` / ``recv`` hold for it, without unbatching
        them (empty before its first reset).
        """
        episodes = self.engine.episodes
        last = episodes.last[i]
        return {} if last is None else self.engine.batcher.info_at(last, int(episodes.last_at[i]))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Return one value per sub-env.

        Known names: ``base_url``, ``protocol``, ``elapsed_steps``, ``np_random``,
        ``np_random_seed``; any other public attribute of the vector env itself is
        repeated N times.
        """
        engine = self.engine
        engine.check_open()
        if name in ("np_random", "np_random_seed"):
            return tuple(getattr(self, name))
        shard_of = engine.planner.shard_of.tolist()
        if name == "base_url":
            return tuple(engine.urls[k] for k in shard_of)
        if name == "protocol":
            return tuple(self.protocols[k] for k in shard_of)
        if name == "elapsed_steps":
            return tuple(engine.episodes.elapsed.tolist())
        if name.startswith("_") or not hasattr(self, name):
            raise AttributeError(f"sub-environments have no attribute {name!r}")
        return (getattr(self, name),) * self.num_envs

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``max_episode_steps`` (the only settable sub-env attribute)."""
        self.engine.check_open()
        if name != "max_episode_steps":
            raise AttributeError(f"cannot set {name!r} on remote sub-environments")
        if isinstance(values, list | tuple):
            if len(values) != self.num_envs or len(set(values)) != 1:
                raise ConfigurationError("max_episode_steps must be one value for every sub-env")
            values = values[0]
        self.max_episode_steps = values

    def _render_all(self) -> tuple[Any, ...]:
        episodes, batcher = self.engine.episodes, self.engine.batcher
        mode = self.render_mode or "ansi"
        return tuple(batcher.render(episodes.reply_of(i), mode) for i in range(self.num_envs))

    def render(self) -> tuple[Any, ...] | None:
        """One frame per sub-env (None without a render mode).

        A text with ``render_mode="ansi"``, an RGB picture with ``"rgb_array"``.
        """
        if self.render_mode is None:
            return None
        return self._render_all()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.codec.name!r}, num_envs={self.num_envs}, "
            f"protocols={self.protocols})"
        )


class OpenEnvVectorEnv(  # type: ignore[misc]  # np_random: a tuple, as SyncVectorEnv's
    VectorCommon[ObsType, ActType], VectorEnv[ObsType, ActType, ArrayType]
):
    """N OpenEnv sessions as one ``gymnasium.vector.VectorEnv``.

    Args:
        env: ``"wordle"``, ``"echo"``, ``"catch"``: the spaces and the local server; or
            ``"generic"``: any OpenEnv server, with spaces built from its ``GET /schema``
            (read from the first server; ``docs/spaces.md``).
        num_envs: Number of sub-environments N.
        **options: :class:`~openenv_gym.options.VectorOptions`: where the servers come
            from (``base_url=``, ``provider=``, ``num_servers=``...), the protocol,
            timeouts, ``max_episode_steps``, ``autoreset_mode``, ``on_server_loss``...
            Any other keyword argument is the provider's own (``provider="ray"``:
            ``placement=``, ``num_cpus=``...; ``docs/scale-out.md``).

    Raises:
        ConfigurationError: An option out of range (checked before any server starts).
    """

    def __init__(self, env: str = "wordle", num_envs: int = 1, **options: Unpack[VectorOptions]):
        settings = settle(env, options, num_envs)
        self._setup(Engine.start(settings))

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset every sub-env (or those in ``options["reset_mask"]``).

        ``seed``: int -> ``seed + i``; list -> one per sub-env. Other ``options`` are
        reset kwargs sent to every reset sub-env. The caller's dict is not modified.
        """
        return run(self.engine, self.engine.reset(seed, options))

    def step(
        self, actions: ActType
    ) -> tuple[ObsType, ArrayType, ArrayType, ArrayType, dict[str, Any]]:
        """Step every sub-env with its action (ignored for auto-resetting sub-envs)."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: ActType) -> None:
        """Send the actions of every sub-env; collect with :meth:`step_wait`."""
        run(self.engine, self.engine.step_async(actions))

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[ObsType, ArrayType, ArrayType, ArrayType, dict[str, Any]]:
        """Wait for the step sent by :meth:`step_async` (``timeout`` in seconds).

        Raises:
            WaitTimeoutError: Not done within ``timeout``; the step stays pending (call
                again). Server-side limits are ``timeouts.step``. Also a
                ``multiprocessing.TimeoutError``, as Gymnasium's ``AsyncVectorEnv`` raises.
            EnvErrorGroup: Some sub-envs failed; ``errors`` maps each index to its error.
            NoPendingCallError: No :meth:`step_async` first.
            EnvClosedError: The vector env is closed (or was closed while waiting).
        """
        return run(self.engine, self.engine.step_wait(timeout))

    # ------------------------------------------------------------------ send / recv
    def send(
        self, actions: Any, env_ids: Sequence[int] | np.ndarray[Any, Any] | None = None
    ) -> None:
        """Send actions for some sub-envs (EnvPool style) without waiting.

        Args:
            actions: One action per id in ``env_ids``.
            env_ids: Sub-env indices (default: all). None of them may have a pending step.
        """
        run(self.engine, self.engine.send(actions, env_ids))

    def recv(
        self, batch_size: int | None = None, timeout: float | None = None
    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Return the first ``batch_size`` sub-envs whose step finished.

        ``infos["env_id"]`` holds their indices (in the order of the returned arrays).

        Raises:
            WaitTimeoutError: Fewer than ``batch_size`` finished within ``timeout``.
            EnvErrorGroup: Some of the returned sub-envs failed.
            NoPendingCallError: Nothing was sent.
        """
        want = batch_size or self.batch_size
        return run(self.engine, self.engine.recv(want, timeout))

    # ------------------------------------------------------------------ extras
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method on every sub-env; supported: ``state``, ``render``."""
        self.engine.check_open()
        if name == "state":
            return run(self.engine, self.engine.state_all())
        if name == "render":
            return self._render_all()
        return self.get_attr(name)

    def __enter__(self) -> OpenEnvVectorEnv[ObsType, ActType, ArrayType]:
        """``with gymnasium.make_vec(...) as envs:`` closes the vector env on the way out."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close_extras(self, **kwargs: Any) -> None:
        """Close every connection and stop local servers.

        From another thread while a call waits: that call ends with an
        :class:`~openenv_gym.exceptions.EnvClosedError` first.
        """
        self.engine.close()
