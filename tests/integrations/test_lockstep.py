"""openenv_gym.integrations.lockstep: text episodes over the sub-envs of a vector env."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import SyncVectorEnv

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.exceptions import EpisodeOverError, InvalidActionError
from openenv_gym.integrations.lockstep import Lockstep, Turn, info_at, step_text
from openenv_gym.integrations.text import TextInterface, text_interface
from openenv_gym.vector import OpenEnvVectorEnv
from openenv_gym_servers.catch import CatchEnvironment
from openenv_gym_servers.wordle import WordleEnvironment

PROMPT_START = "You are Playing Wordle."


def secret_for(seed: int) -> str:
    """The secret word our Wordle server draws for ``reset(seed=seed)`` (in-process oracle)."""
    env = WordleEnvironment()
    env.reset(seed=seed)
    return str(env.state.raw_state["game_state"]["secret_word"])


def ball_column(seed: int) -> int:
    """The column the Catch ball falls in after ``reset(seed=seed)`` (in-process oracle)."""
    board = CatchEnvironment().reset(seed=seed).info_state
    return int(np.flatnonzero(board[:5])[0])


def states(envs: Any) -> tuple[dict[str, Any], ...]:
    return tuple(envs.unwrapped.call("state"))


def step_counts(envs: Any) -> list[int]:
    return [int(s["step_count"]) for s in states(envs)]


def secrets(envs: Any) -> list[str]:
    return [str(s["raw_state"]["game_state"]["secret_word"]) for s in states(envs)]


def guesses(envs: Any) -> list[list[str]]:
    return [[g[0] for g in s["raw_state"]["game_state"]["guess_history"]] for s in states(envs)]


def seed_without(word: str, count: int) -> int:
    """A seed whose ``count`` sub-envs (seeds seed..seed+count-1) all have another secret."""
    return next(s for s in range(100) if all(secret_for(s + i) != word for i in range(count)))


# ------------------------------------------------------------------ shared real servers


@pytest.fixture(scope="module")
def wordle_envs() -> Iterator[Any]:
    envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=4)
    try:
        yield envs
    finally:
        envs.close()


@pytest.fixture(scope="module")
def catch_envs() -> Iterator[Any]:
    envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=4)
    try:
        yield envs
    finally:
        envs.close()


@pytest.fixture(scope="module")
def echo_envs() -> Iterator[Any]:
    envs = gymnasium.make_vec("openenv/Echo-v0", num_envs=2)
    try:
        yield envs
    finally:
        envs.close()


@pytest.fixture
def wordle(wordle_envs: Any) -> Lockstep:
    return Lockstep(wordle_envs)


def _strict_wordle_parse(text: str) -> str:
    found = re.findall(r"\[([a-z]+)\]", text)
    if not found:
        raise InvalidActionError("no guess found: answer like [crane]")
    return f"[{found[-1]}]"


# ------------------------------------------------------------------ Wordle


@pytest.mark.integration
def test_reset_returns_texts(wordle_envs: Any, wordle: Lockstep) -> None:
    assert isinstance(wordle_envs.unwrapped, OpenEnvVectorEnv)
    assert wordle.interface.tool_name == "guess"
    assert wordle.num_envs == 4
    assert wordle.done == [True] * 4  # no episode yet
    texts = wordle.reset(seed=0)
    assert len(texts) == 4
    assert all(isinstance(t, str) and t.startswith(PROMPT_START) for t in texts)
    assert "square brackets" in texts[0]
    assert wordle.done == [False] * 4
    assert wordle.returns == [0.0] * 4
    assert step_counts(wordle_envs) == [0] * 4


@pytest.mark.integration
def test_seeds_are_honoured(wordle_envs: Any, wordle: Lockstep) -> None:
    wordle.reset(seed=10)
    first = secrets(wordle_envs)
    assert first == [secret_for(s) for s in (10, 11, 12, 13)]
    assert len(set(first)) > 1  # the oracle is not constant
    wordle.reset(seed=[7, 7, None, 3])
    second = secrets(wordle_envs)
    assert second[0] == second[1] == secret_for(7)
    assert second[3] == secret_for(3)
    wordle.reset(seed=10)
    assert secrets(wordle_envs) == first


@pytest.mark.integration
def test_step_only_the_answering_sub_envs(wordle_envs: Any, wordle: Lockstep) -> None:
    wordle.reset(seed=seed_without("crane", 4))
    turns = wordle.step({1: "[crane]", 3: "<think>[slate]?</think> CRANE"})
    assert sorted(turns) == [1, 3]
    assert step_counts(wordle_envs) == [0, 1, 0, 1]
    assert guesses(wordle_envs) == [[], ["crane"], [], ["crane"]]
    for turn in turns.values():
        assert isinstance(turn, Turn)
        assert turn.action == "[crane]"
        assert turn.text.startswith("You submitted [crane].")
        assert turn.text.endswith("You have 5 guesses left.")
        assert (turn.reward, turn.terminated, turn.truncated) == (0.0, False, False)
        assert "reward_signals" in turn.info["info"]
    turns = wordle.step({0: "[slate]"})
    assert list(turns) == [0]
    assert step_counts(wordle_envs) == [1, 1, 0, 1]
    assert wordle.step({}) == {}
    assert step_counts(wordle_envs) == [1, 1, 0, 1]


@pytest.mark.integration
def test_unparseable_answer_does_not_reach_the_env(wordle_envs: Any) -> None:
    strict = replace(text_interface(wordle_envs), parse_action=_strict_wordle_parse)
    lockstep = Lockstep(wordle_envs, strict)
    lockstep.reset(seed=seed_without("crane", 4))
    turns = lockstep.step({0: "I have no idea", 1: "[crane]"})
    assert turns[0] == Turn(
        "Invalid action: no guess found: answer like [crane]", 0.0, False, False, None, {}
    )
    assert turns[1].action == "[crane]"
    assert step_counts(wordle_envs) == [0, 1, 0, 0]
    assert lockstep.done == [False] * 4
    turns = lockstep.step({0: "[crane]"})  # no guess was used up
    assert turns[0].text.endswith("You have 5 guesses left.")
    assert step_counts(wordle_envs) == [1, 1, 0, 0]
    # an action outside the action space (Text, min_length=1) is not sent either
    empty = Lockstep(wordle_envs, replace(strict, parse_action=lambda text: ""))
    empty.reset(seed=0)
    turn = empty.step({2: "anything"})[2]
    assert turn.text == "Invalid action: '' is not a valid action"
    assert (turn.reward, turn.action, turn.info) == (0.0, None, {})
    assert step_counts(wordle_envs) == [0, 0, 0, 0]


@pytest.mark.integration
def test_wordle_answer_without_guess_is_a_warned_invalid_move(
    wordle_envs: Any, wordle: Lockstep
) -> None:
    wordle.reset(seed=seed_without("crane", 4))
    turn = wordle.step({0: "I have no idea"})[0]
    assert turn.action == "I have no idea"  # the game judges it, as TextArena does
    assert turn.text.startswith("You attempted an invalid move.")
    assert (turn.reward, turn.terminated) == (0.0, False)
    assert guesses(wordle_envs)[0] == []
    turn = wordle.step({0: "[crane]"})[0]
    assert turn.text.endswith("You have 5 guesses left.")


@pytest.mark.integration
def test_winning_ends_the_episode(wordle_envs: Any, wordle: Lockstep) -> None:
    wordle.reset(seed=seed_without("crane", 4))
    secret = secrets(wordle_envs)[2]
    turns = wordle.step({2: f"<think>[crane]?</think> my guess: [{secret.upper()}]", 0: "crane"})
    won = turns[2]
    assert won.action == f"[{secret}]"
    assert won.reward == 1.0
    assert (won.terminated, won.truncated) == (True, False)
    assert won.text == "The episode is over: Congratulations! You guessed the word correctly!"
    assert won.info["info"]["reason"] == "Congratulations! You guessed the word correctly!"
    assert turns[0].terminated is False
    assert wordle.done == [False, False, True, False]
    assert wordle.returns == [0.0, 0.0, 1.0, 0.0]
    with pytest.raises(EpisodeOverError, match=r"\[2\]"):
        wordle.step({2: "[crane]"})
    with pytest.raises(EpisodeOverError, match=r"\[2\]"):
        wordle.step({0: "[slate]", 2: "[crane]"})
    assert step_counts(wordle_envs) == [1, 0, 1, 0]  # nothing was stepped
    wordle.reset(seed=0)
    assert wordle.done == [False] * 4
    assert wordle.returns == [0.0] * 4


# ------------------------------------------------------------------ Echo, Catch


@pytest.mark.integration
def test_returns_accumulate(echo_envs: Any) -> None:
    lockstep = Lockstep(echo_envs)
    assert lockstep.reset() == ["Echo environment ready!"] * 2
    turns = lockstep.step({0: "abc", 1: "hello"})
    assert (turns[0].text, turns[1].text) == ("abc", "hello")
    assert turns[0].reward == pytest.approx(0.3)
    assert turns[1].reward == pytest.approx(0.5)
    lockstep.step({0: "de"})
    assert lockstep.returns == pytest.approx([0.5, 0.5])
    turn = lockstep.step({1: "<think>only thinking</think>"})[1]
    assert turn.text.startswith("Invalid action:")
    assert lockstep.returns == pytest.approx([0.5, 0.5])
    lockstep.reset()
    assert lockstep.returns == [0.0, 0.0]


@pytest.mark.integration
def test_catch_episode_to_the_end(catch_envs: Any) -> None:
    # seeds where the ball falls in column 0 for some sub-envs and elsewhere for others
    seed = next(s for s in range(100) if len({ball_column(s + i) == 0 for i in range(4)}) == 2)
    lockstep = Lockstep(catch_envs)
    assert lockstep.interface.tool_name == "move"
    texts = lockstep.reset(seed=seed)
    assert [t.split("\n")[0].index("#") for t in texts] == [ball_column(seed + i) for i in range(4)]
    final: dict[int, Turn] = {}
    turns_taken = [0] * 4
    while not all(lockstep.done):
        running = [i for i in range(4) if not lockstep.done[i]]
        turns = lockstep.step({i: "left" for i in running})
        assert sorted(turns) == running
        for i, turn in turns.items():
            assert turn.action == 0
            turns_taken[i] += 1
            if turn.terminated:
                final[i] = turn
        assert turns_taken[0] <= 9
    assert turns_taken == [9] * 4
    for i, turn in final.items():
        expected = 1.0 if ball_column(seed + i) == 0 else -1.0
        assert turn.reward == expected
        assert lockstep.returns[i] == expected
        assert turn.text.endswith("\nThe episode is over.")
        # the bottom row: the paddle all the way left, and the ball where it fell
        bottom = ["#" if c in (0, ball_column(seed + i)) else "." for c in range(5)]
        assert turn.text.split("\n")[9] == "".join(bottom)
    assert sorted({t.reward for t in final.values()}) == [-1.0, 1.0]


@pytest.mark.integration
def test_catch_answer_without_move(catch_envs: Any) -> None:
    lockstep = Lockstep(catch_envs)
    lockstep.reset(seed=0)
    turns = lockstep.step({0: "jump", 1: "stay"})
    assert turns[0].text == "Invalid action: no move found: answer with left, stay or right"
    assert turns[0].action is None
    assert turns[1].action == 1
    assert step_counts(catch_envs) == [0, 1, 0, 0]


# ------------------------------------------------------------------ any VectorEnv


class TwoStepText(gymnasium.Env[str, str]):
    """Text in, text out; the episode terminates after two steps. Records what it got."""

    observation_space = spaces.Text(64)
    action_space = spaces.Text(32)

    def __init__(self) -> None:
        self.got: list[Any] = []
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        self.got.append(("reset", seed))
        return f"start {seed}", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.t += 1
        self.got.append(action)
        done = self.t >= 2
        info: dict[str, Any] = {"reason": "two steps"} if done else {"t": self.t}
        return f"got {action}", float(len(action)), done, False, info


@pytest.fixture
def text_vec() -> Iterator[SyncVectorEnv]:
    envs = SyncVectorEnv([TwoStepText for _ in range(3)])
    try:
        yield envs
    finally:
        envs.close()


def test_other_vector_envs_are_stepped_whole(text_vec: SyncVectorEnv) -> None:
    lockstep = Lockstep(text_vec)
    assert lockstep.interface.tool_name == "act"
    subs: list[TwoStepText] = [e.unwrapped for e in text_vec.envs]  # type: ignore[misc]
    assert lockstep.reset(seed=[1, 2, 3]) == ["start 1", "start 2", "start 3"]
    turns = lockstep.step({0: "hello", 2: "<think>x</think>yo"})
    assert sorted(turns) == [0, 2]
    assert turns[0] == Turn("got hello", 5.0, False, False, "hello", {"t": 1})
    assert turns[2].text == "got yo"
    assert turns[2].reward == 2.0
    assert [len(s.got) for s in subs] == [2, 2, 2]  # sub-env 1 was stepped too
    assert subs[0].got[1] == "hello"
    assert isinstance(subs[1].got[1], str)  # with a sampled action
    assert subs[2].got[1] == "yo"
    turns = lockstep.step({0: "bye"})
    assert list(turns) == [0]
    assert turns[0].text == "got bye\nThe episode is over: two steps"
    assert turns[0].terminated is True
    assert turns[0].info == {"reason": "two steps"}
    assert lockstep.returns[0] == 8.0
    assert lockstep.done[0] is True
    with pytest.raises(EpisodeOverError, match=r"\[0\]"):
        lockstep.step({0: "again"})
    # sub-envs 1 and 2 were left out of that turn: stepped at random, their episodes void
    assert lockstep.done == [True, True, True]
    with pytest.raises(EpisodeOverError, match=r"\[1\]"):
        lockstep.step({1: "abc"})


def test_other_vector_envs_invalid_answers_step_nothing(text_vec: SyncVectorEnv) -> None:
    lockstep = Lockstep(text_vec)
    lockstep.reset(seed=0)
    subs: list[TwoStepText] = [e.unwrapped for e in text_vec.envs]  # type: ignore[misc]
    turns = lockstep.step({0: "not in the charset!", 1: "<think>nothing else</think>"})
    assert turns[0].text.startswith("Invalid action: 'not in the charset!' is not a valid")
    assert turns[1].text == "Invalid action: the answer is empty"
    assert [len(s.got) for s in subs] == [1, 1, 1]  # the resets only


# ------------------------------------------------------------------ helpers


def test_info_at_honours_masks() -> None:
    infos = {
        "a": np.array([1, 2]),
        "_a": np.array([True, False]),
        "d": {"x": np.array([3, 4]), "_x": np.array([False, True])},
        "_d": np.array([True, True]),
    }
    assert info_at(infos, 0) == {"a": 1, "d": {}}
    assert info_at(infos, 1) == {"d": {"x": 4}}
    assert info_at({"b": np.array([5, 6]), "env_id": np.array([2, 0])}, 1) == {
        "b": 6,
        "env_id": 0,
    }
    assert info_at({"d": {"y": np.array([7, 8])}, "_d": np.array([False, True])}, 0) == {}
    assert info_at({}, 0) == {}


def _echo_interface() -> TextInterface:
    return TextInterface("say", "Say it.", (), lambda args: "", lambda text: text)


def test_step_text() -> None:
    interface = _echo_interface()
    assert step_text(interface, "board", False, False, {"reason": "ignored"}) == "board"
    assert step_text(interface, "board", True, False, {"reason": "you won"}) == (
        "board\nThe episode is over: you won"
    )
    assert step_text(interface, "board", False, True, {"info": {"reason": "time is up"}}) == (
        "board\nThe episode is over: time is up"
    )
    assert step_text(
        interface, "board", True, False, {"reason": "top", "info": {"reason": "nested"}}
    ) == ("board\nThe episode is over: top")
    assert step_text(interface, "board", True, False, {}) == "board\nThe episode is over."
    assert step_text(interface, "board", True, False, {"reason": 3}) == (
        "board\nThe episode is over."
    )
    assert step_text(interface, "", True, False, {"reason": "won"}) == "The episode is over: won"


def test_step_text_uses_the_interface_observation_text() -> None:
    interface = replace(_echo_interface(), observation_text=lambda obs: f"<{obs}>")
    assert step_text(interface, 5, True, False, {}) == "<5>\nThe episode is over."


def test_other_vector_envs_void_an_invalid_answer_when_others_step(
    text_vec: SyncVectorEnv,
) -> None:
    lockstep = Lockstep(text_vec)
    lockstep.reset(seed=0)
    subs: list[TwoStepText] = [e.unwrapped for e in text_vec.envs]  # type: ignore[misc]
    turns = lockstep.step({0: "hello", 1: "<think>nothing else</think>"})
    assert turns[0].text == "got hello"
    assert [len(s.got) for s in subs] == [2, 2, 2]  # sub-env 1 was stepped at random
    assert turns[1].text.startswith("Invalid action: the answer is empty")
    assert "stepped it at random" in turns[1].text
    assert turns[1].truncated is True
    assert lockstep.done == [False, True, True]
    with pytest.raises(EpisodeOverError):
        lockstep.step({1: "abc"})
