"""Wordle behind TextArena's transcript: every turn the one message grows."""

import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment

from openenv_gym_servers.wordle import WordleAction, WordleEnvironment

try:
    from word_arena_env.models import (
        TextArenaAction,
        TextArenaMessage,
        TextArenaObservation,
        TextArenaState,
    )
except ImportError:
    from models import TextArenaAction, TextArenaMessage, TextArenaObservation, TextArenaState


class WordArenaEnvironment(Environment):
    """One Wordle game per episode, the secret drawn from the seed."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str = "Wordle-v0") -> None:
        super().__init__()
        self.env_id = env_id
        self._game = WordleEnvironment()
        self._transcript = ""
        self._state = TextArenaState(episode_id=str(uuid.uuid4()), env_id=env_id)

    def _observation(self, game: Any) -> TextArenaObservation:
        merged = [TextArenaMessage(sender_id=-1, content=self._transcript, category="MESSAGE")]
        return TextArenaObservation(
            prompt=self._transcript.strip() if self._state.step_count == 0 else self.env_id,
            messages=merged,
            current_player_id=0,
            legal_players=[0],
            info=dict(game.info),
            done=game.done,
            reward=game.reward,
            metadata={"env_id": self.env_id, "turn": self._game.state.turn},
        )

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TextArenaObservation:
        """A new game."""
        game = self._game.reset(seed=seed)
        self._transcript = "".join(f"\n[GAME] {m.content}" for m in game.messages)
        self._state = TextArenaState(episode_id=episode_id or str(uuid.uuid4()), env_id=self.env_id)
        return self._observation(game)

    def step(
        self, action: TextArenaAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TextArenaObservation:  # type: ignore[override]
        """Play the message."""
        game = self._game.step(WordleAction(message=action.message))
        self._transcript += "".join(f"\n[GAME] {m.content}" for m in game.messages)
        self._state.step_count += 1
        self._state.turn = self._game.state.turn
        self._state.last_reward = float(game.reward or 0.0)
        return self._observation(game)

    @property
    def state(self) -> TextArenaState:
        """The game's state."""
        return self._state
