"""Wire models of the Wordle environment, field for field those of OpenEnv's ``textarena_env``.

OpenEnv calls them ``TextArenaAction``, ``TextArenaMessage``, ``TextArenaObservation`` and
``TextArenaState``; those names are kept as aliases so code written against OpenEnv imports
unchanged. The JSON schemas have the same property names, types and required fields.

The environment builds its messages and observations with
:func:`openenv_gym.runtime.environment.trusted`, which skips
validation: every value it passes is made by our own code and already of the field's type.
Validated construction costs several microseconds per observation, more than the game itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from openenv_gym.runtime.environment import Action, Observation, State

__all__ = [
    "TextArenaAction",
    "TextArenaMessage",
    "TextArenaObservation",
    "TextArenaState",
    "WordleAction",
    "WordleMessage",
    "WordleObservation",
    "WordleState",
]


class WordleAction(Action):
    """What the player says; the guess is the first ``[word]`` in it.

    A message with no square bracket at all is read as a bare guess (``crane`` is ``[crane]``),
    as TextArena's ``ActionFormattingWrapper`` does for ``Wordle-v0``.

    Attributes:
        message: Free text holding the guess, e.g. ``"I will try [crane]"``.
    """

    message: str


class WordleMessage(BaseModel):
    """One entry of the episode transcript.

    Attributes:
        sender_id: ``-1`` for the game (TextArena's ``GAME_ID``), ``0`` for the player.
        content: The text.
        category: A TextArena ``ObservationType`` name: ``PROMPT``, ``PLAYER_ACTION``,
            ``GAME_MESSAGE`` or ``GAME_ADMIN``.
    """

    model_config = ConfigDict(frozen=True)

    sender_id: int
    content: str
    category: str


class WordleObservation(Observation):
    """What the player sees after a reset or a step.

    Attributes:
        prompt: The game instructions (the ``PROMPT`` message).
        messages: The messages since the previous observation, oldest first, as TextArena's
            ``get_observation()`` hands them over: after a reset the ``PROMPT``; after a step
            the player's ``PLAYER_ACTION`` and the game's reply to it. Consecutive entries
            with the same sender and category are merged into one.
        current_player_id: Whose turn it is: always ``0`` (one player).
        legal_players: Player ids in the game: ``[0]``.
        info: Per-step details: ``reward_signals`` after every step, and ``reason`` and
            ``invalid_move`` when the game ends.
    """

    prompt: str
    messages: list[WordleMessage] = Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class WordleState(State):
    """Snapshot of a Wordle session (``GET /state``).

    Attributes:
        env_id: Always ``"Wordle-v0"``.
        num_players: Always ``1``.
        max_turns: Always ``None``: the game ends by its own six-guess rule.
        turn: Turns played: valid guesses, plus the invalid move that ended the game if any.
        last_reward: Reward of the latest reset or step.
        last_info: ``info`` of the latest observation.
        raw_state: Game internals after TextArena's state: ``turn``, ``done``, ``rewards``,
            ``error_count``, ``game_info`` and ``game_state`` (``secret_word``,
            ``guess_history`` as ``[word, [feedback, ...]]`` pairs, ``word_length``,
            ``num_guesses``). Holds the secret word: observations never do.
    """

    env_id: str
    num_players: int
    max_turns: int | None = None
    turn: int = 0
    last_reward: float = 0.0
    last_info: dict[str, Any] = Field(default_factory=dict)
    raw_state: dict[str, Any] = Field(default_factory=dict)


TextArenaAction = WordleAction
TextArenaMessage = WordleMessage
TextArenaObservation = WordleObservation
TextArenaState = WordleState
