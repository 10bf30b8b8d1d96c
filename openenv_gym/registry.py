"""Gymnasium registration of the ``openenv/*`` ids.

Importing :mod:`openenv_gym` registers them, so both documented Gymnasium 1.x forms work::

    import openenv_gym                       # registers the ids
    gymnasium.make("openenv/Wordle-v0")

    gymnasium.make("openenv_gym:openenv/Wordle-v0")   # no import needed

Every id takes the keyword arguments of :class:`~openenv_gym.env.OpenEnvEnv`
(``base_url=``, ``provider=``, ``protocol=``, ``timeouts=``, ...).
``openenv/Generic-v0`` is any OpenEnv server, its spaces built from its ``GET /schema``::

    gymnasium.make("openenv/Generic-v0", base_url="https://openenv-echo-env.hf.space")

The ids are those of the :class:`~openenv_gym.envs.EnvRecord` table (the environments we
ship, those other installed packages register by entry points, and those added with
:func:`register_environment`), plus ``openenv/Generic-v0``.

``nondeterministic`` (what ``gymnasium.utils.env_checker.check_env`` reads) is False for
Wordle, Echo and Catch, whose servers replay an episode exactly from its seed, and True
for Generic-v0. Gymnasium's flag is per id, but an env made with ``base_url=`` talks to a
server that may ignore seeds, so its own ``env.spec`` is a copy marked
``nondeterministic=True`` (:func:`~openenv_gym.assemble.marked_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium

from openenv_gym import envs
from openenv_gym.envs import EnvRecord
from openenv_gym.exceptions import ConfigurationError

__all__ = ["ENV_IDS", "GENERIC_ID", "register_environment", "register_envs"]

GENERIC_ID = "openenv/Generic-v0"
"""The id of any OpenEnv server, its spaces built from its ``GET /schema``."""


@dataclass(frozen=True, slots=True)
class _Entry:
    env: str
    max_episode_steps: int | None
    nondeterministic: bool


def _entry(record: EnvRecord) -> _Entry:
    return _Entry(record.name, record.max_episode_steps, record.nondeterministic)


ENV_IDS: dict[str, _Entry] = {}
"""Every ``openenv/*`` id (and any added with :func:`register_environment`) -> its server
name and Gymnasium options, in the order ``openenv-gym envs`` lists them."""


def _refresh() -> None:
    table = {r.env_id: _entry(r) for r in envs.environments().values()}
    table.setdefault(GENERIC_ID, _Entry("generic", None, nondeterministic=True))
    generic = table.pop(GENERIC_ID)
    builtin = set(envs.builtin_names())
    ours = {k: v for k, v in table.items() if v.env in builtin}
    added = {k: v for k, v in table.items() if v.env not in builtin}
    ENV_IDS.clear()
    ENV_IDS.update({**ours, GENERIC_ID: generic, **added})


def _register(env_id: str, entry: _Entry) -> None:
    gymnasium.register(
        id=env_id,
        entry_point="openenv_gym.env:OpenEnvEnv",
        vector_entry_point="openenv_gym.vector:OpenEnvVectorEnv",
        kwargs={"env": entry.env},
        max_episode_steps=entry.max_episode_steps,
        # our servers honour seeds exactly; Generic-v0 is whatever server it is given.
        # An env made with base_url= (or server=, or a custom provider) reports
        # nondeterministic=True in its own env.spec: openenv_gym.assemble.serves_seeded
        nondeterministic=entry.nondeterministic,
        disable_env_checker=False,
        # the env raises ResetNeededError (a gymnasium ResetNeeded) itself, after
        # checking it is open: OrderEnforcing would answer "call reset()" on a closed env
        order_enforce=False,
    )


def register_envs() -> None:
    """Register every ``openenv/*`` id with Gymnasium (idempotent)."""
    _refresh()
    for env_id, entry in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            _register(env_id, entry)


def register_environment(record: EnvRecord, *, replace: bool = False) -> None:
    """Add an environment: its record joins the table, its id is registered with Gymnasium.

    Then ``gymnasium.make(record.env_id)`` (and ``make_vec``) starts servers of it (the
    local provider tells its child processes the server class and where to import it from:
    :func:`~openenv_gym.envs.serve_target`),
    :func:`~openenv_gym.spaces.codec_for` makes its codec,
    :func:`~openenv_gym.integrations.text.text_interface` gives its tool, and
    :func:`~openenv_gym.images.image_recipe` its Docker image. See
    ``docs/add-an-environment.md``.

    Args:
        record: The environment.
        replace: Replace an environment of the same name (and its Gymnasium id).

    Raises:
        ConfigurationError: Not a record, or its name or id is taken (unless ``replace``).
    """
    if not isinstance(record, EnvRecord):
        raise ConfigurationError(f"expected an EnvRecord, got {record!r}")
    old = envs.environment(record.name)
    envs.add_environment(record, replace=replace)
    _refresh()
    if old is not None and old.env_id != record.env_id and old.env_id in gymnasium.registry:
        del gymnasium.registry[old.env_id]
    if record.env_id in gymnasium.registry:
        if not replace and old == record:
            return
        del gymnasium.registry[record.env_id]
    _register(record.env_id, ENV_IDS[record.env_id])
