"""Vector environments and the stepping engine under every env, in Gymnasium's manner.

* :class:`OpenEnvVectorEnv` (:mod:`~openenv_gym.vector.vector_env`): N remote OpenEnv
  sessions as one ``gymnasium.vector.VectorEnv``.
* :mod:`~openenv_gym.vector.engine`: the engine the single env, the vector env and the
  asyncio envs (:mod:`openenv_gym.aio`) all step through, its operations written once
  over a driver (the caller's thread, or an event loop).
* :mod:`~openenv_gym.vector.state` (the call state), :mod:`~openenv_gym.vector.episodes`
  (per sub-env bookkeeping), :mod:`~openenv_gym.vector.actions` (actions to columns, the
  plan of requests), :mod:`~openenv_gym.vector.batching` (outcomes to arrays and infos).
"""

from openenv_gym.infos import batch_infos
from openenv_gym.options import parse_autoreset_mode
from openenv_gym.vector.vector_env import OpenEnvVectorEnv

__all__ = ["OpenEnvVectorEnv", "batch_infos", "parse_autoreset_mode"]
