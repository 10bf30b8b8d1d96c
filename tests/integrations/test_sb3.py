"""The SB3 VecEnv adapter: SB3's reset / autoreset / info semantics over one vector env, and
PPO that learns Catch through it (real local server, real SB3)."""

from __future__ import annotations

from pathlib import Path

import gymnasium
import numpy as np
import pytest

import openenv_gym
from openenv_gym.exceptions import ConfigurationError

sb3 = pytest.importorskip("stable_baselines3")  # the sb3 extra: installed by scripts/test

from stable_baselines3.common.vec_env import VecEnv, VecMonitor  # noqa: E402

from openenv_gym.integrations.sb3 import OpenEnvSB3VecEnv, make_sb3_vec_env  # noqa: E402

gymnasium.register_envs(openenv_gym)
pytestmark = pytest.mark.integration

STAY = 1


@pytest.fixture
def venv():
    venv = make_sb3_vec_env("openenv/Catch-v0", num_envs=4, seed=3)
    yield venv
    venv.close()


def test_is_an_sb3_vec_env_with_the_envs_spaces(venv) -> None:
    assert isinstance(venv, VecEnv)
    assert venv.num_envs == 4
    assert venv.observation_space == gymnasium.spaces.Box(0.0, 1.0, (50,), np.float32)
    assert venv.action_space == gymnasium.spaces.Discrete(3)


def test_episode_end_resets_in_the_same_step_with_the_terminal_observation(venv) -> None:
    obs = venv.reset()
    assert obs.shape == (4, 50)
    for _ in range(8):
        obs, rewards, dones, infos = venv.step(np.full(4, STAY))
        assert not dones.any()
        assert all("terminal_observation" not in info for info in infos)
    last = obs
    obs, rewards, dones, infos = venv.step(np.full(4, STAY))  # the ball lands: step 9
    assert dones.all()
    assert rewards.dtype == np.float32
    assert set(rewards.tolist()) <= {-1.0, 1.0}
    for i, info in enumerate(infos):
        terminal = info["terminal_observation"]
        assert terminal.shape == (50,)
        assert not np.array_equal(terminal, last[i])  # the ball moved on
        assert info["TimeLimit.truncated"] is False
        assert info["game_phase"] == "terminal"  # the ended episode's info, not the reset's
        # the returned observation already starts the next episode: ball back in row 0
        assert obs[i][:5].sum() == 1.0
        assert venv.reset_infos[i]["game_phase"] == "initial"


def test_time_limit_is_reported_as_truncation() -> None:
    venv = make_sb3_vec_env("openenv/Catch-v0", num_envs=2, max_episode_steps=3)
    try:
        venv.reset()
        for _ in range(2):
            _, _, dones, _ = venv.step(np.full(2, STAY))
            assert not dones.any()
        _, _, dones, infos = venv.step(np.full(2, STAY))
        assert dones.all()
        assert [info["TimeLimit.truncated"] for info in infos] == [True, True]
    finally:
        venv.close()


def test_seed_makes_the_next_reset_reproducible(venv) -> None:
    venv.seed(11)
    first = venv.reset()
    venv.seed(11)
    again = venv.reset()
    np.testing.assert_array_equal(first, again)
    venv.seed(12)
    other = venv.reset()
    assert not np.array_equal(first, other)


def test_get_attr_and_env_method_per_index(venv) -> None:
    venv.reset()
    assert venv.get_attr("render_mode") == [None] * 4
    states = venv.env_method("state", indices=[1, 2])
    assert len(states) == 2
    assert all("step_count" in state for state in states)
    assert venv.env_is_wrapped(gymnasium.Wrapper) == [False] * 4


def test_refuses_a_vector_env_without_same_step_autoreset() -> None:
    envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=2)
    try:
        with pytest.raises(ConfigurationError, match="SAME_STEP"):
            OpenEnvSB3VecEnv(envs)
    finally:
        envs.close()
    with pytest.raises(ConfigurationError, match="autoreset_mode"):
        make_sb3_vec_env("openenv/Catch-v0", 2, autoreset_mode="NextStep")
    with pytest.raises(ConfigurationError, match="OpenEnvVectorEnv"):
        OpenEnvSB3VecEnv(gymnasium.make_vec("CartPole-v1", num_envs=2))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ppo_learns_catch_through_the_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SB3's PPO reaches a mean return >= 0.9 (random: about -0.6) in 30k steps, seed 0."""
    from stable_baselines3 import PPO

    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))  # else its logger makes /tmp/SB3-<time>

    venv = VecMonitor(make_sb3_vec_env("openenv/Catch-v0", num_envs=8, seed=0))
    try:
        model = PPO("MlpPolicy", venv, n_steps=128, batch_size=256, seed=0, verbose=0)
        model.learn(30_000)
        obs = venv.reset()
        returns: list[float] = []
        running = np.zeros(8)
        while len(returns) < 100:
            actions, _ = model.predict(obs, deterministic=True)
            obs, rewards, dones, _ = venv.step(actions)
            running += rewards
            for i in np.flatnonzero(dones):
                returns.append(float(running[i]))
                running[i] = 0.0
        assert np.mean(returns) >= 0.9, np.mean(returns)
    finally:
        venv.close()
