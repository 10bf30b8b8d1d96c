"""The action, message, observation and state models of TextArena's OpenEnv server."""

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, Field


class TextArenaAction(Action):
    message: str


class TextArenaMessage(BaseModel):
    sender_id: int
    content: str
    category: str


class TextArenaObservation(Observation):
    prompt: str
    messages: list[TextArenaMessage] = Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class TextArenaState(State):
    env_id: str = "Wordle-v0"
    num_players: int = 1
    max_turns: int | None = None
    turn: int = 0
    last_reward: float = 0.0
    raw_state: dict[str, Any] = Field(default_factory=dict)
