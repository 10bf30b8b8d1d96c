"""Catch: OpenSpiel's ``catch`` game, wire-compatible with OpenEnv's ``openspiel_env``.

:class:`CatchEnvironment` needs neither OpenSpiel nor NumPy; the models mirror OpenEnv's
``openspiel_env`` (also under their ``OpenSpiel*`` names).
"""

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
