"""Catch: OpenSpiel's ``catch`` game, wire-compatible with OpenEnv's ``openspiel_env``.

:class:`CatchEnvironment` needs neither OpenSpiel nor NumPy; the models mirror OpenEnv's
``openspiel_env`` (also under their ``OpenSpiel*`` names).

:func:`.record.record` gives what openenv-gym knows of it (an
:class:`~openenv_gym.envs.EnvRecord`, registered as an entry point); everything here is
imported on first use, so reading the record imports no game code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv_gym_servers import lazy_exports

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
    "CatchAction",
    "CatchEnvironment",
    "CatchObservation",
    "CatchState",
    "OpenSpielAction",
    "OpenSpielObservation",
    "OpenSpielState",
]


_LAZY = {
    "CatchAction": "models",
    "CatchEnvironment": "environment",
    "CatchObservation": "models",
    "CatchState": "models",
    "OpenSpielAction": "models",
    "OpenSpielObservation": "models",
    "OpenSpielState": "models",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
