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

import dataclasses
import logging
import reprlib
from collections.abc import Collection, Mapping
from typing import Any, Literal, SupportsFloat, cast

import gymnasium
from gymnasium.envs.registration import EnvSpec

from openenv_gym._http import get_json, http_base, with_token
from openenv_gym.config import OnServerLoss, ProtocolName, Timeouts, check_count
from openenv_gym.exceptions import (
    ArgumentTypeError,
    ConfigurationError,
    ConnectError,
    ConnectionLostError,
    EnvClosedError,
    InvalidActionError,
    RemoteProtocolError,
    ResetNeededError,
    ServerError,
)
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.providers import Provider, make_provider
from openenv_gym.spaces import (
    GENERIC,
    LIST_TOOLS,
    TOOLS,
    Codec,
    FieldSpaces,
    McpTool,
    action_error,
    codec_for,
    codec_from_schema,
    is_mcp_schema,
    known_envs,
)
from openenv_gym.transport.session import Session, open_session

__all__ = [
    "OpenEnvEnv",
    "bind_schema",
    "check_episode_args",
    "check_on_server_loss",
    "choose_codec",
    "fetch_schema",
    "headers_for_server",
    "list_tools",
    "local_server",
    "marked_spec",
    "reply_info",
    "serves_seeded",
    "wire_observation",
]

logger = logging.getLogger("openenv_gym.env")


def check_episode_args(
    max_episode_steps: int | None,
    render_mode: str | None,
    codec: Any = None,
    headers: Any = None,
) -> None:
    """Validate the arguments the single and the vector env share.

    Raises:
        ConfigurationError: ``max_episode_steps`` < 1, or a render mode other than ansi.
        ArgumentTypeError: ``codec`` not a :class:`~openenv_gym.spaces.Codec`, ``headers``
            not a mapping.
    """
    check_count(max_episode_steps, "max_episode_steps")
    if render_mode not in (None, "ansi"):
        raise ConfigurationError(f"render_mode must be None or 'ansi', got {render_mode!r}")
    if codec is not None and not isinstance(codec, Codec):
        raise ArgumentTypeError(f"codec must be a Codec or None, got {reprlib.repr(codec)}")
    if headers is not None and not isinstance(headers, Mapping):
        raise ArgumentTypeError(f"headers must be a mapping or None, got {reprlib.repr(headers)}")


ON_SERVER_LOSS = ("raise", "restart")


def check_on_server_loss(on_server_loss: str) -> OnServerLoss:
    """Validate ``on_server_loss=`` (the single and the vector env's).

    Raises:
        ConfigurationError: Not ``"raise"`` or ``"restart"``.
    """
    if on_server_loss in ON_SERVER_LOSS:
        return cast(OnServerLoss, on_server_loss)
    raise ConfigurationError(f"on_server_loss must be 'raise' or 'restart', got {on_server_loss!r}")


def headers_for_server(
    provider: Provider, index: int, headers: Mapping[str, str] | None, token: str | None
) -> dict[str, str] | None:
    """The headers for server ``index`` of ``provider``: ``headers`` and a bearer token.

    The token is the one the provider gave the server (a server it started), else
    ``token``, else ``OPENENV_GYM_TOKEN`` unless ``headers`` carry an ``Authorization``
    (:func:`~openenv_gym._http.with_token`).
    """
    return with_token(headers, provider.token(index) or token)


def reply_info(
    reply: ObservationReceived, observed: str | Collection[str] | None = None
) -> dict[str, Any]:
    """Build the ``info`` of a step.

    It holds every observation field the Gymnasium observation (``observed``: a field
    name or a set of them, usually :attr:`Codec.observed <openenv_gym.spaces.Codec>`)
    leaves out, and ``metadata`` when the server sent a non-empty one (top level,
    openenv >= 0.4, or nested in the observation). The same reply gives the same info over
    the batched and the JSON protocol, so info keys and dtypes stay stable from step to step.
    """
    observation = reply.observation
    if observed is None or isinstance(observed, str):
        info = {k: v for k, v in observation.items() if k != observed and k != "metadata"}
    else:
        info = {k: v for k, v in observation.items() if k not in observed and k != "metadata"}
    metadata = reply.metadata or observation.get("metadata")
    if metadata:
        info["metadata"] = metadata
    return info


def wire_observation(
    codec: Codec, observation: Mapping[str, Any], metadata: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """What the codec decodes: the observation, with ``metadata`` in it if the codec reads it.

    OpenEnv's JSON replies nest ``metadata`` in the observation (openenv >= 0.4); the batched
    protocol sends it apart. A codec with ``reads_metadata`` sees it in the same place on both.
    """
    if codec.reads_metadata and metadata and not observation.get("metadata"):
        return {**observation, "metadata": metadata}
    return observation


def fetch_schema(
    base_url: str,
    *,
    timeout: float | None = 10.0,
    headers: Mapping[str, str] | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """``GET {base_url}/schema``: the JSON schemas of a server's action and observation.

    For an MCP tool server (:func:`~openenv_gym.spaces.is_mcp_schema`) the body also gets
    its tools under ``"tools"`` (:data:`~openenv_gym.spaces.TOOLS`), listed as OpenEnv's
    ``MCPToolClient`` lists them: a ``ListToolsAction`` step on a session of its own
    (:func:`list_tools`).

    ``token`` is sent as ``Authorization: Bearer <token>`` (default:
    ``OPENENV_GYM_TOKEN``, unless ``headers`` carry an ``Authorization``).

    Raises:
        ConfigurationError: The server answers with an error status (it publishes no
            schema: pass your own ``codec=``), or it is an MCP server that lists no tools.
        AuthenticationError: The server wants a token and ours is missing or wrong.
        ConnectError: The server could not be reached.
        RemoteProtocolError: The body is not ``{"action": {...}, "observation": {...}}``.
    """
    headers = with_token(headers, token)
    body = _get_schema(base_url, timeout, headers)
    if is_mcp_schema(body):
        timeouts = Timeouts.from_env(connect=timeout)
        body[TOOLS] = [t.as_json() for t in list_tools(base_url, timeouts, headers)]
    return body


def _get_schema(
    base_url: str, timeout: float | None, headers: Mapping[str, str] | None
) -> dict[str, Any]:
    url = f"{http_base(base_url)}/schema"
    status, body = get_json(url, timeout, headers=headers)
    if status != 200:
        raise ConfigurationError(
            f"GET {url} answered {status}: cannot build spaces from this server's schema; "
            "pass your own codec= (see docs/spaces.md)"
        )
    if not isinstance(body, dict) or not all(
        isinstance(body.get(k), dict) for k in ("action", "observation")
    ):
        raise RemoteProtocolError(f"GET {url}: not an action/observation schema: {body!r:.200}")
    return body


def list_tools(
    base_url: str,
    timeouts: Timeouts | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[McpTool, ...]:
    """The tools of an MCP environment server, from a ``ListToolsAction`` step.

    The step (``{"type": "list_tools"}``) goes over a JSON ``/ws`` session opened for it
    and closed after: OpenEnv's ``MCPEnvironment`` answers it before any reset, and our
    transport does not speak the ``{"type": "mcp"}`` JSON-RPC message, whose
    ``tools/list`` gives the same list.

    Raises:
        ConfigurationError: The server lists no tools (or refused the step).
        TransportError: The session failed.
    """
    session = open_session(base_url, protocol="json", timeouts=timeouts, headers=headers)
    try:
        reply = session.step({"type": LIST_TOOLS})
    except ServerError as exc:
        raise ConfigurationError(
            f"{base_url} publishes CallToolAction as its action but refused to list its "
            f"tools ({exc}); pass your own codec="
        ) from exc
    finally:
        session.close()
    listed = reply.observation.get(TOOLS)
    if not isinstance(listed, list) or not listed:
        why = reply.metadata or reply.observation.get("metadata") or reply.observation
        raise ConfigurationError(
            f"{base_url} is an MCP tool server, and listing its tools gave none: {why!r:.300}"
        )
    return tuple(McpTool.from_listing(entry) for entry in listed)


def local_server(
    codec: Codec | None,
    server: str | None,
    provider: str | Provider | None,
    base_url: str | list[str] | None,
) -> str:
    """The server the local provider would start (and check ``server=`` against the rest).

    Raises:
        ConfigurationError: ``server=`` with ``base_url=`` or a non-local provider; or a
            generic env without a server to talk to.
    """
    local = provider is None or provider == "local"
    if server is not None:
        if base_url is not None or not (local or provider == "ray"):
            raise ConfigurationError(
                "server= names a server class to start locally or on Ray: it excludes "
                "base_url= and any provider but 'local' and 'ray'"
            )
        return server
    if codec is not None:
        return codec.name
    if base_url is None and local:
        raise ConfigurationError(
            "openenv/Generic-v0 needs a server: base_url='http://host:port' (one that runs) "
            "or server='package.module:Class' (started locally)"
        )
    return GENERIC


def serves_seeded(
    server: str, provider: str | Provider | None, base_url: str | list[str] | None
) -> bool:
    """Whether seeds are known to be honoured: one of our servers, started by us.

    ``server`` is what :func:`local_server` returned. Our Wordle, Echo and Catch servers
    replay an episode exactly from its seed; a server at ``base_url``, one started from
    ``server="package.module:Class"`` or by a custom provider may ignore seeds (TextArena,
    OpenSpiel), so its determinism is that server's, not ours.
    """
    ours = provider is None or provider in ("local", "docker", "ray")
    return base_url is None and ours and server.lower() in known_envs()


def marked_spec(spec: EnvSpec | None, seeded: bool) -> EnvSpec | None:
    """``spec``, or a copy with ``nondeterministic=True`` when seeds may not be honoured.

    Gymnasium's flag is per id, but determinism depends on the server an env talks to:
    ``make("openenv/Wordle-v0", base_url=...)`` reports what that server may do, so
    ``check_env`` does not demand a determinism the server never promised.
    """
    if spec is None or seeded or spec.nondeterministic:
        return spec
    return dataclasses.replace(spec, nondeterministic=True)


def bind_schema(
    codec: Codec, base_url: str, timeout: float | None, headers: Mapping[str, str] | None
) -> None:
    """Tell a codec that speaks several wire layouts which one the server has.

    Reads ``GET /schema`` (:attr:`Codec.bind_schema <openenv_gym.spaces.Codec>`); a server
    that publishes none leaves the codec to pick from the server's first reply.
    """
    if codec.bind_schema is None:
        return
    try:
        schema = _get_schema(base_url, timeout, headers)
    except (ConfigurationError, RemoteProtocolError) as exc:
        logger.debug("no schema from %s (%s): the first reply picks the layout", base_url, exc)
        return
    codec.bind_schema(schema)


def choose_codec(
    env: str,
    codec: Codec | None,
    action_fields: FieldSpaces | None,
    observation_fields: FieldSpaces | None,
    *,
    tool: str | None = None,
) -> Codec | None:
    """The codec to use, or None when it must be built from the server's ``/schema``.

    Raises:
        ConfigurationError: Unknown env, or ``*_fields=`` / ``tool=`` where no schema is
            read.
    """
    generic = env.lower() == GENERIC
    if (action_fields is not None or observation_fields is not None or tool is not None) and (
        codec is not None or not generic
    ):
        raise ConfigurationError(
            "action_fields= / observation_fields= / tool= refine the spaces "
            "openenv/Generic-v0 builds from the server's /schema; they do not apply with a "
            "known env or codec="
        )
    if codec is not None or generic:
        return codec
    return codec_for(env)


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
        render_mode: ``None`` or ``"ansi"``.
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

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
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
        render_mode: Literal["ansi"] | None = None,
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
        check_episode_args(max_episode_steps, render_mode, codec, headers)
        self._on_server_loss = check_on_server_loss(on_server_loss)
        chosen = choose_codec(env, codec, action_fields, observation_fields, tool=tool)
        name = local_server(chosen, server, provider, base_url)
        self._seeded = serves_seeded(name, provider, base_url)
        self.render_mode = render_mode
        self.max_episode_steps = max_episode_steps
        self._session: Session | None = None
        self._last: ObservationReceived | None = None
        self._elapsed = 0
        self._needs_reset = True
        self._timeouts = Timeouts.of(timeouts)
        self._protocol = protocol
        self._given = (headers, token)
        self._provider = make_provider(
            name, provider=provider, base_url=base_url, **provider_options
        )
        try:
            url = self._provider.start()[0]
            headers = self._headers = headers_for_server(self._provider, 0, headers, token)
            if chosen is None:
                schema = fetch_schema(url, timeout=self._timeouts.connect, headers=headers)
                chosen = codec_from_schema(
                    schema,
                    action_fields=action_fields,
                    observation_fields=observation_fields,
                    tool=tool,
                )
            elif chosen.bind_schema is not None:
                bind_schema(chosen, url, self._timeouts.connect, headers)
            self._session = open_session(
                url, protocol=protocol, timeouts=self._timeouts, headers=headers
            )
        except BaseException:
            self._provider.close()
            raise
        self.codec = chosen
        self.observation_space = chosen.observation_space
        self.action_space = chosen.action_space
        self.base_url = url
        self.protocol: str = self._session.protocol
        """``"batch"`` or ``"json"``: what the session speaks."""

    @property
    def spec(self) -> EnvSpec | None:
        """The ``EnvSpec`` that ``gymnasium.make`` set.

        ``nondeterministic`` is True when determinism depends on the server: any server
        but our own Wordle, Echo and Catch started by us (see :func:`serves_seeded`).
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
        return open_session(
            url, protocol=self.protocol, timeouts=self._timeouts, headers=self._headers
        )

    def state(self) -> dict[str, Any]:
        """The server-side state (``episode_id``, ``step_count``, env fields)."""
        return self.session.state()

    def render(self) -> str | None:
        """``render_mode="ansi"``: the current observation as text."""
        if self.render_mode != "ansi" or self._last is None:
            return None
        last = self._last
        return self.codec.render(wire_observation(self.codec, last.observation, last.metadata))

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
