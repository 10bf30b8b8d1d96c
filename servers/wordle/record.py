"""The record of Wordle: what openenv-gym knows of it.

Registered by openenv-gym's distribution as the entry point ``wordle`` of the group
``openenv_gym.envs`` (``pyproject.toml``): :mod:`openenv_gym.envs` calls :func:`record`.
This module imports nothing at import time, so it can be imported in any order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openenv_gym.envs import EnvRecord

__all__ = ["record"]


def record() -> EnvRecord:
    """Wordle's :class:`~openenv_gym.envs.EnvRecord`."""
    from openenv_gym.envs import EnvRecord

    return EnvRecord(
        name="wordle",
        env_id="openenv/Wordle-v0",
        server="openenv_gym_servers.wordle:WordleEnvironment",
        codec="openenv_gym_servers.wordle.gym:codec",
        text_interface="openenv_gym_servers.wordle.gym:text_interface",
        description="Wordle (TextArena's rules), five-letter guesses as text",
        rank=0,  # listings: wordle, echo, catch, then the others by name
        example_actions=({"message": "[crane]"},),  # a valid guess: its feedback shows it
    )
