"""The record of Echo: what openenv-gym knows of it (read by :mod:`openenv_gym.envs`)."""

from openenv_gym.envs import EnvRecord

__all__ = ["RECORD"]

RECORD = EnvRecord(
    name="echo",
    env_id="openenv/Echo-v0",
    server="openenv_gym_servers.echo:EchoEnvironment",
    codec="openenv_gym_servers.echo.gym:codec",
    text_interface="openenv_gym_servers.echo.gym:text_interface",
    description="echoes each message back (the benchmark environment)",
    rank=1,
)
