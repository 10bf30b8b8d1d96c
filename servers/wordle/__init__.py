"""Wordle, wire-compatible with OpenEnv's TextArena ``Wordle-v0`` environment.

:class:`WordleEnvironment` plays TextArena 0.7.4's rules with reproducible seeding and
bundled word lists; the models mirror OpenEnv's ``textarena_env`` (also under their
``TextArena*`` names).
"""

from openenv_gym_servers.wordle.environment import WordleEnvironment
from openenv_gym_servers.wordle.models import (
    TextArenaAction,
    TextArenaMessage,
    TextArenaObservation,
    TextArenaState,
    WordleAction,
    WordleMessage,
    WordleObservation,
    WordleState,
)

__all__ = [
    "TextArenaAction",
    "TextArenaMessage",
    "TextArenaObservation",
    "TextArenaState",
    "WordleAction",
    "WordleEnvironment",
    "WordleMessage",
    "WordleObservation",
    "WordleState",
]
