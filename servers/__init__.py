"""The environments openenv-gym ships, installed as ``openenv_gym_servers``.

Each is a small package with an ``Environment`` subclass (OpenEnv's interface) and its
Pydantic models: :mod:`~openenv_gym_servers.wordle`, :mod:`~openenv_gym_servers.echo`,
:mod:`~openenv_gym_servers.catch`. ``openenv-gym serve wordle`` serves one of them
(the names are resolved by :mod:`openenv_gym.runtime.loader`).
"""
