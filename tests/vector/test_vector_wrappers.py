"""gymnasium.make_vec builds OpenEnvVectorEnv; Gymnasium's stock vector wrappers work on it."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import gymnasium
import numpy as np
import psutil
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import DictInfoToList, RecordEpisodeStatistics

import openenv_gym
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

gymnasium.register_envs(openenv_gym)


@pytest.mark.parametrize("env_id", ["openenv/Wordle-v0", "openenv/Echo-v0", "openenv/Catch-v0"])
def test_make_vec_uses_the_vector_entry_point(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. a missing or mistyped autoreset_mode
        envs = gymnasium.make_vec(env_id, num_envs=2)
    try:
        assert type(envs) is OpenEnvVectorEnv
        assert envs.num_envs == 2
        assert envs.spec is not None
        assert envs.spec.id == env_id
        assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        pids = envs._provider.pids  # started by the local provider
        assert len(pids) == 1
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
    finally:
        envs.close()
    assert all(
        not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in pids
    )


def test_make_vec_passes_max_episode_steps_and_kwargs() -> None:
    envs = gymnasium.make_vec(
        "openenv/Echo-v0",
        num_envs=3,
        max_episode_steps=2,
        autoreset_mode=AutoresetMode.SAME_STEP,
        protocol="json",
    )
    try:
        assert isinstance(envs, OpenEnvVectorEnv)
        assert envs.max_episode_steps == 2
        assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        assert envs.protocols == ("json",)
        envs.reset()
        assert envs.step(("a", "b", "c"))[3].tolist() == [False] * 3
        _, _, terminations, truncations, infos = envs.step(("d", "e", "f"))
        assert truncations.tolist() == [True] * 3
        assert terminations.tolist() == [False] * 3
        assert list(infos["final_obs"]) == ["d", "e", "f"]
    finally:
        envs.close()


def test_record_episode_statistics_under_next_step(
    make_vector: Callable[..., OpenEnvVectorEnv],
) -> None:
    envs = RecordEpisodeStatistics(make_vector(num_envs=2))  # episode length 3: returns 1+2+3
    envs.reset()
    seen = []
    for _ in range(8):
        *_, infos = envs.step(np.array([0, 0]))
        if "episode" in infos:
            done = infos["_episode"]
            seen.append(done.tolist())
            assert infos["episode"]["r"][done].tolist() == [6.0] * int(done.sum())
            assert infos["episode"]["l"][done].tolist() == [3] * int(done.sum())
    # episodes end at steps 3 and 7 (step 4 is the NEXT_STEP reset, which is not counted)
    assert seen == [[True, True], [True, True]]
    assert list(envs.return_queue) == [6.0] * 4
    assert list(envs.length_queue) == [3] * 4
    envs.close()


def test_record_episode_statistics_then_dict_info_to_list_on_catch() -> None:
    envs = DictInfoToList(
        RecordEpisodeStatistics(gymnasium.make_vec("openenv/Catch-v0", num_envs=3))
    )
    try:
        obs, infos = envs.reset(seed=1)
        assert isinstance(infos, list)
        assert len(infos) == 3
        assert all(info["game_phase"] == "initial" for info in infos)
        episodes = []
        for _ in range(10):  # a Catch episode is 9 steps
            obs, rewards, terminations, truncations, infos = envs.step(np.array([1, 1, 1]))
            assert obs.shape == (3, 50)
            assert rewards.shape == terminations.shape == truncations.shape == (3,)
            assert len(infos) == 3
            episodes += [info["episode"] for info in infos if "episode" in info]
        assert len(episodes) == 3
        assert all(e["l"] == 9 and e["r"] in (-1.0, 1.0) for e in episodes)
    finally:
        envs.close()


def test_dict_info_to_list_per_env_dicts(make_vector: Callable[..., OpenEnvVectorEnv]) -> None:
    envs = DictInfoToList(make_vector(num_envs=3))
    obs, infos = envs.reset(seed=[4, 5, 6])
    assert [info["count"] for info in infos] == obs.tolist() == [4, 5, 6]
    obs, *_, infos = envs.step(np.array([0, 1, 2]))
    assert [info["action"] for info in infos] == [0, 1, 2]
    assert [info["count"] for info in infos] == obs.tolist()
