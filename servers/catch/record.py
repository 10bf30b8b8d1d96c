"""The record of Catch: what openenv-gym knows of it.

Registered by openenv-gym's distribution as the entry point ``catch`` of the group
``openenv_gym.envs`` (``pyproject.toml``): :mod:`openenv_gym.envs` calls :func:`record`.
This module imports nothing at import time, so it can be imported in any order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openenv_gym.envs import EnvRecord

__all__ = ["record"]


def record() -> EnvRecord:
    """Catch's :class:`~openenv_gym.envs.EnvRecord`."""
    from openenv_gym.envs import EnvRecord

    return EnvRecord(
        name="catch",
        env_id="openenv/Catch-v0",
        server="openenv_gym_servers.catch:CatchEnvironment",
        codec="openenv_gym_servers.catch.gym:codec",
        text_interface="openenv_gym_servers.catch.gym:text_interface",
        description="OpenSpiel's catch: move the paddle under the falling ball",
        rank=2,
    )
