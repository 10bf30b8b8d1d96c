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
import logging
import reprlib
import warnings
from collections.abc import Mapping
from typing import Any, Literal, SupportsFloat

import gymnasium
from gymnasium.envs.registration import EnvSpec

from openenv_gym.assemble import (
    Recipe,
    assemble,
    check_episode_args,
    check_on_server_loss,
    headers_for_server,
    marked_spec,
    render_modes,
)
from openenv_gym.config import OnServerLoss, ProtocolName, Timeouts
from openenv_gym.exceptions import (
    ArgumentTypeError,
    ConnectError,
    ConnectionLostError,
    EnvClosedError,
    InvalidActionError,
    ResetNeededError,
)
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.providers import Provider
from openenv_gym.replies import reply_info, wire_observation
from openenv_gym.spaces import Codec, FieldSpaces, action_error
from openenv_gym.transport.session import Session, open_session

__all__ = ["OpenEnvEnv"]

_MOVED = {"fetch_schema": "openenv_gym.assemble", "list_tools": "openenv_gym.assemble"}


def __getattr__(name: str) -> Any:
    """``fetch_schema`` and ``list_tools`` moved to :mod:`openenv_gym.assemble` (0.2)."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"openenv_gym.env.{name} moved to {home}.{name}", DeprecationWarning, stacklevel=2
    )
    return getattr(importlib.import_module(home), name)


logger = logging.getLogger("openenv_gym.env")


class OpenEnvEnv(gymnasium.Env[Any, Any]):
    """A Gymnasium environment over one session of an OpenEnv (or openenv-gym) server.

    ``terminated`` is the server's ``done``; ``truncated`` is set when
    ``max_episode_steps`` is reached; ``reward: null`` becomes 0.0; ``info`` carries the
    observation fields not in the Gymnasium observation, and ``metadata``.

    Args:
        env: Which environment: ``"wordle"``, ``"echo"``, ``"catch"`` (its spaces, and
            the server the local provider starts), or ``"generic"``: any OpenEnv server,
            with spaces built from its ``GET /schema`` (``docs/spaces.md``).
        base_url: An existing server (a Space, a container). Default: start a local one.
        provider: ``"local"``, ``"docker"``, ``"ray"``, ``"url"`` or a
            :class:`~openenv_gym.providers.Provider`.
        protocol: ``"auto"`` (batched if the server offers it, else JSON), ``"batch"``,
            ``"json"``.
        timeouts: :class:`~openenv_gym.config.Timeouts` or a mapping of its fields.
        max_episode_steps: Truncate episodes after this many steps (None: never).
        render_mode: ``None``, ``"ansi"`` (the observation as text) or ``"rgb_array"`` (a
            picture, for envs that have one: Catch; what ``gymnasium.wrappers.RecordVideo``
            records).
        codec: Your own spaces and conversions, for servers our codecs do not know.
        headers: Extra HTTP headers for the WebSocket upgrade and ``GET /schema``.
        token: The bearer token of a server we did not start, sent as ``Authorization:
            Bearer <token>`` (default: ``OPENENV_GYM_TOKEN``). Servers a provider starts
            get a fresh token each, which the env sends without being told.
        on_server_loss: ``"raise"`` (default): a lost connection raises
            :class:`~openenv_gym.exceptions.ConnectionLostError`. ``"restart"``: the env
            starts the server again if it died (a server its provider started) and opens
            a new session; the step that lost it returns the last observation with
            ``truncated=True`` and ``info["server_lost"] = True``, and a ``reset`` that
            lost it is sent again (``docs/reliability.md``).
        server: The server class the local provider starts, ``"package.module:Class"``
            (default: the env's own). With ``env="generic"``, its spaces come from its
            schema.
        action_fields: ``env="generic"``: per action field, the space to use instead of
            the schema's, or None to leave a field with a default out
            (:func:`~openenv_gym.spaces.codec_from_schema`).
        observation_fields: ``env="generic"``: per observation field, the space to use
            instead of the schema's, or None to move the field to ``info``.
        tool: ``env="generic"`` on an MCP tool server: act with this one tool (the action
            space is its arguments'; default: every tool, ``Dict(tool, arguments)``).
        **provider_options: More arguments of the provider (``provider="ray"``:
            ``placement=``, ``num_cpus=``, ``runtime_env=``...; ``docs/scale-out.md``).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    _spec: EnvSpec | None = None
    _seeded = False

    def __init__(
        self,
        env: str = "wordle",
        *,
        base_url: str | None = None,
        provider: str | Provider | None = None,
        protocol: ProtocolName | None = None,
        timeouts: Timeouts | Mapping[str, float | None] | None = None,
        max_episode_steps: int | None = None,
        render_mode: Literal["ansi", "rgb_array"] | None = None,
        codec: Codec | None = None,
        headers: Mapping[str, str] | None = None,
        server: str | None = None,
        action_fields: FieldSpaces | None = None,
        observation_fields: FieldSpaces | None = None,
        tool: str | None = None,
        token: str | None = None,
        on_server_loss: OnServerLoss = "raise",
        **provider_options: Any,
    ) -> None:
        check_episode_args(max_episode_steps, render_mode, codec, headers, env=env)
        self._on_server_loss = check_on_server_loss(on_server_loss)
        self.render_mode = render_mode
        self.max_episode_steps = max_episode_steps
        self._session: Session | None = None
        self._last: ObservationReceived | None = None
        self._elapsed = 0
        self._needs_reset = True
        self._timeouts = Timeouts.of(timeouts)
        self._given = (headers, token)
        recipe = Recipe(
            env,
            codec=codec,
            action_fields=action_fields,
            observation_fields=observation_fields,
            tool=tool,
            server=server,
            provider=provider,
            base_url=base_url,
            provider_options=provider_options,
            headers=headers,
            token=token,
            timeouts=self._timeouts,
        )
        parts = assemble(recipe, lambda urls, headers: self._connect(urls[0], protocol, headers[0]))
        self._provider = parts.provider
        self._seeded = parts.seeded
        self._headers = parts.headers[0]
        self._session = parts.connection
        self.codec = parts.codec
        self.metadata = {**self.metadata, "render_modes": render_modes(parts.codec)}
        self.observation_space = parts.codec.observation_space
        self.action_space = parts.codec.action_space
        self.base_url = parts.urls[0]
        self.protocol: str = self._session.protocol
        """``"batch"`` or ``"json"``: what the session speaks."""

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
        self._spec = marked_spec(value, self._seeded)

    def request_headers(self, k: int = 0) -> dict[str, str] | None:
        """The HTTP headers this env sends its server (its bearer token included).

        ``k`` is there for symmetry with the vector env; a single env has server 0 only.
        """
        if k != 0:
            raise IndexError(f"a single env has one server (0), not {k}")
        return self._headers

    @property
    def session(self) -> Session:
        """The underlying session.

        Raises:
            EnvClosedError: The env is closed (also Gymnasium's ``ClosedEnvironmentError``).
        """
        if self._session is None:
            raise EnvClosedError("the environment is closed")
        return self._session

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode.

        ``seed`` goes to the server; ``options`` are extra reset kwargs for it (e.g.
        ``{"episode_id": "ep-1"}``).
        """
        session = self.session
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ArgumentTypeError(f"seed must be an integer or None, got {reprlib.repr(seed)}")
        if options is not None and not isinstance(options, Mapping):
            raise ArgumentTypeError(f"options must be a dict or None, got {reprlib.repr(options)}")
        super().reset(seed=seed)
        kwargs: dict[str, Any] = dict(options or {})
        if seed is not None:
            kwargs["seed"] = seed
        try:
            reply = session.reset(**kwargs)
        except ConnectionLostError:
            if self._on_server_loss != "restart":
                raise
            reply = self._recover().reset(**kwargs)
        self._last = reply
        self._elapsed = 0
        self._needs_reset = reply.done
        return self.codec.decode_observation(
            wire_observation(self.codec, reply.observation, reply.metadata)
        ), self._info(reply)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one action.

        Raises:
            InvalidActionError: The action is outside the action space, or the server
                rejected it (the session survives: step again with a valid one).
            ResetNeededError: No episode is running (call ``reset``).
            EnvClosedError: The env is closed.
            TransportError: Timeout or lost connection (the session is then closed; with
                ``on_server_loss="restart"`` a lost one truncates the episode instead).
        """
        session = self.session
        if self._needs_reset:
            raise ResetNeededError("the episode is over (or never started): call reset()")
        contains = self.codec.contains_action or self.action_space.contains
        if not contains(action):
            raise InvalidActionError(action_error(self.action_space, action))
        try:
            reply = session.step(self.codec.encode_action(action))
        except ConnectionLostError:
            if self._on_server_loss != "restart" or self._last is None:
                raise
            self._recover()
            return self._lost_step(self._last)
        self._last = reply
        self._elapsed += 1
        terminated = bool(reply.done)
        # as gymnasium's TimeLimit: the limit truncates, whether or not the step terminated
        truncated = self.max_episode_steps is not None and self._elapsed >= self.max_episode_steps
        self._needs_reset = terminated or truncated
        reward = 0.0 if reply.reward is None else float(reply.reward)
        return (
            self.codec.decode_observation(
                wire_observation(self.codec, reply.observation, reply.metadata)
            ),
            reward,
            terminated,
            truncated,
            self._info(reply),
        )

    def _info(self, reply: ObservationReceived) -> dict[str, Any]:
        return reply_info(reply, self.codec.observed)

    def _lost_step(
        self, last: ObservationReceived
    ) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """The step that lost the server: the last observation, truncated."""
        self._needs_reset = True
        obs = self.codec.decode_observation(
            wire_observation(self.codec, last.observation, last.metadata)
        )
        return obs, 0.0, False, True, {**self._info(last), "server_lost": True}

    def _recover(self) -> Session:
        """The connection is lost: restart the server if it is gone, open a new session.

        Raises:
            ProviderError: The server is gone and the provider cannot start it again.
            TransportError: The new session could not be opened.
        """
        self.session.close()  # its socket is gone: a failed recovery leaves it closed
        provider = self._provider
        url = self.base_url if provider.alive(0) else provider.restart(0)
        try:
            session = self._open(url)
        except ConnectError:  # it runs but does not answer (hung, or not ours to check)
            url = provider.restart(0)
            session = self._open(url)
        logger.warning("lost the server at %s; a new session on %s", self.base_url, url)
        self.base_url, self._session = url, session
        return session

    def _open(self, url: str) -> Session:
        self._headers = headers_for_server(self._provider, 0, *self._given)
        return self._connect(url, self.protocol, self._headers)

    def _connect(
        self, url: str, protocol: str | None, headers: Mapping[str, str] | None
    ) -> Session:
        return open_session(url, protocol=protocol, timeouts=self._timeouts, headers=headers)

    def state(self) -> dict[str, Any]:
        """The server-side state (``episode_id``, ``step_count``, env fields)."""
        return self.session.state()

    def render(self) -> Any:
        """The current observation as text or as a picture.

        ``render_mode="ansi"``: a ``str``; ``"rgb_array"``: an RGB picture, ``uint8`` height
        x width x 3. None before the first reset, or without a render mode.
        """
        if self._last is None or self.render_mode is None:
            return None
        last = self._last
        wire = wire_observation(self.codec, last.observation, last.metadata)
        if self.render_mode == "rgb_array" and self.codec.render_rgb is not None:
            return self.codec.render_rgb(wire)
        return self.codec.render(wire)

    def close(self) -> None:
        """Close the session and stop a local server. Idempotent."""
        session, self._session = self._session, None
        try:
            if session is not None:
                session.close()
        finally:
            provider = getattr(self, "_provider", None)
            if provider is not None:
                provider.close()
        super().close()
