"""In-process tests of the Catch environment (OpenSpiel catch semantics)."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from openenv_gym_servers.catch import (
    CatchAction,
    CatchEnvironment,
    CatchObservation,
    CatchState,
    OpenSpielAction,
)

ROWS, COLUMNS = 10, 5
LEFT, STAY, RIGHT = 0, 1, 2


def ones(obs: CatchObservation) -> list[tuple[int, int]]:
    return [divmod(i, COLUMNS) for i, v in enumerate(obs.info_state) if v == 1.0]


def ball_column(obs: CatchObservation) -> int:
    return next(col for row, col in ones(obs) if row < ROWS - 1)


def paddle_column(obs: CatchObservation) -> int:
    return next(col for row, col in ones(obs) if row == ROWS - 1)


def move(env: CatchEnvironment, action_id: int) -> CatchObservation:
    return env.step(CatchAction(action_id=action_id))


@pytest.fixture
def env() -> CatchEnvironment:
    return CatchEnvironment()


def test_reset_observation(env: CatchEnvironment) -> None:
    obs = env.reset(seed=0, episode_id="ep-1")
    assert len(obs.info_state) == ROWS * COLUMNS
    assert all(v in (0.0, 1.0) for v in obs.info_state)
    cells = ones(obs)
    assert len(cells) == 2
    assert cells[0][0] == 0  # ball in the top row
    assert cells[1] == (ROWS - 1, 2)  # paddle bottom middle
    assert obs.legal_actions == [0, 1, 2]
    assert obs.game_phase == "initial"
    assert obs.current_player_id == 0
    assert obs.opponent_last_action is None
    assert obs.done is False
    assert obs.reward is None
    assert env.state == CatchState(episode_id="ep-1", step_count=0)


def test_nine_steps_to_done(env: CatchEnvironment) -> None:
    env.reset(seed=1)
    for row in range(1, ROWS - 1):
        obs = move(env, STAY)
        assert (obs.done, obs.reward, obs.game_phase) == (False, 0.0, "playing")
        assert obs.legal_actions == [0, 1, 2]
        ball = [cell for cell in ones(obs) if cell[0] == row]
        assert len(ball) == 1
    obs = move(env, STAY)
    assert obs.done is True
    assert obs.reward in (1.0, -1.0)
    assert obs.game_phase == "terminal"
    assert obs.legal_actions == []
    assert obs.current_player_id == -4
    assert env.state.step_count == ROWS - 1


def test_tracking_the_ball_catches_it(env: CatchEnvironment) -> None:
    for seed in range(10):
        obs = env.reset(seed=seed)
        target = ball_column(obs)
        while not obs.done:
            paddle = paddle_column(obs)
            obs = move(env, STAY + (target > paddle) - (target < paddle))
            assert len(ones(obs)) == (1 if obs.done else 2)
        assert obs.reward == 1.0
        assert ones(obs) == [(ROWS - 1, target)]


def test_moving_away_misses(env: CatchEnvironment) -> None:
    for seed in range(10):
        obs = env.reset(seed=seed)
        action = RIGHT if ball_column(obs) < 2 else LEFT
        for _ in range(ROWS - 1):
            obs = move(env, action)
        assert (obs.done, obs.reward) == (True, -1.0)
        assert len(ones(obs)) == 2


@pytest.mark.parametrize(("action", "column"), [(LEFT, 0), (RIGHT, COLUMNS - 1)])
def test_paddle_is_clipped_to_the_board(env: CatchEnvironment, action: int, column: int) -> None:
    env.reset(seed=2)
    obs = move(env, action)
    assert paddle_column(obs) == 2 + (1 if action == RIGHT else -1)
    for _ in range(ROWS - 2):
        obs = move(env, action)
    assert (ROWS - 1, column) in ones(obs)
    assert obs.done is True


def test_same_seed_same_ball_columns_across_resets() -> None:
    def columns(seed: int) -> list[int]:
        env = CatchEnvironment()
        seq = [ball_column(env.reset(seed=seed))]
        seq += [ball_column(env.reset()) for _ in range(19)]
        return seq

    first = columns(7)
    assert first == columns(7)
    assert len(set(first)) > 1
    assert set(first) <= set(range(COLUMNS))


def test_different_seeds_differ(env: CatchEnvironment) -> None:
    assert len({ball_column(env.reset(seed=seed)) for seed in range(20)}) > 1


def test_unseeded_instances_are_fresh_and_global_rng_untouched() -> None:
    random.seed(5)
    expected = random.random()
    random.seed(5)
    assert len({ball_column(CatchEnvironment().reset()) for _ in range(30)}) > 1
    CatchEnvironment().reset(seed=1)
    assert random.random() == expected


@pytest.mark.parametrize("action_id", [-1, 3, 100])
def test_illegal_action_raises_and_changes_nothing(env: CatchEnvironment, action_id: int) -> None:
    before = env.reset(seed=4)
    with pytest.raises(ValueError, match="illegal action_id"):
        move(env, action_id)
    assert env.state.step_count == 0
    after = move(env, STAY)
    assert ball_column(after) == ball_column(before)
    assert ones(after)[0][0] == 1


def test_step_after_done_repeats_terminal_observation(env: CatchEnvironment) -> None:
    env.reset(seed=3)
    for _ in range(ROWS - 1):
        final = move(env, STAY)
    again = move(env, LEFT)
    assert again.done is True
    assert again.reward == 0.0
    assert again.info_state == final.info_state
    assert again.game_phase == "terminal"
    with pytest.raises(ValueError, match="illegal action_id"):
        move(env, 5)
    obs = env.reset()
    assert (obs.done, obs.game_phase) == (False, "initial")


def test_episode_id_and_kwargs(env: CatchEnvironment) -> None:
    env.reset(episode_id="abc", anything="goes")
    assert env.state.episode_id == "abc"
    env.reset()
    assert env.state.episode_id not in (None, "abc")


def test_action_model() -> None:
    action = CatchAction(action_id=2)
    assert (action.game_name, action.game_params) == ("catch", {})
    with pytest.raises(ValidationError):
        CatchAction.model_validate({"action_id": 1, "unknown": 0})
    assert OpenSpielAction is CatchAction


def test_schema_matches_openenv_openspiel() -> None:
    action = CatchAction.model_json_schema()
    assert set(action["properties"]) == {"action_id", "game_name", "game_params", "metadata"}
    assert action["properties"]["action_id"] == {"title": "Action Id", "type": "integer"}
    assert set(CatchObservation.model_json_schema()["properties"]) == {
        "done",
        "reward",
        "metadata",
        "info_state",
        "legal_actions",
        "game_phase",
        "current_player_id",
        "opponent_last_action",
    }
    assert set(CatchState.model_json_schema()["properties"]) == {
        "episode_id",
        "step_count",
        "game_name",
        "agent_player",
        "opponent_policy",
        "game_params",
        "num_players",
    }
    state = CatchEnvironment().state
    assert (state.game_name, state.agent_player, state.opponent_policy) == (
        "catch",
        0,
        "random",
    )
    assert (state.game_params, state.num_players) == ({}, 1)


def test_class_attributes_and_metadata(env: CatchEnvironment) -> None:
    assert CatchEnvironment.action_type is CatchAction
    assert CatchEnvironment.observation_type is CatchObservation
    assert CatchEnvironment.state_type is CatchState
    assert CatchEnvironment.SUPPORTS_CONCURRENT_SESSIONS is True
    assert env.get_metadata().name == "CatchEnvironment"
