"""A failed or lost sub-env does not change what happens to its siblings in the same step.

Two promises of docs/vector.md, pinned where the step that carries them has a failure in
it (issue 23, items 2 and 3):

* **Autoreset after a time limit.** A sibling truncated by ``max_episode_steps`` in a step
  where another sub-env failed, or lost its connection, autoresets like any truncated
  sub-env. (Autoresetting only *terminated* sub-envs on that path passed every test.)
* **No transition is lost.** :class:`~openenv_gym.exceptions.EnvErrorGroup` carries each
  sibling's ``(obs, reward, terminated, truncated, info)``: the values, not only the keys.

One local counter server for the module (sessions are fresh per env); the lost connection
is a :class:`~fault_support.CutProxy` dropping one sub-env's socket while the server lives.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fault_support import FAULTS, CutProxy, no_leftovers  # noqa: F401
from gymnasium.vector import AutoresetMode
from openenv_gym_vector_envs import RAISE, SPEC, counter_codec, subprocess_pythonpath

from openenv_gym.exceptions import EnvErrorGroup, ServerError
from openenv_gym.providers import LocalProvider
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leftovers")]

TIMEOUTS = {"step": 10.0, "connect": 5.0, "close": 1.0}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, str | None]]:
    """One counter server for the module: its URL and token."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join([str(FAULTS), subprocess_pythonpath()]))
        provider = LocalProvider(SPEC)
        try:
            (url,) = provider.start()
            yield url, provider.token(0)
        finally:
            provider.close()


def counter(count: int, steps: int, action: int) -> dict[str, Any]:
    """The info of a counter step (every wire field; the observation is ``count``)."""
    return {"count": count, "steps": steps, "action": action, "episode_length": 3}


def plain(result: tuple[Any, ...]) -> tuple[Any, ...]:
    """A per-env result with numpy scalars as Python ones (for ==)."""
    obs, reward, terminated, truncated, info = result
    return int(obs), reward, terminated, truncated, info


@pytest.mark.parametrize("protocol", ["batch", "json"])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_siblings_of_a_failed_sub_env_keep_their_step_and_their_autoreset(
    server: tuple[str, str | None], protocol: str, mode: AutoresetMode
) -> None:
    url, token = server
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=3,  # one frame per step: the failure and its siblings share it
        base_url=url,
        token=token,
        protocol=protocol,
        timeouts=TIMEOUTS,
        max_episode_steps=2,  # episodes of 3 steps: the limit truncates at step 2
        autoreset_mode=mode,
    )
    try:
        envs.reset(seed=[10, 20, 30])
        assert envs.step([0, 0, 0])[0].tolist() == [11, 21, 31]
        with pytest.raises(EnvErrorGroup) as caught:
            envs.step([RAISE, 0, 0])  # sub-env 0 raises; 1 and 2 reach the time limit
        group = caught.value
        assert group.env_indices == [0]
        assert isinstance(group.errors[0], ServerError)
        assert sorted(group.results) == [1, 2]
        for i in (1, 2):
            before = 10 * (i + 1) + 2
            if mode is AutoresetMode.NEXT_STEP:
                assert plain(group.results[i]) == (before, 2.0, False, True, counter(before, 2, 0))
            else:  # already reset: the fresh episode, the ended one in final_obs / final_info
                obs, reward, terminated, truncated, info = plain(group.results[i])
                assert (obs, reward, terminated, truncated) == (0, 2.0, False, True)
                assert int(info.pop("final_obs")) == before
                assert info == {"final_info": counter(before, 2, 0), **counter(0, 0, -1)}
        obs, rewards, terminated, truncated, _ = envs.step([0, 0, 0])
        if mode is AutoresetMode.NEXT_STEP:
            # 0 takes its second step (its failed one did not count); 1, 2 autoreset
            assert obs.tolist() == [12, 0, 0]
            assert rewards.tolist() == [2.0, 0.0, 0.0]
            assert truncated.tolist() == [True, False, False]
        else:
            assert obs.tolist() == [0, 1, 1]
            assert rewards.tolist() == [2.0, 1.0, 1.0]
            assert truncated.tolist() == [True, False, False]
        assert not terminated.any()
    finally:
        envs.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_siblings_of_a_failed_sub_env_below_the_time_limit_are_not_truncated(
    server: tuple[str, str | None], protocol: str
) -> None:
    url, token = server
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=3,
        base_url=url,
        token=token,
        protocol=protocol,
        timeouts=TIMEOUTS,
        max_episode_steps=5,
    )
    try:
        envs.reset(seed=[10, 20, 30])
        with pytest.raises(EnvErrorGroup) as caught:
            envs.step([RAISE, 0, 0])  # sub-env 0 raises; 1 and 2 take their first step
        for i in (1, 2):
            obs, reward, terminated, truncated, _ = plain(caught.value.results[i])
            assert (obs, reward, terminated, truncated) == (10 * (i + 1) + 1, 1.0, False, False)
        obs, _, terminated, truncated, _ = envs.step([0, 0, 0])
        assert obs.tolist() == [11, 22, 32]  # no autoreset: nothing ended
        assert not (terminated | truncated).any()
    finally:
        envs.close()


def test_siblings_of_a_lost_connection_autoreset_after_the_time_limit(
    server: tuple[str, str | None],
) -> None:
    """Over JSON each sub-env has a connection of its own: one is cut, the server lives."""
    url, token = server
    proxy = CutProxy(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=3,
        base_url=proxy.url,
        token=token,
        protocol="json",
        timeouts=TIMEOUTS,
        max_episode_steps=2,
        on_server_loss="restart",
    )
    try:
        envs.reset(seed=[10, 20, 30])
        assert envs.step([0, 0, 0])[0].tolist() == [11, 21, 31]
        assert proxy.connections == 3
        proxy.cut(only=1)  # the first connection the env opened: one sub-env's
        obs, rewards, terminated, truncated, infos = envs.step([0, 0, 0])
        (lost,) = np.flatnonzero(infos["server_lost"]).tolist()
        assert infos["_server_lost"].tolist() == [i == lost for i in range(3)]
        # the lost one: its last observation; the others: their step, at the time limit
        want = [10 * (i + 1) + (1 if i == lost else 2) for i in range(3)]
        assert obs.tolist() == want
        assert rewards.tolist() == [0.0 if i == lost else 2.0 for i in range(3)]
        assert truncated.tolist() == [True, True, True]
        assert not terminated.any()
        # every one autoresets: the lost one and, as truncated, its siblings
        obs, rewards, terminated, truncated, infos = envs.step([0, 0, 0])
        assert obs.tolist() == [0, 0, 0]
        assert rewards.tolist() == [0.0, 0.0, 0.0]
        assert not truncated.any()
        assert not terminated.any()
        assert "server_lost" not in infos
        assert envs.step([0, 0, 0])[0].tolist() == [1, 1, 1]
    finally:
        envs.close()
        proxy.close()
