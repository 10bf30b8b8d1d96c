"""Catch: OpenSpiel's ``catch`` game, wire-compatible with OpenEnv's ``openspiel_env``.

:class:`CatchEnvironment` needs neither OpenSpiel nor NumPy; the models mirror OpenEnv's
``openspiel_env`` (also under their ``OpenSpiel*`` names).

:data:`RECORD` (in :mod:`.record`) is what openenv-gym knows of it (an
:class:`~openenv_gym.envs.EnvRecord`); everything is imported on first use, so reading
the record imports no game code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    from openenv_gym_servers.catch.record import RECORD

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


_LAZY = {
    "RECORD": "record",
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
    # openenv_gym first: importing it reads every record (the record module imports it)
    importlib.import_module("openenv_gym")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
