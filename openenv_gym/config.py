"""Settings: timeouts and the ``OPENENV_GYM_*`` environment variables, read here only.

Every environment variable the package reads is listed in :data:`ENV_VARS` (and in
``docs/configuration.md``). Times are float seconds; ``None`` disables a timeout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from openenv_gym.exceptions import ConfigurationError

__all__ = ["ENV_VARS", "Timeouts", "env_flag", "env_float", "env_str"]

ENV_VARS: dict[str, str] = {
    "OPENENV_GYM_CONNECT_TIMEOUT": "seconds to open a connection (default 10)",
    "OPENENV_GYM_STEP_TIMEOUT": "seconds to wait for a reset/step/state reply (default 60)",
    "OPENENV_GYM_CLOSE_TIMEOUT": "seconds to wait for a clean close (default 5)",
    "OPENENV_GYM_START_TIMEOUT": "seconds for a local server to become healthy (default 30)",
    "OPENENV_GYM_PROTOCOL": "auto | batch | json: wire protocol of new sessions (default auto)",
    "OPENENV_GYM_NO_UVLOOP": "1: servers use the asyncio loop even when uvloop is installed",
    "OPENENV_GYM_PYTHON": "interpreter that runs local servers (default: the current one)",
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
    if raw is None:
        return default
    if raw.lower() in ("none", "off"):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ConfigurationError(f"{name} must be > 0, got {value}")
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
