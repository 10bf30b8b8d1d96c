"""A TextArena-style Wordle server: the message layout of OpenEnv's ``textarena_env``.

Not a test module. Served by OpenEnv's own ``create_app`` (``python -m interop_apps
textarena_wordle``). Upstream's ``TextArenaEnvironment`` plays TextArena's ``Wordle-v0``
through TextArena's default ``LLMObservationWrapper``, whose observation is the whole
episode as one string of ``\\n[GAME] <entry>`` lines (the player's echoed guess is tagged
``[GAME]`` too: TextArena adds it with the game's sender id). Upstream's
``_convert_messages`` then iterates that string and merges everything into **one**
message, ``sender_id=-1``, category ``MESSAGE``, which grows every turn; ``prompt`` is that
transcript after a reset and the env id afterwards. Like upstream, ``reset`` accepts
``seed`` and ignores it (TextArena's Wordle draws from the global ``random``).

TextArena itself cannot run here (its Wordle downloads NLTK corpora on import), so the
game is played by our Wordle logic (:class:`openenv_gym_servers.wordle.WordleEnvironment`,
used in-process as a plain game engine, never seeded); the models, the transcript and
the merge are upstream's shapes, on OpenEnv's own base classes.
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, Field

from openenv_gym_servers.wordle import WordleAction, WordleEnvironment

__all__ = [
    "ENV_ID",
    "TextArenaAction",
    "TextArenaMessage",
    "TextArenaObservation",
    "TextArenaState",
    "TextArenaWordle",
]

ENV_ID = "Wordle-v0"


class TextArenaAction(Action):
    """The player's message."""

    message: str


class TextArenaMessage(BaseModel):
    """One message, as upstream's models type it."""

    sender_id: int
    content: str
    category: str


class TextArenaObservation(Observation):
    """Upstream's ``TextArenaObservation``."""

    prompt: str
    messages: list[TextArenaMessage] = Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class TextArenaState(State):
    """Upstream's ``TextArenaState``."""

    env_id: str = ENV_ID
    num_players: int = 1
    max_turns: int | None = None
    turn: int = 0
    last_reward: float = 0.0
    last_info: dict[str, Any] = Field(default_factory=dict)
    raw_state: dict[str, Any] = Field(default_factory=dict)


def merge(transcript: str) -> list[TextArenaMessage]:
    """What upstream's ``_convert_messages`` makes of a string observation: one message.

    It iterates the string; every character is a non-tuple entry (sender ``-1``, category
    ``MESSAGE``), so all of them are buffered into a single message.
    """
    return [TextArenaMessage(sender_id=-1, content=transcript, category="MESSAGE")]


class TextArenaWordle(Environment):
    """Wordle behind TextArena's transcript layout; see the module docstring."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._game = WordleEnvironment()
        self._transcript = ""
        self._state = TextArenaState(episode_id=str(uuid.uuid4()))

    def _say(self, contents: list[str]) -> None:
        # LLMObservationWrapper: "\n[GAME] <message>" per observation of the game's sender
        self._transcript += "".join(f"\n[GAME] {content}" for content in contents)

    def _observation(self, game: Any) -> TextArenaObservation:
        turn = self._game.state.turn
        messages = merge(self._transcript)
        return TextArenaObservation(
            prompt=self._transcript.strip() if self._state.step_count == 0 else ENV_ID,
            messages=messages,
            current_player_id=0,
            legal_players=[0],
            info=dict(game.info),
            done=game.done,
            reward=game.reward,
            metadata={
                "env_id": ENV_ID,
                "turn": turn,
                "raw_messages": [m.model_dump() for m in messages],
            },
        )

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TextArenaObservation:
        """A new game; ``seed`` is accepted and ignored, as upstream's TextArena does."""
        game = self._game.reset()  # never seeded: the secret is drawn afresh every time
        self._transcript = ""
        self._say([m.content for m in game.messages])
        self._state = TextArenaState(episode_id=episode_id or str(uuid.uuid4()))
        return self._observation(game)

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> TextArenaObservation:
        """Play the message; the transcript grows by the echo and the game's reply."""
        assert isinstance(action, TextArenaAction)
        game = self._game.step(WordleAction(message=action.message))
        self._say([m.content for m in game.messages])
        self._state.step_count += 1
        self._state.turn = self._game.state.turn
        self._state.last_reward = float(game.reward or 0.0)
        self._state.last_info = dict(game.info)
        return self._observation(game)

    @property
    def state(self) -> TextArenaState:
        """Upstream's state, ``raw_state`` holding the game (and its secret word)."""
        self._state.raw_state = dict(self._game.state.raw_state)
        return self._state
