"""Upstream's OpenSpiel models."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server import Action, Observation, State
from pydantic import Field


class OpenSpielAction(Action):
    """The action id to play (one of ``legal_actions``)."""

    action_id: int
    game_name: str = "catch"
    game_params: dict[str, Any] = Field(default_factory=dict)


class OpenSpielObservation(Observation):
    """The agent's information state and its legal actions."""

    info_state: list[float]
    legal_actions: list[int]
    game_phase: str = "playing"
    current_player_id: int = 0
    opponent_last_action: int | None = None


class OpenSpielState(State):
    """The game being played."""

    game_name: str = "catch"
    agent_player: int = 0
    opponent_policy: str = "random"
    game_params: dict[str, Any] = Field(default_factory=dict)
    num_players: int = 1
