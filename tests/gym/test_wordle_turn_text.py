"""The Wordle codec's observation is this turn's text, whatever the message layout.

Pure: observations in the two layouts a Wordle server sends. Ours: one message per thing
said this turn. OpenEnv's ``textarena_env``: TextArena's ``LLMObservationWrapper``
transcript of the whole episode (``\\n[GAME] ...`` lines, the player's echo tagged ``[GAME]``
too), merged into ONE message with ``sender_id=-1``, growing every turn.
``tests/interop/test_interop_textarena_style.py`` runs this against a server.
"""

from __future__ import annotations

from typing import Any

import pytest

from openenv_gym.spaces import codec_for
from openenv_gym_servers.wordle import WordleAction, WordleEnvironment

PROMPT = (
    "You are Playing Wordle.\nA secret 5-letter word has been chosen. You have 6 attempts "
    "to guess it.\nFor each guess, wrap your word in square brackets (e.g., '[apple]').\n"
    "Enter your guess to begin.\n"
)
FEEDBACK = "You submitted [crane].\nFeedback:\nC R A N E\nX Y X X G\nYou have 5 guesses left."
WARNING = (
    "You attempted an invalid move. Reason: 'zzzzz' is not an English word. Please resubmit "
    "a valid move and remember to follow the game rules to avoid penalties."
)


WIN = "Congratulations! You guessed the word correctly!"


def merged(
    *entries: str, prompt: str = "Wordle-v0", info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An observation of OpenEnv's TextArena server after these transcript entries."""
    transcript = "".join(f"\n[GAME] {entry}" for entry in entries)
    return {
        "prompt": transcript.strip() if len(entries) == 1 else prompt,
        "messages": [{"sender_id": -1, "content": transcript, "category": "MESSAGE"}],
        "current_player_id": 0,
        "legal_players": [0],
        "info": info or {},
    }


TURNS = [
    ((PROMPT,), PROMPT.strip()),
    ((PROMPT, "[crane]", FEEDBACK), FEEDBACK),
    ((PROMPT, "[crane]", FEEDBACK, "[zzzzz]", WARNING), WARNING),
    ((PROMPT, "[crane]", FEEDBACK, "[zzzzz]", WARNING, "I say [slate]", FEEDBACK), FEEDBACK),
    # a win: the game says nothing more; with no reason in info, the env id (upstream's
    # later prompt) is all there is to show
    ((PROMPT, "[crane]", FEEDBACK, "[spare]"), "Wordle-v0"),
]


@pytest.mark.parametrize(("entries", "expected"), TURNS)
def test_a_merged_transcript_gives_this_turn(entries: tuple[str, ...], expected: str) -> None:
    codec = codec_for("wordle")
    obs = merged(*entries)
    assert codec.decode_observation(obs) == expected
    assert codec.render(obs) == expected
    assert codec.decode_columns is not None
    columns = {k: [v] for k, v in obs.items()}
    assert codec.decode_columns(columns, frozenset(), 1) == [expected]


def test_the_turn_does_not_grow_with_the_episode() -> None:
    codec = codec_for("wordle")
    entries = [PROMPT]
    sizes = []
    for _ in range(5):
        entries += ["[crane]", FEEDBACK]
        sizes.append(len(codec.decode_observation(merged(*entries))))
    assert sizes == [len(FEEDBACK)] * 5


def test_other_transcripts_are_left_whole() -> None:
    codec = codec_for("wordle")
    guess = "\n[GAME] You are playing GuessTheNumber.\n[GAME] [12]\n[GAME] Higher."
    obs = {"prompt": "GuessTheNumber-v0", "messages": [{"sender_id": -1, "content": guess}]}
    assert codec.decode_observation(obs) == guess.strip()


def test_our_layout_is_unchanged() -> None:
    codec = codec_for("wordle")
    env = WordleEnvironment()
    first = env.reset(seed=4).model_dump(mode="json")
    assert codec.decode_observation(first) == first["prompt"]
    said = env.step(WordleAction(message="[crane]")).model_dump(mode="json")
    assert codec.decode_observation(said) == said["messages"][-1]["content"]


def test_a_win_shows_the_reason_not_the_prompt() -> None:
    """The winning move says nothing in the transcript: the game's reason is the text."""
    codec = codec_for("wordle")
    obs = merged(PROMPT, "[crane]", FEEDBACK, "[spare]", info={"reason": WIN})
    assert codec.decode_observation(obs) == WIN
    assert codec.decode_columns is not None
    columns = {k: [v, v] for k, v in obs.items()}
    assert codec.decode_columns(columns, frozenset(), 2) == [WIN, WIN]
    # a turn with a message of its own keeps it, whatever info holds
    obs = merged(PROMPT, "[crane]", FEEDBACK, info={"reason": WIN})
    assert codec.decode_observation(obs) == FEEDBACK
