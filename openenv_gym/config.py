"""Settings: timeouts and the ``OPENENV_GYM_*`` environment variables, read here only.

Every environment variable the package reads is listed in :data:`ENV_VARS` (and in
``docs/configuration.md``). Times are float seconds; ``None`` disables a timeout.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from openenv_gym.exceptions import ConfigurationError

__all__ = [
    "ENV_VARS",
    "Timeouts",
    "env_count",
    "env_flag",
    "env_float",
    "env_str",
    "parse_count",
    "parse_seconds",
]

ENV_VARS: dict[str, str] = {
    "OPENENV_GYM_CONNECT_TIMEOUT": "seconds to open a connection (default 10)",
    "OPENENV_GYM_STEP_TIMEOUT": "seconds to wait for a reset/step/state reply (default 60)",
    "OPENENV_GYM_CLOSE_TIMEOUT": "seconds to wait for a clean close (default 5)",
    "OPENENV_GYM_START_TIMEOUT": "seconds for a local server to become healthy (default 30)",
    "OPENENV_GYM_PROTOCOL": "auto | batch | json: wire protocol of new sessions (default auto)",
    "OPENENV_GYM_NO_UVLOOP": "1: servers use the asyncio loop even when uvloop is installed",
    "OPENENV_GYM_PYTHON": "interpreter that runs local servers (default: the current one)",
    # `openenv-gym serve` (ServerConfig.from_env); a flag wins over its variable
    "OPENENV_GYM_TOKEN": (
        "bearer token: serve demands it; clients send it (default token=) and give it to "
        "the local and Docker servers they start (default: none; a fresh one per server)"
    ),
    "OPENENV_GYM_MODE": "serve: simulation | production: HTTP /reset /step /state or not",
    "OPENENV_GYM_MAX_SESSIONS": "serve: most live environment instances (default 4096)",
    "OPENENV_GYM_MAX_FRAME": "serve: largest WebSocket message, bytes (default 16 MiB)",
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


def env_flag(name: str) -> bool:
    """Read a boolean variable (``1``, ``true``, ``yes``, ``on``)."""
    return (env_str(name) or "").lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Client timeouts in seconds; ``None`` waits forever.

    Attributes:
        connect: Opening the WebSocket (TCP + TLS + upgrade).
        step: Waiting for the reply to one reset / step / state. Expiry is fatal for
            the session: OpenEnv replies carry no request id.
        close: Waiting for a polite close before the socket is dropped.
    """

    connect: float | None = 10.0
    step: float | None = 60.0
    close: float | None = 5.0

    def __post_init__(self) -> None:
        for name in ("connect", "step", "close"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise ConfigurationError(f"timeout {name!r} must be > 0 or None, got {value!r}")

    @classmethod
    def of(cls, timeouts: Timeouts | Mapping[str, float | None] | None) -> Timeouts:
        """``timeouts`` itself, or the defaults with a mapping of fields on top (``from_env``)."""
        if isinstance(timeouts, Timeouts):
            return timeouts
        return cls.from_env(**dict(timeouts or {}))

    @classmethod
    def from_env(cls, **overrides: Any) -> Timeouts:
        """Defaults, then ``OPENENV_GYM_*_TIMEOUT`` variables, then ``overrides``."""
        base = cls(
            connect=env_float("OPENENV_GYM_CONNECT_TIMEOUT", 10.0),
            step=env_float("OPENENV_GYM_STEP_TIMEOUT", 60.0),
            close=env_float("OPENENV_GYM_CLOSE_TIMEOUT", 5.0),
        )
        return replace(base, **overrides)
