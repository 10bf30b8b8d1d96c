"""Wordle, wire-compatible with OpenEnv's TextArena ``Wordle-v0`` environment.

:class:`WordleEnvironment` plays TextArena 0.7.4's rules with reproducible seeding and
bundled word lists; the models mirror OpenEnv's ``textarena_env`` (also under their
``TextArena*`` names).

:data:`RECORD` is what openenv-gym knows of it (:class:`~openenv_gym.envs.EnvRecord`); the
classes are imported on first use, so reading the record imports no game code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from openenv_gym.envs import EnvRecord

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
    "RECORD",
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

RECORD = EnvRecord(
    name="wordle",
    env_id="openenv/Wordle-v0",
    server="openenv_gym_servers.wordle:WordleEnvironment",
    codec="openenv_gym_servers.wordle.gym:codec",
    text_interface="openenv_gym_servers.wordle.gym:text_interface",
    description="Wordle (TextArena's rules), five-letter guesses as text",
)

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
