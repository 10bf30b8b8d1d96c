"""``openenv/Wordle-v0`` against a server with the layout of OpenEnv's ``textarena_env``.

That server (:mod:`openenv_textarena_env`, on OpenEnv's own base classes and
``create_app``) sends the whole episode as ONE message (sender ``-1``, category
``MESSAGE``) that grows every turn, and ignores ``reset``'s seed. The observation must
still be this turn's text: the same text our own Wordle server gives, of a length that does
not grow with the turn number.
"""

from __future__ import annotations

import pytest

pytest.importorskip("openenv")

import itertools

import gymnasium
from interop_support import Server

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym.integrations.trl import environment_factory
from openenv_gym.spaces import codec_for
from openenv_gym_servers.wordle import WordleEnvironment
from openenv_gym_servers.wordle.words import score_guess, secret_words

pytestmark = pytest.mark.openenv

ENV_ID = "Wordle-v0"


@pytest.fixture
def textarena(shared_app) -> Server:
    return shared_app("textarena_wordle")


def _prompt() -> str:
    """The first observation our own Wordle server gives."""
    reset = WordleEnvironment().reset(seed=0)
    return str(codec_for("wordle").decode_observation(reset.model_dump(mode="json")))


def _feedback(guess: str, secret: str, left: int) -> str:
    """The game's reply to a valid, wrong guess (TextArena's words)."""
    return (
        f"You submitted [{guess}].\nFeedback:\n{' '.join(guess.upper())}\n"
        f"{' '.join(score_guess(guess, secret))}\nYou have {left} guesses left."
    )


def _wrong_guesses(secret: str, count: int) -> list[str]:
    return [w for w in secret_words() if w != secret][:count]


def test_every_step_observation_is_one_turn(textarena):
    env = gymnasium.make("openenv/Wordle-v0", base_url=textarena.url)
    try:
        obs, info = env.reset(seed=3)
        assert obs == _prompt()
        (message,) = info["messages"]  # the upstream layout: one merged message
        assert (message["sender_id"], message["category"]) == (-1, "MESSAGE")
        assert message["content"].startswith("\n[GAME] You are Playing Wordle.")
        secret = env.unwrapped.state()["raw_state"]["game_state"]["secret_word"]
        transcript = [len(message["content"])]
        feedback_lengths = []
        for turn, guess in enumerate(_wrong_guesses(secret, 4), start=1):
            obs, reward, terminated, _, info = env.step(f"[{guess}]")
            assert obs == _feedback(guess, secret, 6 - turn)
            assert (reward, terminated) == (0.0, False)
            feedback_lengths.append(len(obs))
            transcript.append(len(info["messages"][0]["content"]))
        obs, _, terminated, _, info = env.step("[zzzzz]")  # not a word: a warning
        assert obs.startswith("You attempted an invalid move. Reason: ")
        assert "[GAME]" not in obs
        assert not terminated
        transcript.append(len(info["messages"][0]["content"]))
        obs, reward, terminated, _, info = env.step(f"[{secret}]")
        assert (reward, terminated) == (1.0, True)
        # the game says nothing after a win, and the wire's prompt is the env id: the
        # observation is the game's reason instead
        assert info["prompt"] == ENV_ID
        assert obs == "Congratulations! You guessed the word correctly!"
        transcript.append(len(info["messages"][0]["content"]))
        # the server's transcript grows every turn; our observation does not
        assert all(b > a for a, b in itertools.pairwise(transcript))
        assert transcript[-1] > 2 * transcript[0]
        assert len(set(feedback_lengths)) == 1  # ours does not: one turn each
    finally:
        env.close()


def test_the_vector_env_sees_one_turn_per_step_too(textarena):
    envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=3, base_url=textarena.url)
    try:
        obs, _ = envs.reset(seed=0)
        assert list(obs) == [_prompt()] * 3
        states = envs.unwrapped.call("state")
        secrets = [state["raw_state"]["game_state"]["secret_word"] for state in states]
        for turn in range(1, 4):
            guesses = [_wrong_guesses(secret, 3)[turn - 1] for secret in secrets]
            obs, _, terminations, _, _ = envs.step([f"[{g}]" for g in guesses])
            expected = [
                _feedback(g, secret, 6 - turn) for g, secret in zip(guesses, secrets, strict=True)
            ]
            assert list(obs) == expected
            assert not terminations.any()
    finally:
        envs.close()


def test_seeds_are_ignored_there(textarena):
    """The server is seed-ignoring, as upstream's TextArena: the same seed, other words."""
    env = gymnasium.make("openenv/Wordle-v0", base_url=textarena.url)
    try:
        secrets = set()
        for _ in range(6):
            env.reset(seed=123)
            secrets.add(env.unwrapped.state()["raw_state"]["game_state"]["secret_word"])
        assert len(secrets) > 1
    finally:
        env.close()


def test_the_trl_guess_tool_returns_one_turn(textarena):
    factory = environment_factory("openenv/Wordle-v0", base_url=textarena.url)
    try:
        instance = factory()
        assert instance.reset(seed=1) == _prompt()
        secret = instance.env.unwrapped.state()["raw_state"]["game_state"]["secret_word"]
        guess = _wrong_guesses(secret, 1)[0]
        assert instance.guess(guess) == _feedback(guess, secret, 5)
        assert "The episode is over" in instance.guess(secret)
        assert instance.get_reward() == 1.0
    finally:
        factory.close()
