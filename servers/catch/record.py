"""The record of Catch: what openenv-gym knows of it (read by :mod:`openenv_gym.envs`)."""

from openenv_gym.envs import EnvRecord

__all__ = ["RECORD"]

RECORD = EnvRecord(
    name="catch",
    env_id="openenv/Catch-v0",
    server="openenv_gym_servers.catch:CatchEnvironment",
    codec="openenv_gym_servers.catch.gym:codec",
    text_interface="openenv_gym_servers.catch.gym:text_interface",
    description="OpenSpiel's catch: move the paddle under the falling ball",
    rank=2,
)
