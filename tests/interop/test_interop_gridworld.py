"""An enum-action server (upstream's ``grid_world_env`` shape) through ``openenv/Generic-v0``.

The action is one field typed by a ``str`` ``Enum`` (a ``$ref`` into ``$defs``), served by
OpenEnv's own ``create_app`` (:mod:`openenv_gridworld_env`). The action space must be a
``Discrete`` over the enum's values, every sampled action a legal move, and the TRL tool's
parameter a ``Literal`` of the values. Its ``reset`` takes no seed (the server drops it).
"""

from __future__ import annotations

import inspect
import typing

import pytest

pytest.importorskip("openenv")

import gymnasium
import numpy as np
from gymnasium import spaces
from interop_support import Server
from openenv_gridworld_env import GOAL, SIZE

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym.integrations.trl import environment_factory

pytestmark = pytest.mark.openenv

MOVES = ("UP", "DOWN", "LEFT", "RIGHT")
STEP = {"UP": (0, 1), "DOWN": (0, -1), "LEFT": (-1, 0), "RIGHT": (1, 0)}


@pytest.fixture
def gridworld(shared_app) -> Server:
    return shared_app("gridworld")


def _walk(position: tuple[int, int], move: str) -> tuple[int, int]:
    dx, dy = STEP[move]
    return (min(max(position[0] + dx, 0), SIZE - 1), min(max(position[1] + dy, 0), SIZE - 1))


def test_sampled_enum_actions_are_legal_moves(gridworld):
    env = gymnasium.make("openenv/Generic-v0", base_url=gridworld.url)
    try:
        assert env.action_space == spaces.Discrete(4)  # the enum, in schema order
        assert set(env.observation_space.keys()) == {"x", "y", "message"}
        env.action_space.seed(3)
        obs, _ = env.reset(seed=9)  # dropped by the server: every episode starts at (0, 0)
        position, episodes = (0, 0), 0
        for _ in range(400):
            action = int(env.action_space.sample())
            obs, reward, terminated, _, _ = env.step(action)
            position = _walk(position, MOVES[action])
            assert (int(obs["x"]), int(obs["y"])) == position
            assert terminated == (position == GOAL)
            assert reward == pytest.approx(1.0 if terminated else -0.01)
            if terminated:
                episodes += 1
                obs, _ = env.reset()
                position = (0, 0)
                assert (int(obs["x"]), int(obs["y"])) == position
        assert episodes > 0
    finally:
        env.close()


def test_vector_env_steps_enum_actions(gridworld):
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=4, base_url=gridworld.url)
    try:
        obs, _ = envs.reset(seed=[1, 2, 3, 4])
        assert obs["x"].tolist() == [0, 0, 0, 0]
        obs, rewards, terminations, _, _ = envs.step(np.array([0, 3, 3, 1]))
        assert obs["x"].tolist() == [0, 1, 1, 0]
        assert obs["y"].tolist() == [1, 0, 0, 0]
        assert rewards.tolist() == pytest.approx([-0.01] * 4)
        assert not terminations.any()
    finally:
        envs.close()


def test_trl_tool_takes_the_enum_values(gridworld):
    factory = environment_factory("openenv/Generic-v0", base_url=gridworld.url)
    try:
        instance = factory()
        (name,) = [
            n
            for n, _ in inspect.getmembers(type(instance), inspect.isfunction)
            if n not in ("reset", "get_reward") and n[0] != "_"
        ]
        tool = getattr(instance, name)
        param = inspect.signature(tool).parameters["action"]
        assert param.annotation == typing.Literal["UP", "DOWN", "LEFT", "RIGHT"]
        assert "action: The direction to move the agent." in inspect.getdoc(tool)
        instance.reset(seed=0)
        for move in ["RIGHT"] * 4 + ["UP"] * 4:
            said = tool(action=move)
        assert instance.done
        assert "You reached the goal!" in said
        assert instance.get_reward() == pytest.approx(1.0 - 7 * 0.01)
    finally:
        factory.close()
