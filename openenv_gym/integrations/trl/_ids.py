"""Env ids as TRL's integrations take them: ``"openenv/Wordle-v0"`` or ``"module:id"``."""

from __future__ import annotations

import importlib

import gymnasium

from openenv_gym.exceptions import ConfigurationError

__all__ = ["env_spec"]


def env_spec(env_id: str) -> gymnasium.envs.registration.EnvSpec:
    """The registered spec; ``"module:id"`` imports the module first, as ``gymnasium.make``.

    Raises:
        ConfigurationError: Unknown env id (or its module does not import).
    """
    module, _, name = env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        return gymnasium.spec(name)
    except (gymnasium.error.Error, ImportError) as exc:
        raise ConfigurationError(f"unknown env id {env_id!r}: {exc}") from exc
