"""Wordle, wire-compatible with OpenEnv's TextArena ``Wordle-v0`` environment.

:class:`WordleEnvironment` plays TextArena 0.7.4's rules with reproducible seeding and
bundled word lists; the models mirror OpenEnv's ``textarena_env`` (also under their
``TextArena*`` names).

:func:`.record.record` gives what openenv-gym knows of it (an
:class:`~openenv_gym.envs.EnvRecord`, registered as an entry point); everything here is
imported on first use, so reading the record imports no game code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv_gym_servers import lazy_exports

if TYPE_CHECKING:
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


_LAZY = {
    "TextArenaAction": "models",
    "TextArenaMessage": "models",
    "TextArenaObservation": "models",
    "TextArenaState": "models",
    "WordleAction": "models",
    "WordleEnvironment": "environment",
    "WordleMessage": "models",
    "WordleObservation": "models",
    "WordleState": "models",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
