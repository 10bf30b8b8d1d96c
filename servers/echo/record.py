"""The record of Echo: what openenv-gym knows of it.

Registered by openenv-gym's distribution as the entry point ``echo`` of the group
``openenv_gym.envs`` (``pyproject.toml``): :mod:`openenv_gym.envs` calls :func:`record`.
This module imports nothing at import time, so it can be imported in any order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openenv_gym.envs import EnvRecord

__all__ = ["record"]


def record() -> EnvRecord:
    """Echo's :class:`~openenv_gym.envs.EnvRecord`."""
    from openenv_gym.envs import EnvRecord

    return EnvRecord(
        name="echo",
        env_id="openenv/Echo-v0",
        server="openenv_gym_servers.echo:EchoEnvironment",
        codec="openenv_gym_servers.echo.gym:codec",
        text_interface="openenv_gym_servers.echo.gym:text_interface",
        description="echoes each message back (the benchmark environment)",
        rank=1,
    )
