"""The package's curated surface exports the vector env that ``gymnasium.make_vec`` builds."""

from __future__ import annotations

import gymnasium

import openenv_gym
import openenv_gym.vector


def test_the_package_exports_the_vector_env_make_vec_builds() -> None:
    from openenv_gym import OpenEnvVectorEnv

    assert "OpenEnvVectorEnv" in openenv_gym.__all__
    assert OpenEnvVectorEnv is openenv_gym.vector.OpenEnvVectorEnv
    with gymnasium.make_vec("openenv/Catch-v0", num_envs=2) as envs:
        assert type(envs) is OpenEnvVectorEnv
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 50)
