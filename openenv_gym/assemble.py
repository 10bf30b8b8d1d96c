"""Setting an env up: from the arguments of ``make`` to running servers and open sessions.

The single env (:class:`~openenv_gym.env.OpenEnvEnv`), the vector env
(:class:`~openenv_gym.vector.OpenEnvVectorEnv`) and TRL's ``environment_factory`` (its
shared servers) all set up through :func:`assemble`, which runs the one sequence:

1. the codec (:func:`choose_codec`) and the server a provider would start
   (:func:`local_server`), both checked before anything starts;
2. the provider (:func:`~openenv_gym.providers.make_provider`), and its servers started;
3. per server, the headers and bearer token to send (:func:`headers_for_server`);
4. the codec built from the first server's ``GET /schema`` (:func:`fetch_schema`) when
   none was chosen, or told which wire layout the server has (:func:`bind_schema`);
5. the sessions opened (the caller says how: one session, or shards of many).

Whatever fails on the way, the provider is closed (servers it started are stopped) before
the error propagates. The other functions here are the checks and schema reads the envs
share.
"""

from __future__ import annotations

import dataclasses
import logging
import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast, overload

from gymnasium.envs.registration import EnvSpec

from openenv_gym import envs
from openenv_gym._http import get_json, http_base, post_json, with_token
from openenv_gym.config import OnServerLoss, Timeouts, check_count
from openenv_gym.exceptions import (
    ArgumentTypeError,
    ConfigurationError,
    ConnectError,
    OpenEnvGymError,
    RemoteProtocolError,
    ServerError,
)
from openenv_gym.providers import Provider, make_provider
from openenv_gym.spaces import (
    GENERIC,
    LIST_TOOLS,
    TOOLS,
    Codec,
    FieldSpaces,
    McpTool,
    codec_for,
    codec_from_schema,
    is_mcp_schema,
    known_envs,
)
from openenv_gym.transport.session import open_session

__all__ = [
    "RENDER_MODES",
    "Assembly",
    "Connect",
    "Recipe",
    "Started",
    "assemble",
    "bind_schema",
    "check_episode_args",
    "check_on_server_loss",
    "choose_codec",
    "fetch_schema",
    "headers_for_server",
    "list_tools",
    "local_server",
    "marked_spec",
    "reconnect",
    "render_modes",
    "serves_seeded",
    "wrong_id_hint",
]

# the set-up logs where it did when it lived in env.py (docs/logging.md)
logger = logging.getLogger("openenv_gym.env")

C = TypeVar("C")
Headers = dict[str, str] | None

Connect = Callable[[list[str], list[Headers]], C]
"""``connect(urls, headers) -> connection``: open the sessions on the started servers
(``headers``: one per URL, bearer token included)."""


# ------------------------------------------------------------------ the set-up


@dataclass(frozen=True, slots=True)
class Recipe:
    """What to set up: the arguments of ``make`` that decide the servers and the spaces.

    Attributes:
        env: ``"wordle"``, ``"echo"``, ``"catch"``... or ``"generic"`` (spaces from the
            server's ``/schema``).
        codec: The caller's own codec (None: the env's, or from the schema).
        action_fields: ``env="generic"``: the action spaces to use instead of the schema's.
        observation_fields: ``env="generic"``: the observation spaces likewise.
        tool: ``env="generic"`` on an MCP server: act with this one tool.
        server: The server class to start, ``"package.module:Class"`` (None: the env's).
        provider: ``"local"``, ``"docker"``, ``"ray"``, ``"url"``, a
            :class:`~openenv_gym.providers.Provider`, or None (from ``base_url``).
        base_url: Existing servers (None: start them).
        provider_options: More arguments of the provider (``num_servers=``, Ray's
            ``placement=``...).
        headers: Extra HTTP headers for every server.
        token: The bearer token of servers we did not start: one for all, or one per
            server (a provider's own servers get theirs).
        timeouts: The connect timeout also bounds the ``/schema`` reads.
    """

    env: str = "wordle"
    codec: Codec | None = None
    action_fields: FieldSpaces | None = None
    observation_fields: FieldSpaces | None = None
    tool: str | None = None
    server: str | None = None
    provider: str | Provider | None = None
    base_url: str | list[str] | None = None
    provider_options: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] | None = None
    token: str | Sequence[str | None] | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)


@dataclass(frozen=True, slots=True)
class Started:
    """Servers started, nothing connected (:func:`assemble` without ``connect``).

    Attributes:
        provider: Owns the servers: the caller closes it when done.
        urls: One base URL per server.
        seeded: Whether seeds are known to be honoured (:func:`serves_seeded`).
    """

    provider: Provider
    urls: list[str]
    seeded: bool


@dataclass(frozen=True, slots=True)
class Assembly(Started, Generic[C]):
    """Servers started and connected (:func:`assemble` with ``connect``).

    Attributes:
        tokens: Per server, the ``token=`` given for it (headers are rebuilt from it and
            the provider's token after a restart: :func:`headers_for_server`).
        headers: Per server, the headers the sessions were opened with.
        codec: The codec: the chosen one, or built from the first server's schema.
        connection: What ``connect`` returned.
    """

    tokens: list[str | None]
    headers: list[Headers]
    codec: Codec
    connection: C


@overload
def assemble(recipe: Recipe) -> Started: ...
@overload
def assemble(recipe: Recipe, connect: Connect[C]) -> Assembly[C]: ...
def assemble(recipe: Recipe, connect: Connect[C] | None = None) -> Started | Assembly[C]:
    """Start the servers of ``recipe`` and, given ``connect``, its codec and sessions.

    Without ``connect`` it stops once the servers run (no ``/schema`` read, nothing
    opened). On any failure after the provider is made, the provider is closed before the
    error propagates: nothing is left running.

    Raises:
        ConfigurationError: Unknown env, or arguments that do not go together (checked
            before any server starts), or no schema to build spaces from.
        ArgumentTypeError: ``provider=`` or ``base_url=`` of a wrong type.
        ProviderError: A server could not be started.
        TransportError: A server could not be reached, or a session not opened.
    """
    codec = choose_codec(
        recipe.env,
        recipe.codec,
        recipe.action_fields,
        recipe.observation_fields,
        tool=recipe.tool,
    )
    hosts_app = any(key in recipe.provider_options for key in ("app", "app_dir"))
    kind = recipe.provider
    image = recipe.provider_options.get("image")
    if kind is None and recipe.base_url is None and image is not None:
        kind = "docker"  # image= alone: that image in Docker (docs/official-envs.md)
    name = local_server(codec, recipe.server, kind, recipe.base_url, app=hosts_app)
    seeded = serves_seeded(name, kind, recipe.base_url) and image is None
    provider = make_provider(
        name, provider=kind, base_url=recipe.base_url, **recipe.provider_options
    )
    try:
        urls = list(provider.start())
        if connect is None:
            return Started(provider, urls, seeded)
        tokens = _tokens_per_server(recipe.token, len(urls))
        headers = [
            headers_for_server(provider, k, recipe.headers, token) for k, token in enumerate(tokens)
        ]
        timeout = recipe.timeouts.connect
        if codec is None:
            schema = fetch_schema(urls[0], timeout=timeout, headers=headers[0])
            codec = codec_from_schema(
                schema,
                action_fields=recipe.action_fields,
                observation_fields=recipe.observation_fields,
                tool=recipe.tool,
            )
        elif codec.bind_schema is not None:
            bind_schema(codec, urls[0], timeout, headers[0])
        connection = connect(urls, headers)
    except BaseException:
        provider.close()
        raise
    return Assembly(provider, urls, seeded, tokens, headers, codec, connection)


def reconnect(
    provider: Provider,
    index: int,
    url: str,
    connect: Callable[[str], C],
    *,
    restart_hung: bool = True,
) -> tuple[str, C]:
    """After a lost connection to server ``index`` (at ``url``): its new URL and connection.

    The one recovery of every env (``on_server_loss="restart"``): the server is started
    again if it is gone; if it runs but does not answer (hung) or refuses, it is
    restarted and connected again, unless ``restart_hung`` is False (after a timeout: a
    server that is merely slow is not restarted). Blocking.

    Raises:
        ProviderError: The server is gone and its provider cannot start it again.
        OpenEnvGymError: The new connection failed.
    """
    url = url if provider.alive(index) else provider.restart(index)
    try:
        return url, connect(url)
    except OpenEnvGymError:  # it runs but does not answer (hung), or refuses
        if not restart_hung:
            raise
        url = provider.restart(index)
        return url, connect(url)


def wrong_id_hint(recipe: Recipe, seeded: bool, url: str) -> str | None:
    """What to add to an error that may mean the server is not the env asked for.

    For a known env (``openenv/Wordle-v0``...) on a server we did not start: its server
    refusing our actions, or replies our codec cannot read, usually mean the id does not
    match the server. None where the env is ours to start, or spaces are the caller's or
    the server's own (a codec, ``openenv/Generic-v0``).
    """
    if recipe.codec is not None or seeded:
        return None
    record = envs.environment(recipe.env.lower())
    if record is None:
        return None
    return (
        f"(is {url} a {record.name} server? {record.env_id} speaks {record.name}'s actions "
        "and observations; for any other OpenEnv server use openenv/Generic-v0, whose "
        "spaces come from the server's /schema)"
    )


# ------------------------------------------------------------------ checks (no I/O)


RENDER_MODES = ("ansi", "rgb_array")
"""The render modes of the single and the vector env (``rgb_array``: envs with a picture)."""


def check_episode_args(
    max_episode_steps: int | None,
    render_mode: str | None,
    codec: Any = None,
    headers: Any = None,
    env: str | None = None,
) -> None:
    """Validate the arguments the single and the vector env share.

    ``render_mode="rgb_array"`` needs a picture: ``codec`` (or else the known codec of
    ``env``) must have :attr:`~openenv_gym.spaces.Codec.render_rgb`.

    Raises:
        ConfigurationError: ``max_episode_steps`` < 1, an unknown render mode, or
            ``rgb_array`` for an env without a picture.
        ArgumentTypeError: ``codec`` not a :class:`~openenv_gym.spaces.Codec`, ``headers``
            not a mapping.
    """
    check_count(max_episode_steps, "max_episode_steps")
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ConfigurationError(
            f"render_mode must be None, 'ansi' or 'rgb_array', got {reprlib.repr(render_mode)}"
        )
    if codec is not None and not isinstance(codec, Codec):
        raise ArgumentTypeError(f"codec must be a Codec or None, got {reprlib.repr(codec)}")
    if render_mode == "rgb_array" and not _has_picture(codec, env):
        with_picture = [name for name in known_envs() if codec_for(name).render_rgb is not None]
        raise ConfigurationError(
            f"render_mode='rgb_array' needs an env with a picture ({', '.join(with_picture)}; "
            "or a codec with render_rgb); use 'ansi' for text"
        )
    if headers is not None and not isinstance(headers, Mapping):
        raise ArgumentTypeError(f"headers must be a mapping or None, got {reprlib.repr(headers)}")


def render_modes(codec: Codec) -> list[str]:
    """The render modes of an env with this codec: ``ansi``, and ``rgb_array`` if it has a picture.

    An env's ``metadata["render_modes"]`` once it is made.
    """
    return list(RENDER_MODES) if codec.render_rgb is not None else ["ansi"]


def _has_picture(codec: Codec | None, env: str | None) -> bool:
    if codec is not None:
        return codec.render_rgb is not None
    if env is None or env.lower() not in known_envs():
        return False  # a codec made from a server's /schema has no picture
    return codec_for(env.lower()).render_rgb is not None


ON_SERVER_LOSS = ("raise", "restart")


def check_on_server_loss(on_server_loss: str) -> OnServerLoss:
    """Validate ``on_server_loss=`` (the single and the vector env's).

    Raises:
        ConfigurationError: Not ``"raise"`` or ``"restart"``.
    """
    if on_server_loss in ON_SERVER_LOSS:
        return cast(OnServerLoss, on_server_loss)
    raise ConfigurationError(f"on_server_loss must be 'raise' or 'restart', got {on_server_loss!r}")


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


def local_server(
    codec: Codec | None,
    server: str | None,
    provider: str | Provider | None,
    base_url: str | list[str] | None,
    *,
    app: bool = False,
) -> str:
    """The server the local provider would start (and check ``server=`` against the rest).

    ``app``: the provider is given an OpenEnv app module to host (``app=`` / ``app_dir=``),
    which is the server of a generic env.

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
    if base_url is None and local and not app:
        raise ConfigurationError(
            "openenv/Generic-v0 needs a server: base_url='http://host:port' (one that runs), "
            "server='package.module:Class' or app='module:app' (started locally)"
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


def headers_for_server(
    provider: Provider, index: int, headers: Mapping[str, str] | None, token: str | None
) -> dict[str, str] | None:
    """The headers for server ``index`` of ``provider``: ``headers`` and a bearer token.

    The token is the one the provider gave the server (a server it started), else
    ``token``, else ``OPENENV_GYM_TOKEN`` unless ``headers`` carry an ``Authorization``
    (:func:`~openenv_gym._http.with_token`).
    """
    return with_token(headers, provider.token(index) or token)


def _tokens_per_server(token: str | Sequence[str | None] | None, count: int) -> list[str | None]:
    if token is None or isinstance(token, str):
        return [token] * count
    tokens = list(token)
    if len(tokens) != count:
        raise ConfigurationError(
            f"token= lists {len(tokens)} tokens for {count} servers: give one, or one per base_url"
        )
    return tokens


# ------------------------------------------------------------------ GET /schema


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
    """The tools of an MCP environment server, as OpenEnv's ``MCPToolClient`` lists them.

    First a ``ListToolsAction`` step (``{"type": "list_tools"}``) over a JSON ``/ws``
    session opened for it and closed after: OpenEnv's ``MCPEnvironment`` answers it before
    any reset. A server whose action model is its own subclass of ``CallToolAction``
    (upstream's finqa) validates every step as that model and refuses the step; its tools
    are then read from MCP's ``tools/list`` on ``POST /mcp``, which every OpenEnv server
    answers (and ours).

    Raises:
        ConfigurationError: The server lists no tools (or refused both ways).
        TransportError: The session failed.
    """
    why: Any
    session = open_session(base_url, protocol="json", timeouts=timeouts, headers=headers)
    try:
        reply = session.step({"type": LIST_TOOLS})
    except ServerError as exc:
        refused: ServerError | None = exc
    else:
        refused = None
    finally:
        session.close()
    if refused is not None:
        listed, why = _mcp_tools_list(base_url, timeouts, headers)
        if listed is None:
            raise ConfigurationError(
                f"{base_url} publishes CallToolAction as its action but refused to list its "
                f"tools (the list_tools step: {refused}; POST /mcp tools/list: {why}); pass "
                "your own codec="
            ) from refused
    else:
        listed = reply.observation.get(TOOLS)
        why = reply.metadata or reply.observation.get("metadata") or reply.observation
    if not isinstance(listed, list) or not listed:
        raise ConfigurationError(
            f"{base_url} is an MCP tool server, and listing its tools gave none: {why!r:.300}"
        )
    return tuple(McpTool.from_listing(entry) for entry in listed)


def _mcp_tools_list(
    base_url: str, timeouts: Timeouts | None, headers: Mapping[str, str] | None
) -> tuple[list[Any] | None, str]:
    """MCP ``tools/list`` over ``POST /mcp``: the tool entries, or None and why not."""
    url = f"{http_base(base_url)}/mcp"
    request = {"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 1}
    timeout = timeouts.connect if timeouts is not None else 10.0
    try:
        status, body = post_json(url, request, timeout, headers=headers)
    except (ConnectError, RemoteProtocolError) as exc:
        return None, str(exc)
    result = body.get("result") if isinstance(body, dict) else None
    tools = result.get("tools") if isinstance(result, dict) else None
    if status != 200 or not isinstance(tools, list):
        error = body.get("error") if isinstance(body, dict) else None
        return None, f"HTTP {status}" + (f", {error!r:.200}" if error else "")
    return tools, "tools/list"


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
