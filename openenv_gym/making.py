"""``openenv_gym.make`` and ``openenv_gym.make_vec``: Gymnasium's, typed for our ids.

They are ``gymnasium.make`` and ``gymnasium.make_vec`` (the same arguments, the same
wrappers, the same envs), with a ``Literal`` overload per built-in id, so a type checker
knows what an env takes and gives:

>>> import openenv_gym
>>> env = openenv_gym.make("openenv/Wordle-v0")  # gymnasium.Env[str, str]
>>> obs, info = env.reset(seed=0)
>>> obs.startswith("You are Playing Wordle")
True
>>> env.close()

| id | observation | action |
|---|---|---|
| ``openenv/Wordle-v0`` | ``str`` | ``str`` |
| ``openenv/Echo-v0`` | ``str`` | ``str`` |
| ``openenv/Catch-v0`` | ``NDArray[np.float32]``, shape (50,) | ``int`` (``Discrete(3)``) |
| anything else | ``Any`` | ``Any`` |

A vector env batches them as Gymnasium does: a tuple of ``str`` for Text, one array for a
Box; actions are a sequence of ``str``, or an int array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

import gymnasium
import numpy as np
from numpy.typing import NDArray

from openenv_gym.vector.vector_env import OpenEnvVectorEnv

__all__ = ["make", "make_vec"]

CatchObs = NDArray[np.float32]
"""Catch's observation: the 10 x 5 grid, flattened (ball, paddle)."""

_Arrays = NDArray[Any]
"""Rewards (float64), terminations and truncations (bool): one array type for the three."""
_Texts = OpenEnvVectorEnv[tuple[str, ...], Sequence[str], _Arrays]


@overload
def make(
    id: Literal["openenv/Wordle-v0", "openenv/Echo-v0"],
    max_episode_steps: int | None = None,
    disable_env_checker: bool | None = None,
    **kwargs: Any,
) -> gymnasium.Env[str, str]: ...
@overload
def make(
    id: Literal["openenv/Catch-v0"],
    max_episode_steps: int | None = None,
    disable_env_checker: bool | None = None,
    **kwargs: Any,
) -> gymnasium.Env[CatchObs, int]: ...
@overload
def make(
    id: str,
    max_episode_steps: int | None = None,
    disable_env_checker: bool | None = None,
    **kwargs: Any,
) -> gymnasium.Env[Any, Any]: ...
def make(
    id: str,
    max_episode_steps: int | None = None,
    disable_env_checker: bool | None = None,
    **kwargs: Any,
) -> gymnasium.Env[Any, Any]:
    """``gymnasium.make(id, ...)``, typed for our ids (see the module docstring).

    Raises:
        gymnasium.error.Error: What ``gymnasium.make`` raises for an unknown id.
        OpenEnvGymError: What the env raises (a bad option, a server that fails).
    """
    return gymnasium.make(
        id, max_episode_steps=max_episode_steps, disable_env_checker=disable_env_checker, **kwargs
    )


@overload
def make_vec(
    id: Literal["openenv/Wordle-v0", "openenv/Echo-v0"],
    num_envs: int = 1,
    vectorization_mode: str | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> _Texts: ...
@overload
def make_vec(
    id: Literal["openenv/Catch-v0"],
    num_envs: int = 1,
    vectorization_mode: str | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> OpenEnvVectorEnv[CatchObs, NDArray[np.int64], _Arrays]: ...
@overload
def make_vec(
    id: str,
    num_envs: int = 1,
    vectorization_mode: str | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> gymnasium.vector.VectorEnv[Any, Any, Any]: ...
def make_vec(
    id: str,
    num_envs: int = 1,
    vectorization_mode: str | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> gymnasium.vector.VectorEnv[Any, Any, Any]:
    """``gymnasium.make_vec(id, num_envs, ...)``, typed for our ids (see the module docstring).

    Our ids' vector env is :class:`~openenv_gym.vector.OpenEnvVectorEnv` (their vector
    entry point, which ``make_vec`` uses by default).

    Raises:
        gymnasium.error.Error: What ``gymnasium.make_vec`` raises for an unknown id.
        OpenEnvGymError: What the env raises (a bad option, a server that fails).
    """
    return gymnasium.make_vec(
        id,
        num_envs=num_envs,
        vectorization_mode=vectorization_mode,
        vector_kwargs=vector_kwargs,
        **kwargs,
    )
