"""Our server runtime hosting an environment class written against OpenEnv's base.

``openenv-gym serve --env openenv_counter_env:CounterEnvironment``: the class sets no
``action_type``, so the loader reads its models from the type hints of ``step`` and
``state``. The same server is then driven by ``gymnasium.make_vec`` over our BATCHED
protocol and by OpenEnv's official clients over ``/ws``.

Version difference asserted here: ``StepResult.metadata`` only exists from openenv 0.4.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openenv")

import gymnasium
import numpy as np
from interop_support import WIRE_METADATA, Server, get_json
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.generic_client import GenericEnvClient
from openenv_counter_env import (
    CounterAction,
    CounterEnvironment,
    CounterObservation,
    CounterState,
    counter_codec,
    expected_run,
    target_for,
)

from openenv_gym.config import Timeouts
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    EnvErrorGroup,
    ExecutionError,
    ServerValidationError,
)
from openenv_gym.runtime.loader import EnvModels, resolve_models
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.openenv

SPEC = "openenv_counter_env:CounterEnvironment"
ENV_ID = "openenv-gym-interop/Counter-v0"
TIMEOUTS = Timeouts(connect=10.0, step=30.0, close=5.0)


def _make_env(**kwargs: Any) -> OpenEnvEnv:
    return OpenEnvEnv(codec=counter_codec(), **kwargs)


def _make_vec(num_envs: int, **kwargs: Any) -> OpenEnvVectorEnv:
    return OpenEnvVectorEnv(num_envs=num_envs, codec=counter_codec(), **kwargs)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=_make_env, vector_entry_point=_make_vec)


class CounterClient(EnvClient[CounterAction, CounterObservation, CounterState]):
    """A typed client for the counter, as OpenEnv's env packages write theirs."""

    def _step_payload(self, action: CounterAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CounterObservation]:
        reward, done = payload.get("reward"), payload.get("done", False)
        observation = CounterObservation.model_validate(
            {**payload["observation"], "reward": reward, "done": done}
        )
        extra = {"metadata": payload.get("metadata")} if WIRE_METADATA else {}
        return StepResult(observation=observation, reward=reward, done=done, **extra)

    def _parse_state(self, payload: dict[str, Any]) -> CounterState:
        return CounterState.model_validate(payload)


@pytest.fixture
def server(shared_server) -> Server:
    return shared_server("--env", SPEC)


def test_loader_reads_the_type_hints():
    assert not hasattr(CounterEnvironment, "action_type")
    assert resolve_models(CounterEnvironment) == EnvModels(
        CounterAction, CounterObservation, CounterState
    )


def test_schema_and_metadata(server):
    status, schema = get_json(f"{server.url}/schema")
    assert status == 200
    assert schema == {
        "action": CounterAction.model_json_schema(),
        "observation": CounterObservation.model_json_schema(),
        "state": CounterState.model_json_schema(),
    }
    status, metadata = get_json(f"{server.url}/metadata")
    assert status == 200
    assert metadata == CounterEnvironment().get_metadata().model_dump(mode="json")


def test_make_vec_over_the_batched_protocol(server):
    envs = gymnasium.make_vec(ENV_ID, num_envs=4, base_url=server.url, timeouts=TIMEOUTS)
    try:
        assert envs.unwrapped.protocols == ("batch",)
        runs = expected_run(seed=30, num_envs=4, rounds=10)
        obs, infos = envs.reset(seed=30)
        assert obs.tolist() == runs[0][0]
        # metadata travels apart on the batched protocol, whatever the openenv version
        assert infos["metadata"]["seed"].tolist() == [30, 31, 32, 33]
        for expected_obs, expected_rewards, expected_dones in runs[1:]:
            obs, rewards, terminations, truncations, infos = envs.step(np.ones(4, np.int64))
            assert obs.tolist() == expected_obs
            assert rewards.tolist() == expected_rewards
            assert terminations.tolist() == expected_dones
            assert not truncations.any()
    finally:
        envs.close()


def test_generic_id_over_the_batched_protocol(server):
    """``openenv/Generic-v0``: spaces from our server's ``/schema`` of the OpenEnv class."""
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=4, base_url=server.url)
    try:
        assert envs.unwrapped.protocols == ("batch",)
        runs = expected_run(seed=50, num_envs=4, rounds=8)
        obs, _ = envs.reset(seed=50)
        assert np.stack([obs["count"], obs["target"]], 1).tolist() == runs[0][0]
        for expected_obs, expected_rewards, expected_dones in runs[1:]:
            obs, rewards, terminations, _, _ = envs.step(np.ones(4, np.int64))
            assert np.stack([obs["count"], obs["target"]], 1).tolist() == expected_obs
            assert rewards.tolist() == expected_rewards
            assert terminations.tolist() == expected_dones
    finally:
        envs.close()


def test_make_vec_errors(server):
    envs = gymnasium.make_vec(ENV_ID, num_envs=2, base_url=server.url, timeouts=TIMEOUTS)
    try:
        envs.reset(seed=1)
        with pytest.raises(EnvErrorGroup) as group:
            envs.step(np.array([-1, -1]))  # below zero: the environment raises
        assert sorted(group.value.errors) == [0, 1]
        assert all(isinstance(e, ExecutionError) for e in group.value.errors.values())
    finally:
        envs.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_single_env(server, protocol):
    env = gymnasium.make(ENV_ID, base_url=server.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        assert env.unwrapped.protocol == protocol
        obs, info = env.reset(seed=2, options={"episode_id": "c-2", "start": 1})
        assert obs.tolist() == [1, target_for(2)]
        assert info["metadata"] == {"seed": 2}
        with pytest.raises(ServerValidationError):
            env.unwrapped.session.step({"delta": 5})
        with pytest.raises(ExecutionError, match=r"within 0\.\.50"):
            env.unwrapped.session.step({"delta": -2})
        obs, reward, terminated, truncated, info = env.step(-1)
        assert obs.tolist() == [0, target_for(2)]
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["metadata"] == {"step": 1}
        assert env.unwrapped.state() == {
            "episode_id": "c-2",
            "step_count": 1,
            "count": 0,
            "target": target_for(2),
        }
    finally:
        env.close()


def test_official_clients_over_ws(server):
    with CounterClient(base_url=server.url).sync() as client:
        result = client.reset(seed=4, episode_id="typed")
        assert result.observation == CounterObservation(
            count=0, target=target_for(4), reward=0.0, metadata={"seed": 4}
        )
        result = client.step(CounterAction(delta=1))
        assert result.observation.count == 1
        assert (result.reward, result.done) == (float(target_for(4) == 1), target_for(4) == 1)
        if WIRE_METADATA:
            assert result.metadata == {"step": 1}
        assert client.state() == CounterState(
            episode_id="typed", step_count=1, count=1, target=target_for(4)
        )
    with GenericEnvClient(base_url=server.url).sync() as generic:
        generic.reset(seed=4)
        with pytest.raises(RuntimeError, match=r"\(code: VALIDATION_ERROR\)"):
            generic.step({"delta": 9})
        with pytest.raises(RuntimeError, match=r"\(code: EXECUTION_ERROR\)"):
            generic.step({"delta": -1})
        assert generic.step({"delta": 2}).observation["count"] == 2
        assert generic.state()["step_count"] == 1
