"""Wire models of the Catch environment, field for field those of OpenEnv's ``openspiel_env``.

OpenEnv calls them ``OpenSpielAction``, ``OpenSpielObservation`` and ``OpenSpielState``; those
names are kept as aliases so code written against OpenEnv imports unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openenv_gym.runtime.environment import Action, Observation, State

__all__ = [
    "CatchAction",
    "CatchObservation",
    "CatchState",
    "OpenSpielAction",
    "OpenSpielObservation",
    "OpenSpielState",
]


class CatchAction(Action):
    """Move the paddle.

    ``action_id`` stays a plain ``int`` in the schema, as upstream; a value outside
    ``legal_actions`` is rejected by :meth:`CatchEnvironment.step
    <openenv_gym_servers.catch.CatchEnvironment.step>` with ``ValueError``.

    Attributes:
        action_id: ``0`` left, ``1`` stay, ``2`` right.
        game_name: Accepted for compatibility and ignored (the game is always ``catch``).
        game_params: Accepted for compatibility and ignored.
    """

    action_id: int
    game_name: str = "catch"
    game_params: dict[str, Any] = Field(default_factory=dict)


class CatchObservation(Observation):
    """What the agent sees.

    Attributes:
        info_state: OpenSpiel's catch observation tensor: the 10 x 5 grid flattened row by
            row, ``1.0`` on the ball and on the paddle (one cell when the ball is on it).
        legal_actions: ``[0, 1, 2]`` while playing, ``[]`` once terminal.
        game_phase: ``"initial"`` after a reset, ``"playing"``, then ``"terminal"``.
        current_player_id: ``0`` while playing, ``-4`` (OpenSpiel's terminal player id) once
            terminal.
        opponent_last_action: Always ``None`` (one player).
    """

    info_state: list[float]
    legal_actions: list[int]
    game_phase: str = "playing"
    current_player_id: int = 0
    opponent_last_action: int | None = None


class CatchState(State):
    """Snapshot of a Catch session; fixed values, as OpenEnv reports for ``catch``.

    Attributes:
        game_name: ``"catch"``.
        agent_player: ``0``.
        opponent_policy: ``"random"`` (unused: one player).
        game_params: ``{}`` (the default 10 x 5 board).
        num_players: ``1``.
    """

    game_name: str = "catch"
    agent_player: int = 0
    opponent_policy: str = "random"
    game_params: dict[str, Any] = Field(default_factory=dict)
    num_players: int = 1


OpenSpielAction = CatchAction
OpenSpielObservation = CatchObservation
OpenSpielState = CatchState
