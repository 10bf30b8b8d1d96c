"""``with gymnasium.make_vec(...) as envs`` works and closes everything (as Gymnasium's Env)."""

from __future__ import annotations

import gymnasium
import pytest

import openenv_gym
from openenv_gym.exceptions import EnvClosedError

gymnasium.register_envs(openenv_gym)


def test_with_block_closes_the_vector_env_and_its_server() -> None:
    with gymnasium.make_vec("openenv/Echo-v0", num_envs=2) as envs:
        envs.reset(seed=0)
        obs, *_ = envs.step(("a", "b"))
        assert obs == ("a", "b")
        processes = [server.process for server in envs.unwrapped._provider.servers]
    assert envs.closed
    with pytest.raises(EnvClosedError):
        envs.step(("a", "b"))
    assert processes
    assert all(p is not None and p.poll() is not None for p in processes)  # servers stopped


def _fail_inside(envs_box: list) -> None:
    with gymnasium.make_vec("openenv/Echo-v0", num_envs=1) as envs:
        envs_box.append(envs)
        envs.reset()
        raise RuntimeError("boom")


def test_with_block_closes_on_an_exception() -> None:
    box: list = []
    with pytest.raises(RuntimeError, match="boom"):
        _fail_inside(box)
    assert box[0].closed
