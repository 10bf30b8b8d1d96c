"""Settings: timeouts and the ``OPENENV_GYM_*`` environment variables, read here only.

Every environment variable the package reads is listed in :data:`ENV_VARS` (and in
``docs/configuration.md``). Times are float seconds; ``None`` disables a timeout.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from openenv_gym.exceptions import ArgumentTypeError, ConfigurationError

__all__ = [
    "ENV_VARS",
    "AutoresetModeName",
    "OnServerLoss",
    "ProtocolName",
    "Timeouts",
    "check_count",
    "check_seconds",
    "env_count",
    "env_flag",
    "env_float",
    "env_str",
    "parse_count",
    "parse_seconds",
    "resolve_token",
]

ProtocolName = Literal["auto", "batch", "json"]
"""Values of ``protocol=`` (``None``: ``OPENENV_GYM_PROTOCOL``, else ``"auto"``)."""

OnServerLoss = Literal["raise", "restart"]
"""Values of ``on_server_loss=``."""

AutoresetModeName = Literal[
    "next_step",
    "same_step",
    "disabled",
    "NEXT_STEP",
    "SAME_STEP",
    "DISABLED",
    "NextStep",
    "SameStep",
    "Disabled",
]
"""Spellings of ``autoreset_mode=`` besides :class:`gymnasium.vector.AutoresetMode` itself:
its member names (any case) and its values."""

ENV_VARS: dict[str, str] = {
    "OPENENV_GYM_CONNECT_TIMEOUT": "seconds to open a connection (default 10)",
    "OPENENV_GYM_STEP_TIMEOUT": "seconds to wait for a reset/step/state reply (default 60)",
    "OPENENV_GYM_CLOSE_TIMEOUT": "seconds to wait for a clean close (default 0.5)",
    "OPENENV_GYM_START_TIMEOUT": "seconds for a local server to become healthy (default 30)",
    "OPENENV_GYM_PROTOCOL": "auto | batch | json: wire protocol of new sessions (default auto)",
    "OPENENV_GYM_NO_UVLOOP": "1: servers use the asyncio loop even when uvloop is installed",
    "OPENENV_GYM_PYTHON": "interpreter that runs local servers (default: the current one)",
    "OPENENV_GYM_SPIN_US": "µs a wait for a reply polls without sleeping first (default 1000)",
    "OPENENV_GYM_CACHE_DIR": (
        "wheelhouses of derived Docker images (default $XDG_CACHE_HOME/openenv-gym, "
        "else ~/.cache/openenv-gym)"
    ),
    # `openenv-gym serve` (ServerConfig.from_env); a flag wins over its variable
    "OPENENV_GYM_TOKEN": (
        "bearer token: serve demands it; clients send it (default token=) and give it to "
        "the local and Docker servers they start (default: none; a fresh one per server)"
    ),
    "OPENENV_GYM_MODE": "serve: simulation | production: HTTP /reset /step /state or not",
    "OPENENV_GYM_MAX_SESSIONS": "serve: most live environment instances (default 4096)",
    "OPENENV_GYM_MAX_FRAME": "serve: largest WebSocket message, bytes (default 16 MiB)",
    "OPENENV_GYM_MAX_FRAGMENTS": "serve: most frames one WebSocket message comes in (default 1024)",
    "OPENENV_GYM_MAX_VALUES": "serve: most values one message or JSON body decodes into (65536)",
    "OPENENV_GYM_MAX_HTTP_SESSIONS": "serve: most MCP sessions over HTTP open at once (256)",
    "OPENENV_GYM_MAX_CONNECTIONS": "serve: open connections at once (default 8192)",
    "OPENENV_GYM_MAX_REQUEST_SLOTS": "serve: most slots one batched request names (default 8192)",
    "OPENENV_GYM_MAX_CONNECTION_SLOTS": "serve: most slots open on one connection (default 8192)",
    "OPENENV_GYM_IDLE_TIMEOUT": "serve: seconds a WebSocket may send nothing (default 900)",
    "OPENENV_GYM_HANDSHAKE_TIMEOUT": "serve: seconds to send a request head (default 10)",
    "OPENENV_GYM_MAX_BODY": "serve: largest HTTP request body, bytes (default 1 MiB)",
    "OPENENV_GYM_MAX_QUEUE_BYTES": "serve: received bytes waiting per connection (default 16 MiB)",
    "OPENENV_GYM_MAX_SEND_BUFFER": "serve: unsent bytes per connection (default 16 MiB)",
    "OPENENV_GYM_SEND_TIMEOUT": "serve: seconds a peer may take nothing we send (default 60)",
    "OPENENV_GYM_PING_INTERVAL": "serve: seconds between WebSocket pings (default 20)",
    "OPENENV_GYM_PING_TIMEOUT": "serve: seconds to wait for a pong (default 20)",
}


def env_str(name: str, default: str | None = None) -> str | None:
    """Read an ``OPENENV_GYM_*`` variable (empty counts as unset)."""
    if name not in ENV_VARS:  # pragma: no cover - guards against typos in this package
        raise KeyError(name)
    value = os.environ.get(name, "")
    return value if value else default


def resolve_token(token: str | None = None) -> str | None:
    """The bearer token to use: ``token`` if given, else ``OPENENV_GYM_TOKEN``, else None.

    The one place the default of every ``token=`` is decided: the clients' (``make``,
    ``make_vec``, ``open_session``, ``openenv-gym check``), the providers' (the token
    the servers they start demand) and ``openenv-gym serve``'s. An empty string counts
    as no token, as an empty variable does.
    """
    return token or env_str("OPENENV_GYM_TOKEN")


def env_float(name: str, default: float | None) -> float | None:
    """Read a float seconds variable; ``none`` / ``off`` disable it."""
    raw = env_str(name)
    return default if raw is None else parse_seconds(raw, name)


def env_count(name: str, default: int) -> int:
    """Read a positive integer variable (a count or a size in bytes)."""
    raw = env_str(name)
    return default if raw is None else parse_count(raw, name)


def parse_seconds(text: str, what: str) -> float | None:
    """Seconds from text: a number > 0, or ``none`` / ``off`` (None: disabled).

    >>> parse_seconds("2.5", "--idle-timeout"), parse_seconds("off", "--idle-timeout")
    (2.5, None)

    Raises:
        ConfigurationError: Naming ``what`` (a flag or a variable).
    """
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(f"{what}={text!r} is not a number of seconds") from None
    if not 0 < value < math.inf:
        raise ConfigurationError(f"{what} must be > 0 seconds (or none), got {text!r}")
    return value


def parse_count(text: str, what: str) -> int:
    """A positive integer from text (``16777216`` or ``16_777_216``).

    >>> parse_count("4_096", "--max-sessions")
    4096

    Raises:
        ConfigurationError: Naming ``what`` (a flag or a variable).
    """
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(f"{what}={text!r} is not an integer") from None
    if value <= 0:
        raise ConfigurationError(f"{what} must be a positive integer, got {text!r}")
    return value


def check_count(value: Any, name: str, *, optional: bool = True) -> int | None:
    """``value`` if it is a positive integer (or None, when ``optional``).

    >>> check_count(4, "num_servers"), check_count(None, "num_servers")
    (4, None)

    Raises:
        ArgumentTypeError: Not an integer (``bool`` included).
        ConfigurationError: An integer < 1.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ArgumentTypeError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_seconds(value: Any, name: str) -> float | None:
    """``value`` if it is a number of seconds > 0, or None (``math.inf`` is None: no limit).

    >>> check_seconds(2, "start_timeout"), check_seconds(None, "start_timeout")
    (2.0, None)
    >>> check_seconds(float("inf"), "step")

    Raises:
        ConfigurationError: Not a number > 0 (``bool``, strings and NaN included).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{name} must be a number of seconds > 0, or None; got {value!r}")
    return None if value == math.inf else float(value)


def env_flag(name: str) -> bool:
    """Read a boolean variable (``1``, ``true``, ``yes``, ``on``)."""
    return (env_str(name) or "").lower() in ("1", "true", "yes", "on")


def _timeout_from_env(name: str, default: float) -> Any:
    return field(default_factory=lambda: env_float(name, default))


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Client timeouts in seconds; ``None`` waits forever.

    A field not given comes from its ``OPENENV_GYM_*_TIMEOUT`` variable when that is set,
    else from the default: ``Timeouts(step=5)``, ``Timeouts.of({"step": 5})`` and
    ``timeouts={"step": 5}`` are the same (``docs/configuration.md``).

    Attributes:
        connect: Opening the WebSocket (TCP + TLS + upgrade); ``OPENENV_GYM_CONNECT_TIMEOUT``,
            default 10.
        step: Waiting for the reply to one reset / step / state; ``OPENENV_GYM_STEP_TIMEOUT``,
            default 60. Expiry is fatal for the session: OpenEnv replies carry no request id.
        close: Waiting for a polite close before the sockets are dropped (all of an
            env's sockets together, so a frozen server costs it once);
            ``OPENENV_GYM_CLOSE_TIMEOUT``, default 0.5 (a server answers in one round trip).
    """

    connect: float | None = _timeout_from_env("OPENENV_GYM_CONNECT_TIMEOUT", 10.0)
    step: float | None = _timeout_from_env("OPENENV_GYM_STEP_TIMEOUT", 60.0)
    close: float | None = _timeout_from_env("OPENENV_GYM_CLOSE_TIMEOUT", 0.5)

    def __post_init__(self) -> None:
        for name in ("connect", "step", "close"):  # checked; math.inf stored as None
            object.__setattr__(self, name, check_seconds(getattr(self, name), f"timeout {name!r}"))

    @classmethod
    def of(cls, timeouts: Timeouts | Mapping[str, float | None] | None) -> Timeouts:
        """``timeouts`` itself, or a :class:`Timeouts` of a mapping of its fields.

        Raises:
            ConfigurationError: Not a Timeouts, a mapping or None; an unknown field (an
                :class:`~openenv_gym.exceptions.ArgumentTypeError`, also a ``TypeError``).
        """
        if isinstance(timeouts, Timeouts):
            return timeouts
        if timeouts is not None and not isinstance(timeouts, Mapping):
            raise ConfigurationError(
                f"timeouts must be a Timeouts, a mapping of its fields or None, got {timeouts!r}"
            )
        return cls.from_env(**dict(timeouts or {}))

    @classmethod
    def from_env(cls, **overrides: Any) -> Timeouts:
        """``overrides``, then the ``OPENENV_GYM_*_TIMEOUT`` variables, then the defaults.

        The same as ``Timeouts(**overrides)``, with unknown fields refused as a
        :class:`~openenv_gym.exceptions.ConfigurationError`.
        """
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise ArgumentTypeError(  # a TypeError too, as the dataclass said before
                f"unknown timeout(s) {', '.join(map(repr, unknown))}: use {', '.join(known)}"
            )
        return cls(**overrides)
