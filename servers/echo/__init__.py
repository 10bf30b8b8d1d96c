"""Echo: OpenEnv's classic ``echo_env``, the trivial environment used by benchmarks.

:data:`RECORD` is what openenv-gym knows of it (:class:`~openenv_gym.envs.EnvRecord`); the
classes are imported on first use, so reading the record imports no game code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from openenv_gym.envs import EnvRecord

if TYPE_CHECKING:
    from openenv_gym_servers.echo.environment import EchoEnvironment
    from openenv_gym_servers.echo.models import EchoAction, EchoObservation

__all__ = [
    "RECORD",
    "EchoAction",
    "EchoEnvironment",
    "EchoObservation",
]

RECORD = EnvRecord(
    name="echo",
    env_id="openenv/Echo-v0",
    server="openenv_gym_servers.echo:EchoEnvironment",
    codec="openenv_gym_servers.echo.gym:codec",
    text_interface="openenv_gym_servers.echo.gym:text_interface",
    description="echoes each message back (the benchmark environment)",
)

_LAZY = {
    "EchoAction": "models",
    "EchoEnvironment": "environment",
    "EchoObservation": "models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
