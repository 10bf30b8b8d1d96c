"""OpenEnvVectorEnv gives what gymnasium.vector.SyncVectorEnv over OpenEnvEnv gives.

Same server kind, same protocol, same seeds, same actions: observations, rewards,
terminations, truncations and infos must be equal at every step (compared with
Gymnasium's ``data_equivalence``, NaN-aware, see vector_checks.same), through several
autoresets, in both autoreset modes that autoreset.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from vector_checks import same

from openenv_gym.env import OpenEnvEnv
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

NUM_ENVS = 3
STEPS = 30
GUESSES = ["[crane]", "[slate]", "[pious]", "[crane]", "hello", "[moist]", "[xx]", "[tiger]"]


def actions_for(env: str, step: int) -> Any:
    if env == "wordle":
        return tuple(GUESSES[(step + 3 * i) % len(GUESSES)] for i in range(NUM_ENVS))
    rng = np.random.default_rng(step)
    return rng.integers(0, 3, NUM_ENVS)


CASES = [("catch", None), ("catch", 4), ("wordle", None)]
AUTORESETTING = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


@pytest.mark.parametrize(
    "mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name
)
@pytest.mark.parametrize(("env", "max_steps"), CASES, ids=["catch", "catch-truncated", "wordle"])
def test_same_trajectories_as_sync_vector_env(
    make_vector: Callable[..., OpenEnvVectorEnv],
    pool: Any,
    protocol: str,
    mode: AutoresetMode,
    env: str,
    max_steps: int | None,
) -> None:
    ours = make_vector(
        env, num_envs=NUM_ENVS, protocol=protocol, autoreset_mode=mode, max_episode_steps=max_steps
    )
    (url,) = pool.urls(env)
    single = partial(OpenEnvEnv, env, base_url=url, protocol=protocol, max_episode_steps=max_steps)
    sync = SyncVectorEnv([single] * NUM_ENVS, autoreset_mode=mode)
    try:
        assert ours.single_observation_space == sync.single_observation_space
        assert ours.single_action_space == sync.single_action_space
        assert ours.observation_space == sync.observation_space
        assert ours.action_space == sync.action_space
        assert sync.get_attr("protocol") == (protocol,) * NUM_ENVS

        obs, infos = ours.reset(seed=7)
        sync_obs, sync_infos = sync.reset(seed=7)
        assert same(obs, sync_obs)
        assert same(infos, sync_infos)
        episodes_ended = 0
        for step in range(STEPS):
            actions = actions_for(env, step)
            got = ours.step(actions)
            expected = sync.step(actions)
            for name, a, b in zip(
                ("obs", "rewards", "terminations", "truncations", "infos"),
                got,
                expected,
                strict=True,
            ):
                assert same(a, b), f"step {step}: {name} differ:\n{a!r}\n{b!r}"
            episodes_ended += int(np.sum(got[2] | got[3]))
        assert episodes_ended >= NUM_ENVS  # autoresets were exercised
    finally:
        sync.close()


@pytest.mark.parametrize("mode", AUTORESETTING, ids=lambda m: m.name)
@pytest.mark.parametrize("env", ["catch", "wordle"])
def test_batch_and_json_protocols_agree(
    make_vector: Callable[..., OpenEnvVectorEnv], mode: AutoresetMode, env: str
) -> None:
    batch = make_vector(env, num_envs=NUM_ENVS, protocol="batch", autoreset_mode=mode)
    json = make_vector(env, num_envs=NUM_ENVS, protocol="json", autoreset_mode=mode)
    assert same(batch.reset(seed=11), json.reset(seed=11))
    for step in range(STEPS):
        actions = actions_for(env, step)
        got, expected = batch.step(actions), json.step(actions)
        assert same(got, expected), f"step {step}:\n{got!r}\n{expected!r}"
