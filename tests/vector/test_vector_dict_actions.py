"""Batches of actions for a ``Dict`` action space (Generic-v0 over a multi-field action).

Gymnasium's batched form of a ``Dict`` space is a mapping of batches (what
``envs.action_space.sample()`` gives); a list of per-env dicts is accepted too. Tool envs
(MCP) have such a space, so this is also what ``make_vec`` over an MCP server steps with.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from gymnasium import spaces
from openenv_gym_vector_envs import MOVE_SPEC

from openenv_gym.exceptions import ActionBatchError, EnvErrorGroup
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration


@pytest.fixture
def move(pool, protocol: str) -> Callable[[int], OpenEnvVectorEnv]:  # type: ignore[no-untyped-def]
    made: list[OpenEnvVectorEnv] = []

    def make(num_envs: int) -> OpenEnvVectorEnv:
        envs = OpenEnvVectorEnv(
            "generic", num_envs, base_url=pool.urls(MOVE_SPEC), protocol=protocol
        )
        made.append(envs)
        return envs

    yield make
    for envs in made:
        envs.close()


def _positions(obs: dict[str, np.ndarray]) -> list[tuple[int, int]]:
    return list(zip(obs["x"].tolist(), obs["y"].tolist(), strict=True))


def test_the_space_is_a_dict(move: Callable[[int], OpenEnvVectorEnv]) -> None:
    envs = move(3)
    assert isinstance(envs.single_action_space, spaces.Dict)
    assert set(envs.single_action_space) == {"dx", "dy", "label"}


def test_gymnasium_batched_form_steps_each_env(move: Callable[[int], OpenEnvVectorEnv]) -> None:
    envs = move(3)
    envs.reset()
    space = envs.single_action_space
    assert space["dx"] == spaces.Discrete(3, start=-1)
    assert space["label"] == spaces.Discrete(2)  # "walk", "run"
    batch = {
        "dx": np.array([1, -1, 0]),
        "dy": np.array([0, 0, 1]),
        "label": np.array([0, 1, 1]),
    }
    assert envs.action_space.contains(batch)
    obs, *_ = envs.step(batch)
    assert _positions(obs) == [(1, 0), (-2, 0), (0, 2)]
    assert obs["label"] == ("walk", "run", "run")


def test_sampled_batches_and_per_env_lists_agree(move: Callable[[int], OpenEnvVectorEnv]) -> None:
    """``action_space.sample()`` steps; the same actions as a list of dicts step alike."""
    a, b = move(4), move(4)
    a.reset()
    b.reset()
    a.action_space.seed(7)
    for _ in range(5):
        batch = a.action_space.sample()
        rows = [{k: batch[k][i] for k in batch} for i in range(4)]
        obs_a, *_ = a.step(batch)
        obs_b, *_ = b.step(rows)
        assert _positions(obs_a) == _positions(obs_b)
        assert obs_a["label"] == obs_b["label"]


def test_bad_dict_batches_are_refused_before_sending(
    move: Callable[[int], OpenEnvVectorEnv],
) -> None:
    envs = move(3)
    envs.reset()
    good = envs.action_space.sample()
    short = {**good, "dx": good["dx"][:2]}
    with pytest.raises(ActionBatchError, match="'dx': got 2 values, need one per sub-environment"):
        envs.step(short)
    with pytest.raises(ActionBatchError, match="unknown action key 'dz'"):
        envs.step({**good, "dz": good["dx"]})
    with pytest.raises(ActionBatchError, match="'label': got one value"):
        envs.step({**good, "label": 1})
    with pytest.raises(TypeError):  # ActionBatchError is a TypeError too, as Gymnasium's
        envs.step([good])
    # a value outside a sub-space fails that sub-env only, before anything is sent
    bad = {**good, "dx": np.array([0, 0, 5])}
    with pytest.raises(EnvErrorGroup) as caught:
        envs.step(bad)
    assert set(caught.value.errors) == {2}
    obs, *_ = envs.step(good)  # nothing was sent: every env moved once
    assert envs.observation_space.contains(obs)


def test_array_likes_are_batches(move: Callable[[int], OpenEnvVectorEnv]) -> None:
    """An object with ``__array__`` (a policy's tensor) is a batch, as an ndarray is."""

    class Tensor:
        def __init__(self, values: list[int]) -> None:
            self.values = values

        def __array__(self, dtype=None, copy=None):  # type: ignore[no-untyped-def]
            return np.array(self.values, dtype=dtype)

    envs = move(2)
    envs.reset()
    obs, *_ = envs.step({"dx": Tensor([1, -1]), "dy": Tensor([1, 0]), "label": Tensor([1, 0])})
    assert _positions(obs) == [(2, 2), (-1, 0)]
