"""Upstream's TextArena models."""

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, Field


class TextArenaAction(Action):
    """The player's message."""

    message: str


class TextArenaMessage(BaseModel):
    """One message."""

    sender_id: int
    content: str
    category: str


class TextArenaObservation(Observation):
    """The transcript (one merged message), the prompt, the players."""

    prompt: str
    messages: list[TextArenaMessage] = Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class TextArenaState(State):
    """The game's state."""

    env_id: str = "Wordle-v0"
    num_players: int = 1
    turn: int = 0
    last_reward: float = 0.0
