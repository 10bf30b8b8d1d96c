"""In-process tests of the Echo environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from openenv_gym.runtime.environment import State
from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation


def test_reset_greets() -> None:
    env = EchoEnvironment()
    obs = env.reset(seed=3, episode_id="ep", extra="ignored")
    assert obs == EchoObservation(
        echoed_message="Echo environment ready!", message_length=0, done=False, reward=0.0
    )
    assert env.state == State(episode_id="ep", step_count=0)


@pytest.mark.parametrize("message", ["a", "Hello", "x" * 1000, "héllo wörld"])
def test_step_echoes_with_length_reward(message: str) -> None:
    env = EchoEnvironment()
    env.reset()
    obs = env.step(EchoAction(message=message))
    assert obs.echoed_message == message
    assert obs.message_length == len(message)
    assert obs.reward == pytest.approx(0.1 * len(message))
    assert obs.done is False
    assert obs.metadata == {"original_message": message, "step": 1}


def test_state_counts_steps_and_reset_clears() -> None:
    env = EchoEnvironment()
    assert env.state.episode_id is None
    env.reset()
    first = env.state.episode_id
    for _ in range(3):
        env.step(EchoAction(message="hi"))
    assert env.state.step_count == 3
    env.reset()
    assert env.state.step_count == 0
    assert env.state.episode_id not in (None, first)


def test_empty_message_is_rejected() -> None:
    with pytest.raises(ValidationError):
        EchoAction(message="")


def test_schema_matches_openenv_echo() -> None:
    assert set(EchoAction.model_json_schema()["properties"]) == {"message", "metadata"}
    assert EchoAction.model_json_schema()["properties"]["message"]["minLength"] == 1
    assert set(EchoObservation.model_json_schema()["properties"]) == {
        "done",
        "reward",
        "metadata",
        "echoed_message",
        "message_length",
    }
    assert EchoEnvironment.action_type is EchoAction
    assert EchoEnvironment.observation_type is EchoObservation
    assert EchoEnvironment.state_type is State
    assert EchoEnvironment.SUPPORTS_CONCURRENT_SESSIONS is True
    assert EchoEnvironment().get_metadata().name == "EchoEnvironment"


def test_observations_built_without_validation_equal_validated_ones() -> None:
    env = EchoEnvironment()
    built = env.reset()
    assert built == EchoObservation(echoed_message="Echo environment ready!", reward=0.0)
    obs = env.step(EchoAction(message="abc"))
    expected = EchoObservation(
        echoed_message="abc",
        message_length=3,
        reward=3 * 0.1,
        metadata={"original_message": "abc", "step": 1},
    )
    assert obs.model_dump() == expected.model_dump()
    assert list(obs.model_dump()) == list(EchoObservation.model_fields)


def test_step_batch_gives_what_step_gives() -> None:
    from openenv_gym.runtime.columns import batch_table, result_table

    batch_envs = [EchoEnvironment() for _ in range(3)]
    model_envs = [EchoEnvironment() for _ in range(3)]
    for env in (*batch_envs, *model_envs):
        env.reset(episode_id="ep")
    for messages in (["a", "bb", "ccc"], ["x" * 40, "y", "hello"]):
        actions = [EchoAction(message=m) for m in messages]
        batch = EchoEnvironment.step_batch(batch_envs, actions)
        observations = [e.step(a) for e, a in zip(model_envs, actions, strict=True)]
        from_models = result_table(observations)
        from_batch = batch_table(batch, EchoObservation, [None] * 3, [0, 1, 2])
        assert from_batch.observations == from_models.observations
        assert from_batch.rewards.tolist() == from_models.rewards.tolist()
        assert from_batch.dones.tolist() == from_models.dones.tolist()
        assert from_batch.metadata == from_models.metadata
    assert [e.state for e in batch_envs] == [e.state for e in model_envs]
