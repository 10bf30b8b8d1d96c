"""``OpenEnvEnv``: one remote OpenEnv session as a ``gymnasium.Env``.

>>> import gymnasium, openenv_gym
>>> env = gymnasium.make("openenv/Catch-v0")            # starts a local server
>>> obs, info = env.reset(seed=1)
>>> obs.shape
(50,)
>>> obs, reward, terminated, truncated, info = env.step(1)
>>> env.close()
"""

from __future__ import annotations

import importlib
import reprlib
import warnings
from collections.abc import Mapping
from typing import Any, Generic, SupportsFloat

import gymnasium
from gymnasium.envs.registration import EnvSpec
from typing_extensions import TypeVar, Unpack

from openenv_gym.assemble import marked_spec, render_modes
from openenv_gym.exceptions import ArgumentTypeError, EnvClosedError, RemoteProtocolError
from openenv_gym.options import EnvOptions, settle
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.providers import Provider
from openenv_gym.replies import reply_info, wire_observation
from openenv_gym.spaces import Codec
from openenv_gym.transport.session import Session
from openenv_gym.vector.drive import OneStep, run
from openenv_gym.vector.engine import Engine
from openenv_gym.vector.episodes import check_seed

__all__ = ["EnvCommon", "OpenEnvEnv"]

_MOVED = {"fetch_schema": "openenv_gym.assemble", "list_tools": "openenv_gym.assemble"}

ObsType = TypeVar("ObsType", default=Any)
ActType = TypeVar("ActType", default=Any)


def __getattr__(name: str) -> Any:
    """``fetch_schema`` and ``list_tools`` moved to :mod:`openenv_gym.assemble` (0.2)."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"openenv_gym.env.{name} moved to {home}.{name}", DeprecationWarning, stacklevel=2
    )
    return getattr(importlib.import_module(home), name)


class EnvCommon(Generic[ObsType, ActType]):
    """What the sync and the asyncio single env share besides their calls.

    The attributes, spaces, ``spec``, headers, ``session``, ``render``, and the checks of
    ``reset``'s arguments.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    _spec: EnvSpec | None = None
    engine: Engine | None = None

    def _setup(self, engine: Engine) -> None:
        self.engine = engine
        self.render_mode = engine.settings.render_mode
        self.codec: Codec = engine.codec
        self.metadata = {**self.metadata, "render_modes": render_modes(engine.codec)}
        self.observation_space = engine.codec.observation_space
        self.action_space = engine.codec.action_space
        self.protocol: str = engine.protocols[0]
        """``"batch"`` or ``"json"``: what the session speaks."""

    @property
    def _engine(self) -> Engine:
        engine = self.engine
        assert engine is not None
        return engine

    @property
    def _provider(self) -> Provider:
        return self._engine.provider

    @property
    def base_url(self) -> str:
        """The server's URL (a new one after a restart)."""
        return self._engine.urls[0]

    @property
    def max_episode_steps(self) -> int | None:
        """The time limit (None: none)."""
        return self._engine.episodes.max_episode_steps

    @max_episode_steps.setter
    def max_episode_steps(self, value: int | None) -> None:
        self._engine.episodes.max_episode_steps = value

    @property
    def spec(self) -> EnvSpec | None:
        """The ``EnvSpec`` that ``gymnasium.make`` set.

        ``nondeterministic`` is True when determinism depends on the server: any server
        but our own Wordle, Echo and Catch started by us
        (:func:`~openenv_gym.assemble.serves_seeded`).
        """
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._spec = marked_spec(value, self._engine.seeded)

    def request_headers(self, k: int = 0) -> dict[str, str] | None:
        """The HTTP headers this env sends its server (its bearer token included).

        ``k`` is there for symmetry with the vector env; a single env has server 0 only.
        """
        if k != 0:
            raise IndexError(f"a single env has one server (0), not {k}")
        return self._engine.request_headers(0)

    @property
    def session(self) -> Session:
        """The underlying session.

        Raises:
            EnvClosedError: The env is closed (also Gymnasium's ``ClosedEnvironmentError``).
        """
        session = self._engine.session
        if session is None:
            raise EnvClosedError("the environment is closed")
        return session

    def _reset_kwargs(
        self, seed: int | None, options: Mapping[str, Any] | None
    ) -> tuple[int | None, dict[str, Any]]:
        """The seed, and the reset's kwargs for the server (``options`` and the seed), checked.

        Raises:
            EnvClosedError: The env is closed.
            ArgumentTypeError: ``seed`` or ``options`` of a wrong type.
            ConfigurationError: A negative seed.
        """
        self._engine.check_open()
        seed = check_seed(seed)
        if options is not None and not isinstance(options, Mapping):
            raise ArgumentTypeError(f"options must be a dict or None, got {reprlib.repr(options)}")
        kwargs: dict[str, Any] = dict(options or {})
        if seed is not None:
            kwargs["seed"] = seed
        return seed, kwargs

    def _step_result(
        self, step: OneStep
    ) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        reply, reward, terminated, truncated, lost = step
        obs, info = self._reply_result(reply)
        if lost:
            info["server_lost"] = True
        return obs, reward, terminated, truncated, info

    def _reply_result(self, reply: ObservationReceived) -> tuple[ObsType, dict[str, Any]]:
        """One reply's observation and info (a reply the codec cannot read: with a hint)."""
        codec = self.codec
        try:
            obs = codec.decode_observation(
                wire_observation(codec, reply.observation, reply.metadata)
            )
        except RemoteProtocolError as exc:
            self._engine.raise_hinted(exc)
        return obs, reply_info(reply, codec.observed)

    def render(self) -> Any:
        """The current observation as text or as a picture.

        ``render_mode="ansi"``: a ``str``; ``"rgb_array"``: an RGB picture, ``uint8`` height
        x width x 3. None before the first reset, or without a render mode.
        """
        engine = self._engine
        return engine.batcher.render(engine.episodes.reply_of(0), self.render_mode)


class OpenEnvEnv(EnvCommon[ObsType, ActType], gymnasium.Env[ObsType, ActType]):
    """A Gymnasium environment over one session of an OpenEnv (or openenv-gym) server.

    ``terminated`` is the server's ``done``; ``truncated`` is set when
    ``max_episode_steps`` is reached; ``reward: null`` becomes 0.0; ``info`` carries the
    observation fields not in the Gymnasium observation, and ``metadata``.

    It is the engine (:class:`~openenv_gym.vector.engine.Engine`) with one sub-env,
    driven on the caller's thread: one frame out and one in per call.

    Args:
        env: Which environment: ``"wordle"``, ``"echo"``, ``"catch"`` (its spaces, and
            the server the local provider starts), or ``"generic"``: any OpenEnv server,
            with spaces built from its ``GET /schema`` (``docs/spaces.md``).
        **options: :class:`~openenv_gym.options.EnvOptions`: where the server comes from
            (``base_url=``, ``provider=``), the protocol, timeouts, ``max_episode_steps``,
            ``on_server_loss``... Any other keyword argument is the provider's own
            (``provider="ray"``: ``placement=``, ``num_cpus=``...; ``docs/scale-out.md``).

    Raises:
        ConfigurationError: An option out of range (checked before any server starts).
    """

    def __init__(self, env: str = "wordle", **options: Unpack[EnvOptions]) -> None:
        settings = settle(env, options)
        self._setup(Engine.start(settings, single=True))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start an episode.

        ``seed`` goes to the server; ``options`` are extra reset kwargs for it (e.g.
        ``{"episode_id": "ep-1"}``).
        """
        seed, kwargs = self._reset_kwargs(seed, options)
        super().reset(seed=seed)
        engine = self._engine
        return self._reply_result(run(engine, engine.reset_one(kwargs)))

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one action.

        Raises:
            InvalidActionError: The action is outside the action space, or the server
                rejected it (the session survives: step again with a valid one).
            ResetNeededError: No episode is running (call ``reset``).
            EnvClosedError: The env is closed.
            TransportError: Timeout or lost connection (the session is then closed; with
                ``on_server_loss="restart"`` a lost one truncates the episode instead).
        """
        engine = self.engine
        assert engine is not None
        return self._step_result(engine.step_one_now(action))

    def state(self) -> dict[str, Any]:
        """The server-side state (``episode_id``, ``step_count``, env fields)."""
        engine = self._engine
        engine.check_open()
        return run(engine, engine.state_one())

    def close(self) -> None:
        """Close the session and stop a local server. Idempotent."""
        engine = self.engine
        if engine is not None:
            engine.close()
        super().close()
