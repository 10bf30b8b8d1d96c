"""The keyword arguments of every env, defined once, and their checks.

:class:`EnvOptions` are the arguments :class:`~openenv_gym.env.OpenEnvEnv`,
:class:`~openenv_gym.vector.OpenEnvVectorEnv` and the asyncio envs
(:mod:`openenv_gym.aio`) all take; :class:`VectorOptions` adds what only a vector env
takes. ``gymnasium.make("openenv/...", **options)`` and ``make_vec`` pass them through.

:func:`settle` checks them all, before any server starts, and returns the
:class:`Settings` an engine runs with, its :class:`~openenv_gym.assemble.Recipe` (what
to set up) included. It is the one place a ``Recipe`` is built from arguments
(:func:`recipe`).
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast

from gymnasium.vector import AutoresetMode

from openenv_gym.assemble import Recipe, check_episode_args, check_on_server_loss
from openenv_gym.config import (
    AutoresetModeName,
    OnServerLoss,
    ProtocolName,
    Timeouts,
    check_count,
)
from openenv_gym.exceptions import ArgumentTypeError, ConfigurationError
from openenv_gym.providers import Provider
from openenv_gym.spaces import Codec, FieldSpaces
from openenv_gym.transport.session import resolve_protocol

__all__ = [
    "ENV_OPTIONS",
    "VECTOR_OPTIONS",
    "EnvOptions",
    "Settings",
    "VectorOptions",
    "parse_autoreset_mode",
    "recipe",
    "settle",
]


class EnvOptions(TypedDict, total=False):
    """Keyword arguments of every env: the single, the vector and the asyncio envs.

    Attributes:
        base_url: Existing servers: one URL, or a list (a vector env's sub-envs are
            spread over them in order). Default: start local servers.
        provider: Where servers come from: ``"local"``, ``"docker"``, ``"ray"``,
            ``"url"`` or a :class:`~openenv_gym.providers.Provider`.
        protocol: ``"auto"`` (batched where the server offers it, else OpenEnv's JSON
            ``/ws``), ``"batch"``, ``"json"`` (default: ``OPENENV_GYM_PROTOCOL``, else
            auto).
        timeouts: :class:`~openenv_gym.config.Timeouts` or a mapping of its fields.
        max_episode_steps: Truncate episodes after this many steps, as
            ``gymnasium.wrappers.TimeLimit`` (None: never).
        render_mode: ``None``, ``"ansi"`` (the observation as text) or ``"rgb_array"`` (a
            picture, for envs that have one: Catch; what ``gymnasium.wrappers.RecordVideo``
            records). A vector env's ``render()`` gives one frame per sub-env.
        codec: Your own spaces and conversions, for servers our codecs do not know.
        headers: Extra HTTP headers for the WebSocket upgrades and ``GET /schema``.
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
        token: The bearer token of servers we did not start (one, or one per
            ``base_url``), sent as ``Authorization: Bearer <token>`` (default:
            ``OPENENV_GYM_TOKEN``). Servers a provider starts get a fresh token each,
            which the env sends without being told.
        on_server_loss: ``"raise"`` (default): a lost connection fails its sub-envs with
            :class:`~openenv_gym.exceptions.ConnectionLostError` (a vector env raises
            them in an :class:`~openenv_gym.exceptions.EnvErrorGroup`). ``"restart"``:
            the env starts the server again if it died (a server its provider started)
            and reconnects; the step that lost it returns each affected episode as
            truncated (the last observation, ``truncated=True``,
            ``info["server_lost"] = True``), a reset that lost it is sent again
            (``docs/reliability.md``).
        provider_options: More arguments of the provider (``provider="ray"``:
            ``placement=``, ``num_cpus=``, ``runtime_env=``...; ``docs/scale-out.md``).
            They may also be given as keyword arguments of their own.
    """

    base_url: str | list[str] | None
    provider: str | Provider | None
    protocol: ProtocolName | None
    timeouts: Timeouts | Mapping[str, float | None] | None
    max_episode_steps: int | None
    render_mode: Literal["ansi", "rgb_array"] | None
    codec: Codec | None
    headers: Mapping[str, str] | None
    server: str | None
    action_fields: FieldSpaces | None
    observation_fields: FieldSpaces | None
    tool: str | None
    token: str | Sequence[str | None] | None
    on_server_loss: OnServerLoss
    provider_options: Mapping[str, Any]


class VectorOptions(EnvOptions, total=False):
    """Keyword arguments of a vector env: :class:`EnvOptions` and these.

    Attributes:
        num_servers: Server processes K, local or one per container (default 1, or from
            ``envs_per_server``).
        envs_per_server: Sub-envs per server; K = ceil(N / envs_per_server).
        envs_per_container: Another name for ``envs_per_server`` (with
            ``provider="docker"`` each container runs one server).
        autoreset_mode: :class:`gymnasium.vector.AutoresetMode`, or its name or value in
            any case (default NEXT_STEP).
        batch_size: Default number of sub-envs ``recv`` waits for (default N).
        frame_size: Most sub-envs per batched frame (default None: one frame per server
            and operation). Smaller frames let the client decode the first replies while
            the server computes the next ones, but each frame costs a round of fixed
            work on both sides; one frame per server is usually the fastest
            (``benchmarks/README.md`` compares them).
    """

    num_servers: int | None
    envs_per_server: int | None
    envs_per_container: int | None
    autoreset_mode: AutoresetMode | AutoresetModeName
    batch_size: int | None
    frame_size: int | None


ENV_OPTIONS = frozenset(EnvOptions.__annotations__)
"""The names of :class:`EnvOptions`."""

VECTOR_OPTIONS = frozenset(VectorOptions.__annotations__) - ENV_OPTIONS
"""The names only a vector env takes."""


def parse_autoreset_mode(value: Any) -> AutoresetMode:
    """An :class:`~gymnasium.vector.AutoresetMode` from itself, its value or its name.

    Member names are matched in any case, so ``"SAME_STEP"`` (as Gymnasium's docs spell
    it), ``"same_step"`` and ``"SameStep"`` (the value) all give ``SAME_STEP``.

    >>> parse_autoreset_mode("SAME_STEP") is AutoresetMode.SAME_STEP
    True

    Raises:
        ConfigurationError: Anything else; the message lists the valid values.
    """
    if isinstance(value, AutoresetMode):
        return value
    if isinstance(value, str):
        for mode in AutoresetMode:
            if value.lower() in (mode.name.lower(), mode.value.lower()):
                return mode
    names = ", ".join(repr(mode.name) for mode in AutoresetMode)
    raise ConfigurationError(
        f"unknown autoreset_mode {value!r}: use an AutoresetMode member or one of {names} "
        "(any case)"
    )


@dataclass(frozen=True, slots=True)
class Settings:
    """Checked options: what an engine runs with.

    Attributes:
        num_envs: Sub-environments (1 for a single env).
        recipe: What to set up (:func:`~openenv_gym.assemble.assemble`).
        protocol: ``"auto"``, ``"batch"`` or ``"json"`` (resolved).
        timeouts: The client's timeouts.
        max_episode_steps: The time limit (None: none).
        render_mode: ``None``, ``"ansi"`` or ``"rgb_array"``.
        on_server_loss: ``"raise"`` or ``"restart"``.
        autoreset_mode: A vector env's autoreset mode (NEXT_STEP for a single env).
        batch_size: What ``recv`` waits for by default.
        frame_size: Most sub-envs per batched frame (None: one frame per server).
    """

    num_envs: int
    recipe: Recipe
    protocol: str
    timeouts: Timeouts
    max_episode_steps: int | None
    render_mode: str | None
    on_server_loss: OnServerLoss
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP
    batch_size: int = 1
    frame_size: int | None = None


def recipe(
    env: str,
    options: Mapping[str, Any],
    *,
    timeouts: Timeouts | None = None,
    provider_options: Mapping[str, Any] | None = None,
) -> Recipe:
    """The :class:`~openenv_gym.assemble.Recipe` of ``env`` with these options.

    ``options`` holds :class:`EnvOptions` (those that decide the servers and spaces are
    read; absent ones take their defaults); ``provider_options`` the provider's own.
    """
    return Recipe(
        env,
        codec=options.get("codec"),
        action_fields=options.get("action_fields"),
        observation_fields=options.get("observation_fields"),
        tool=options.get("tool"),
        server=options.get("server"),
        provider=options.get("provider"),
        base_url=options.get("base_url"),
        provider_options=dict(provider_options or {}),
        headers=options.get("headers"),
        token=options.get("token"),
        timeouts=timeouts if timeouts is not None else Timeouts.of(options.get("timeouts")),
    )


def settle(env: str, options: Mapping[str, Any], num_envs: int | None = None) -> Settings:
    """Check ``options`` (and ``num_envs``, for a vector env; None: a single env).

    Everything is checked here, before any server starts. Keyword arguments that are not
    options are the provider's own (joined with ``provider_options``); a single env
    passes a vector env's options on to its provider, as it always did.

    Raises:
        ConfigurationError: A value out of range, or options that do not go together.
        ArgumentTypeError: A value of the wrong type.
    """
    vector = num_envs is not None
    known = ENV_OPTIONS | VECTOR_OPTIONS if vector else ENV_OPTIONS
    given = {k: v for k, v in options.items() if k in known}
    extra = {k: v for k, v in options.items() if k not in known}
    passed = given.pop("provider_options", None) or {}
    if not isinstance(passed, Mapping):
        raise ArgumentTypeError(f"provider_options must be a mapping, got {reprlib.repr(passed)}")
    provider_options = {**passed, **extra}
    if vector:
        return _vector_settings(env, cast(int, num_envs), given, provider_options)
    max_episode_steps = given.get("max_episode_steps")
    render_mode = given.get("render_mode")
    check_episode_args(
        max_episode_steps, render_mode, given.get("codec"), given.get("headers"), env=env
    )
    on_server_loss = check_on_server_loss(given.get("on_server_loss", "raise"))
    timeouts = Timeouts.of(given.get("timeouts"))
    protocol = resolve_protocol(given.get("protocol"))
    return Settings(
        1,
        recipe(env, given, timeouts=timeouts, provider_options=provider_options),
        protocol,
        timeouts,
        max_episode_steps,
        render_mode,
        on_server_loss,
    )


def _vector_settings(
    env: str,
    num_envs: int,
    given: dict[str, Any],
    provider_options: dict[str, Any],
) -> Settings:
    check_count(num_envs, "num_envs", optional=False)
    for arg in ("num_servers", "envs_per_server", "envs_per_container", "batch_size", "frame_size"):
        check_count(given.get(arg), arg)
    check_episode_args(
        given.get("max_episode_steps"),
        given.get("render_mode"),
        given.get("codec"),
        given.get("headers"),
        env=env,
    )
    on_server_loss = check_on_server_loss(given.get("on_server_loss", "raise"))
    mode = parse_autoreset_mode(given.get("autoreset_mode", AutoresetMode.NEXT_STEP))
    batch_size = given.get("batch_size") or num_envs
    check_batch_size(batch_size, num_envs)
    frame_size = given.get("frame_size")
    if frame_size is not None and frame_size < 1:
        raise ConfigurationError(f"frame_size must be >= 1 or None, got {frame_size}")
    timeouts = Timeouts.of(given.get("timeouts"))
    envs_per_server = given.get("envs_per_server")
    if given.get("envs_per_container") is not None:
        if envs_per_server is not None:
            raise ConfigurationError("give envs_per_server or envs_per_container, not both")
        envs_per_server = given["envs_per_container"]
    servers = count_servers(
        num_envs, given.get("num_servers"), envs_per_server, given.get("base_url")
    )
    protocol = resolve_protocol(given.get("protocol"))
    made = recipe(
        env,
        given,
        timeouts=timeouts,
        provider_options={**provider_options, "num_servers": servers},
    )
    return Settings(
        num_envs,
        made,
        protocol,
        timeouts,
        given.get("max_episode_steps"),
        given.get("render_mode"),
        on_server_loss,
        mode,
        batch_size,
        frame_size,
    )


def check_batch_size(batch_size: int, num_envs: int) -> int:
    """``batch_size`` if it is in ``[1, num_envs]``.

    Raises:
        ConfigurationError: Out of range.
    """
    if not 1 <= batch_size <= num_envs:
        raise ConfigurationError(f"batch_size must be in [1, {num_envs}], got {batch_size}")
    return batch_size


def count_servers(
    num_envs: int,
    num_servers: int | None,
    envs_per_server: int | None,
    base_url: str | list[str] | None,
) -> int:
    """How many servers a vector env starts (K).

    Raises:
        ConfigurationError: Options that do not go together, or K out of range.
    """
    if base_url is not None and (num_servers or envs_per_server):
        raise ConfigurationError("num_servers / envs_per_server apply to local servers only")
    if num_servers is not None and envs_per_server is not None:
        raise ConfigurationError("give num_servers or envs_per_server, not both")
    if envs_per_server is not None:
        if envs_per_server < 1:
            raise ConfigurationError(f"envs_per_server must be >= 1, got {envs_per_server}")
        return math.ceil(num_envs / envs_per_server)
    servers = num_servers or 1
    if servers < 1 or servers > num_envs:
        raise ConfigurationError(f"num_servers must be in [1, num_envs={num_envs}], got {servers}")
    return servers
