"""TorchRL's own GymWrapper over our vector env (no adapter of ours): specs, rollouts with its
partial resets (our ``reset_mask``), seeding."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.vector import AutoresetMode

import openenv_gym

torchrl_envs = pytest.importorskip("torchrl.envs")  # installed by scripts/test

gymnasium.register_envs(openenv_gym)
pytestmark = pytest.mark.integration


@pytest.fixture
def env():
    # TorchRL resets ended sub-envs itself: it wants DISABLED autoreset (or SAME_STEP)
    envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=4, autoreset_mode=AutoresetMode.DISABLED)
    yield torchrl_envs.GymWrapper(envs)
    envs.close()


def test_specs_follow_the_spaces(env) -> None:
    assert tuple(env.batch_size) == (4,)
    assert tuple(env.observation_spec["observation"].shape) == (4, 50)
    assert env.action_spec.shape[-1] == 3  # one-hot over Discrete(3)


def test_rollout_across_episode_ends_resets_only_the_ended_sub_envs(env) -> None:
    env.set_seed(0)
    rollout = env.rollout(30, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    reward = rollout["next", "reward"].squeeze(-1)
    # Catch ends after exactly 9 steps: 3 episodes in 30 steps, each +1 or -1 at its end
    assert done.sum(dim=1).tolist() == [3, 3, 3, 3]
    assert set(reward[done].tolist()) <= {-1.0, 1.0}
    assert reward[~done].abs().sum().item() == 0.0
    # the step after an end starts a new episode: the ball is back in the top row
    first_rows = rollout["observation"][:, 9, :5].sum(dim=-1)
    assert first_rows.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_same_seed_same_rollout(env) -> None:
    env.set_seed(7)
    first = env.rollout(9, policy=None, auto_reset=True)
    env.set_seed(7)
    again = env.rollout(9, policy=None, auto_reset=True)
    assert (first["observation"][:, 0] == again["observation"][:, 0]).all()
