"""The winning Wordle step: Gymnasium users see the game's last word, not the wire's prompt.

On the move that wins, the game sends no message, and the wire's ``prompt`` field is the env
id ``"Wordle-v0"`` (as TextArena's); the observation is the game's reason instead, on the
single env and on the vector env over both protocols (the wire itself is unchanged:
``info["prompt"]`` is still the env id).
"""

from __future__ import annotations

import gymnasium
import pytest

import openenv_gym  # noqa: F401 - registers the ids

pytestmark = pytest.mark.integration

WIN = "Congratulations! You guessed the word correctly!"


def test_the_single_env_shows_the_win() -> None:
    env = gymnasium.make("openenv/Wordle-v0")
    try:
        env.reset(seed=5)
        secret = env.unwrapped.state()["raw_state"]["game_state"]["secret_word"]
        obs, reward, terminated, _, info = env.step(f"[{secret}]")
        assert (obs, reward, terminated) == (WIN, 1.0, True)
        assert info["prompt"] == "Wordle-v0"  # the wire is TextArena's
    finally:
        env.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_the_vector_env_shows_the_win(protocol: str) -> None:
    envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=2, protocol=protocol)
    try:
        envs.reset(seed=5)
        states = envs.unwrapped.call("state")
        secret = states[0]["raw_state"]["game_state"]["secret_word"]
        obs, rewards, terminations, _, _ = envs.step([f"[{secret}]", "[zzzzz]"])
        assert obs[0] == WIN
        assert obs[1].startswith("You attempted an invalid move.")
        assert (rewards[0], bool(terminations[0]), bool(terminations[1])) == (1.0, True, False)
    finally:
        envs.close()
