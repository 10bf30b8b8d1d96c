"""Gymnasium registration of the ``openenv/*`` ids.

Importing :mod:`openenv_gym` registers them, so both documented Gymnasium 1.x forms work::

    import openenv_gym                       # registers the ids
    gymnasium.make("openenv/Wordle-v0")

    gymnasium.make("openenv_gym:openenv/Wordle-v0")   # no import needed

Every id takes the keyword arguments of :class:`~openenv_gym.env.OpenEnvEnv`
(``base_url=``, ``provider=``, ``protocol=``, ``timeouts=``, ...).
``openenv/Generic-v0`` is any OpenEnv server, its spaces built from its ``GET /schema``::

    gymnasium.make("openenv/Generic-v0", base_url="https://openenv-echo-env.hf.space")

``nondeterministic`` (what ``gymnasium.utils.env_checker.check_env`` reads) is False for
Wordle, Echo and Catch, whose servers replay an episode exactly from its seed, and True
for Generic-v0. Gymnasium's flag is per id, but an env made with ``base_url=`` talks to a
server that may ignore seeds, so its own ``env.spec`` is a copy marked
``nondeterministic=True`` (:func:`~openenv_gym.env.marked_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium

__all__ = ["ENV_IDS", "register_envs"]


@dataclass(frozen=True, slots=True)
class _Entry:
    env: str
    max_episode_steps: int | None
    nondeterministic: bool


ENV_IDS: dict[str, _Entry] = {
    "openenv/Wordle-v0": _Entry("wordle", None, nondeterministic=False),
    "openenv/Echo-v0": _Entry("echo", None, nondeterministic=False),
    "openenv/Catch-v0": _Entry("catch", None, nondeterministic=False),
    "openenv/Generic-v0": _Entry("generic", None, nondeterministic=True),
}


def register_envs() -> None:
    """Register every ``openenv/*`` id with Gymnasium (idempotent)."""
    for env_id, entry in ENV_IDS.items():
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point="openenv_gym.env:OpenEnvEnv",
            vector_entry_point="openenv_gym.vector:OpenEnvVectorEnv",
            kwargs={"env": entry.env},
            max_episode_steps=entry.max_episode_steps,
            # our servers honour seeds exactly; Generic-v0 is whatever server it is given.
            # An env made with base_url= (or server=, or a custom provider) reports
            # nondeterministic=True in its own env.spec: openenv_gym.env.serves_seeded
            nondeterministic=entry.nondeterministic,
            disable_env_checker=False,
            # the env raises ResetNeededError (a gymnasium ResetNeeded) itself, after
            # checking it is open: OrderEnforcing would answer "call reset()" on a closed env
            order_enforce=False,
        )
