"""TRL's ``GRPOTrainer`` on any env id: ``environment_factory`` and a lockstep ``rollout_func``.

**Tools** (TRL owns the multi-turn loop)::

    from openenv_gym.integrations.trl import environment_factory
    trainer = GRPOTrainer(
        model=..., train_dataset=dataset,               # a "seed" column picks the task
        environment_factory=environment_factory("openenv/Wordle-v0"),
    )                                                   # reward: the episode return

Each instance TRL makes exposes one named, typed tool (Wordle ``guess(word: str)``, Echo
``echo(message: str)``, Catch ``move(direction)``, ``openenv/Generic-v0``: built from the
server's action schema; on an MCP server, one tool per MCP tool, named, typed and
documented as the server lists it), ``reset(**row)`` and ``get_reward()``; it owns its own
session.
The instances of one factory share the servers it starts, once per process (a local
server by default; with ``provider="ray"`` K Ray actors, ``num_servers=K``, the instances
taking them in turn; ``pool=NAME`` attaches to a named pool instead), stopped with the
process or :meth:`EnvironmentFactory.close`.

**Lockstep** (``rollout_func``: all rollouts of the generation batch step together through
one :class:`~openenv_gym.vector.OpenEnvVectorEnv`, one batched generation per turn)::

    from openenv_gym.integrations.trl import vector_rollout_func, env_reward
    trainer = GRPOTrainer(
        model=..., reward_funcs=[env_reward], train_dataset=dataset,
        rollout_func=vector_rollout_func("openenv/Wordle-v0", max_turns=6),
    )

Nothing here imports TRL, transformers or torch until a rollout needs them.

The package holds the two features apart: :mod:`openenv_gym.integrations.trl.tools`
(``environment_factory``) and :mod:`openenv_gym.integrations.trl.rollout`
(``vector_rollout_func``, ``env_reward``); every public name is importable from here.
"""

from openenv_gym.integrations.trl.rollout import (
    GenerateFn,
    VectorRolloutFunc,
    env_reward,
    vector_rollout_func,
)
from openenv_gym.integrations.trl.tools import (
    EnvironmentFactory,
    OpenEnvToolEnv,
    environment_factory,
)

__all__ = [
    "EnvironmentFactory",
    "GenerateFn",
    "OpenEnvToolEnv",
    "VectorRolloutFunc",
    "env_reward",
    "environment_factory",
    "vector_rollout_func",
]
