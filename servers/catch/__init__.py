"""Catch: OpenSpiel's ``catch`` game, wire-compatible with OpenEnv's ``openspiel_env``.

:class:`CatchEnvironment` needs neither OpenSpiel nor NumPy; the models mirror OpenEnv's
``openspiel_env`` (also under their ``OpenSpiel*`` names).

:data:`RECORD` is what openenv-gym knows of it (:class:`~openenv_gym.envs.EnvRecord`); the
classes are imported on first use, so reading the record imports no game code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from openenv_gym.envs import EnvRecord

if TYPE_CHECKING:
    from openenv_gym_servers.catch.environment import CatchEnvironment
    from openenv_gym_servers.catch.models import (
        CatchAction,
        CatchObservation,
        CatchState,
        OpenSpielAction,
        OpenSpielObservation,
        OpenSpielState,
    )

__all__ = [
    "RECORD",
    "CatchAction",
    "CatchEnvironment",
    "CatchObservation",
    "CatchState",
    "OpenSpielAction",
    "OpenSpielObservation",
    "OpenSpielState",
]

RECORD = EnvRecord(
    name="catch",
    env_id="openenv/Catch-v0",
    server="openenv_gym_servers.catch:CatchEnvironment",
    codec="openenv_gym_servers.catch.gym:codec",
    text_interface="openenv_gym_servers.catch.gym:text_interface",
    description="OpenSpiel's catch: move the paddle under the falling ball",
)

_LAZY = {
    "CatchAction": "models",
    "CatchEnvironment": "environment",
    "CatchObservation": "models",
    "CatchState": "models",
    "OpenSpielAction": "models",
    "OpenSpielObservation": "models",
    "OpenSpielState": "models",
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
