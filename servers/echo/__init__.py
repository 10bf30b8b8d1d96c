"""Echo: OpenEnv's classic ``echo_env``, the trivial environment used by benchmarks.

:data:`RECORD` (in :mod:`.record`) is what openenv-gym knows of it (an
:class:`~openenv_gym.envs.EnvRecord`); everything is imported on first use, so reading
the record imports no game code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_gym_servers.echo.environment import EchoEnvironment
    from openenv_gym_servers.echo.models import EchoAction, EchoObservation
    from openenv_gym_servers.echo.record import RECORD

__all__ = [
    "RECORD",
    "EchoAction",
    "EchoEnvironment",
    "EchoObservation",
]


_LAZY = {
    "RECORD": "record",
    "EchoAction": "models",
    "EchoEnvironment": "environment",
    "EchoObservation": "models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # openenv_gym first: importing it reads every record (the record module imports it)
    importlib.import_module("openenv_gym")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
