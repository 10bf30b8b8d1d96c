"""openenv-gym: OpenEnv environments as Gymnasium ``Env`` and ``VectorEnv``.

>>> import gymnasium, openenv_gym
>>> gymnasium.register_envs(openenv_gym)   # keeps linters quiet about the import
>>> sorted(i for i in gymnasium.registry if i.startswith("openenv/"))
['openenv/Catch-v0', 'openenv/Echo-v0', 'openenv/Generic-v0', 'openenv/Wordle-v0']
"""

from openenv_gym._version import __version__
from openenv_gym.config import Timeouts
from openenv_gym.env import OpenEnvEnv
from openenv_gym.envs import EnvRecord
from openenv_gym.exceptions import (
    AuthenticationError,
    CapacityError,
    ConfigurationError,
    ConnectError,
    ConnectionLostError,
    EnvErrorGroup,
    EpisodeOverError,
    InvalidActionError,
    OpenEnvGymError,
    ProtocolError,
    ProviderError,
    RequestTimeoutError,
    ServerError,
    TransportError,
    UsageError,
)
from openenv_gym.making import make, make_vec
from openenv_gym.registry import register_environment, register_envs
from openenv_gym.vector import OpenEnvVectorEnv

__all__ = [
    "AuthenticationError",
    "CapacityError",
    "ConfigurationError",
    "ConnectError",
    "ConnectionLostError",
    "EnvErrorGroup",
    "EnvRecord",
    "EpisodeOverError",
    "InvalidActionError",
    "OpenEnvEnv",
    "OpenEnvGymError",
    "OpenEnvVectorEnv",
    "ProtocolError",
    "ProviderError",
    "RequestTimeoutError",
    "ServerError",
    "Timeouts",
    "TransportError",
    "UsageError",
    "__version__",
    "make",
    "make_vec",
    "register_environment",
    "register_envs",
]

register_envs()
