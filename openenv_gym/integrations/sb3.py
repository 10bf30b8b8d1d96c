"""Stable-Baselines3 on any env id: an SB3 ``VecEnv`` over one :class:`OpenEnvVectorEnv`.

SB3 takes its own ``VecEnv``, not a Gymnasium vector env, and a ``DummyVecEnv`` of
``gymnasium.make`` calls would start one local server per sub-env and step them one by one.
:func:`make_sb3_vec_env` steps all sub-envs in one batched frame per server instead::

    from stable_baselines3 import PPO
    from openenv_gym.integrations.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("openenv/Catch-v0", num_envs=8, seed=0)
    PPO("MlpPolicy", venv).learn(50_000)
    venv.close()

SB3's semantics hold: an ended sub-env is reset in the same step (the vector env runs with
``AutoresetMode.SAME_STEP``), its last observation is in ``infos[i]["terminal_observation"]``,
``infos[i]["TimeLimit.truncated"]`` tells a time limit from a terminal state, ``reset()``
uses the seeds given to :meth:`OpenEnvSB3VecEnv.seed` (one per sub-env, ``seed + i``), and
rewards are ``float32``, dones ``bool``. Observation spaces SB3 supports (``Box``,
``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Dict`` of those) pass through unchanged.

Requires the ``sb3`` extra (``stable-baselines3``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.infos import info_at
from openenv_gym.vector import OpenEnvVectorEnv

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as exc:  # pragma: no cover - the sb3 extra is installed in the tests
    raise ImportError(
        "openenv_gym.integrations.sb3 needs stable-baselines3: pip install 'openenv-gym[sb3]'"
    ) from exc

__all__ = ["OpenEnvSB3VecEnv", "make_sb3_vec_env"]


def _indices(num_envs: int, indices: int | Iterable[int] | None) -> list[int]:
    if indices is None:
        return list(range(num_envs))
    if isinstance(indices, int):
        return [indices]
    return list(indices)


def make_sb3_vec_env(env_id: str, num_envs: int, *, seed: int | None = None, **kwargs: Any) -> Any:
    """An SB3 ``VecEnv`` of ``num_envs`` sub-envs of ``env_id`` (one vector env underneath).

    Args:
        env_id: A registered id, e.g. ``"openenv/Catch-v0"``.
        num_envs: Sub-envs, stepped together.
        seed: Seeds the first ``reset()`` (sub-env ``i`` gets ``seed + i``), as SB3's
            ``make_vec_env(seed=...)`` does.
        **kwargs: For ``gymnasium.make_vec`` (``base_url=``, ``provider=``,
            ``max_episode_steps=``, ...); ``autoreset_mode`` is SB3's, always SAME_STEP.

    Raises:
        ConfigurationError: stable-baselines3 is not installed, or ``autoreset_mode`` was
            given.
    """
    if "autoreset_mode" in kwargs:
        raise ConfigurationError("SB3 resets ended sub-envs in the same step; drop autoreset_mode")
    envs = gymnasium.make_vec(
        env_id, num_envs=num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs
    )
    try:
        venv = OpenEnvSB3VecEnv(envs)
    except BaseException:
        envs.close()
        raise
    if seed is not None:
        venv.seed(seed)
    return venv


class OpenEnvSB3VecEnv(VecEnv):  # type: ignore[misc]  # SB3 is untyped here
    """An SB3 ``VecEnv`` over an :class:`OpenEnvVectorEnv` in ``AutoresetMode.SAME_STEP``.

    Args:
        envs: The vector env to drive (closed with this adapter).

    Raises:
        ConfigurationError: ``envs`` is not an OpenEnvVectorEnv with SAME_STEP autoreset.
    """

    def __init__(self, envs: Any) -> None:
        unwrapped = getattr(envs, "unwrapped", envs)
        if not isinstance(unwrapped, OpenEnvVectorEnv):
            raise ConfigurationError(
                f"the SB3 adapter drives an OpenEnvVectorEnv, got {type(envs).__name__}"
            )
        if envs.metadata.get("autoreset_mode") is not AutoresetMode.SAME_STEP:
            raise ConfigurationError(
                "the SB3 adapter needs autoreset_mode=AutoresetMode.SAME_STEP (SB3 resets ended "
                "sub-envs in the same step): use make_sb3_vec_env"
            )
        self.envs = envs
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)
        self._actions: Any = None
        self._reset_infos: list[dict[str, Any]] = [{} for _ in range(envs.num_envs)]

    # SB3 keeps per-reset seeds and options in these (VecEnv.seed / set_options)
    _seeds: list[int | None]
    _options: list[dict[str, Any]]
    num_envs: int

    def reset(self) -> Any:
        """Reset every sub-env (with the seeds and options SB3 set); the batched observation."""
        seeds = list(self._seeds)
        seed = None if all(s is None for s in seeds) else seeds
        options = self._options[0] if self._options and self._options[0] else None
        obs, infos = self.envs.reset(seed=seed, options=options)
        self._reset_infos = [info_at(infos, i) for i in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return obs

    @property
    def reset_infos(self) -> list[dict[str, Any]]:
        """Each sub-env's info from its latest reset (SB3 reads ``reset_infos``)."""
        return self._reset_infos

    @reset_infos.setter
    def reset_infos(self, value: list[dict[str, Any]]) -> None:
        self._reset_infos = value

    def step_async(self, actions: np.ndarray[Any, Any]) -> None:
        """Keep the actions for :meth:`step_wait` (the step is sent there, in one frame)."""
        self._actions = actions

    def step_wait(self) -> tuple[Any, np.ndarray[Any, Any], np.ndarray[Any, Any], list[Any]]:
        """Step every sub-env: observations, ``float32`` rewards, dones, one info per sub-env."""
        obs, rewards, terminations, truncations, infos = self.envs.step(self._actions)
        dones = np.logical_or(terminations, truncations)
        ended = infos.get("_final_obs")
        out: list[dict[str, Any]] = []
        for i in range(self.num_envs):
            if ended is not None and ended[i]:
                info = info_at(infos["final_info"], i) if "final_info" in infos else {}
                info["terminal_observation"] = infos["final_obs"][i]
                info["TimeLimit.truncated"] = bool(truncations[i] and not terminations[i])
                self._reset_infos[i] = {
                    k: v for k, v in info_at(infos, i).items() if k not in _FINAL_KEYS
                }
            else:
                info = info_at(infos, i)
            out.append(info)
        return obs, np.asarray(rewards, dtype=np.float32), dones, out

    def close(self) -> None:
        """Close the vector env (and the servers it started)."""
        self.envs.close()

    def get_images(self) -> Sequence[Any]:
        """No RGB frames: the sub-envs render ``ansi`` text, if anything."""
        return [None] * self.num_envs

    def get_attr(self, attr_name: str, indices: int | Iterable[int] | None = None) -> list[Any]:
        """The vector env's ``get_attr``, for the sub-envs at ``indices``."""
        values = self.envs.get_attr(attr_name)
        return [values[i] for i in _indices(self.num_envs, indices)]

    def set_attr(
        self, attr_name: str, value: Any, indices: int | Iterable[int] | None = None
    ) -> None:
        """The vector env's ``set_attr``, on every sub-env (the only choice it has)."""
        chosen = _indices(self.num_envs, indices)
        if chosen != list(range(self.num_envs)):
            raise ConfigurationError("set_attr on some sub-envs only is not supported")
        self.envs.set_attr(attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: int | Iterable[int] | None = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """The vector env's ``call`` (``state``, ``render``, attributes), for ``indices``."""
        values = self.envs.call(method_name, *method_args, **method_kwargs)
        return [values[i] for i in _indices(self.num_envs, indices)]

    def env_is_wrapped(
        self, wrapper_class: type, indices: int | Iterable[int] | None = None
    ) -> list[bool]:
        """False for each: no Gymnasium wrapper wraps a sub-env (a session on a server)."""
        # the sub-envs are sessions on a server: no Gymnasium wrapper wraps one of them
        return [False for _ in _indices(self.num_envs, indices)]


_FINAL_KEYS = frozenset({"final_obs", "final_info"})
