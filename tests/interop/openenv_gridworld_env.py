"""An enum-action environment, shaped as upstream's ``grid_world_env``.

Not a test module. Served by OpenEnv's own ``create_app`` (``python -m interop_apps
gridworld``). The action is one field whose type is a ``str`` ``Enum`` (its JSON schema a
``$ref`` to ``$defs/MoveAction``), the observation has the walker's ``x`` / ``y``, a
``message``, and ``reward`` / ``done`` redeclared with non-null defaults, all as upstream's
models write them. The game: a 5x5 grid, the walker starts at (0, 0), the goal is (4, 4);
moving into a wall stays put; the goal ends the episode with reward 1.0, every other
step costs 0.01. ``reset`` takes no seed (as OpenSpiel's ``reset(self)``): the server
drops it, and every episode is the same.
"""

from __future__ import annotations

import uuid
from enum import Enum
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

__all__ = [
    "GOAL",
    "SIZE",
    "GridWorldAction",
    "GridWorldEnvironment",
    "GridWorldObservation",
    "MoveAction",
]

SIZE = 5
GOAL = (SIZE - 1, SIZE - 1)


class MoveAction(str, Enum):  # noqa: UP042 - as upstream writes it
    """The four moves."""

    UP = "UP"
    DOWN = "DOWN"
    LEFT = "LEFT"
    RIGHT = "RIGHT"


class GridWorldAction(Action):
    """One move."""

    action: MoveAction = Field(..., description="The direction to move the agent.")


class GridWorldObservation(Observation):
    """Where the walker is."""

    x: int = Field(..., description="Current X position")
    y: int = Field(..., description="Current Y position")
    message: str = Field("", description="Status message")
    reward: float = Field(0.0, description="Reward received from the last action")
    done: bool = Field(False, description="Whether the episode has ended")


_MOVES = {
    MoveAction.UP: (0, 1),
    MoveAction.DOWN: (0, -1),
    MoveAction.LEFT: (-1, 0),
    MoveAction.RIGHT: (1, 0),
}


class GridWorldEnvironment(Environment):
    """Walk from (0, 0) to the goal; see the module docstring."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._x = self._y = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, **kwargs: Any) -> GridWorldObservation:  # type: ignore[override]
        """Back to (0, 0); no seed: every episode is the same."""
        self._x = self._y = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        return GridWorldObservation(x=0, y=0, message="Reach the goal at (4, 4).")

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> GridWorldObservation:
        """Move one cell (walls stop the walker)."""
        assert isinstance(action, GridWorldAction)
        dx, dy = _MOVES[action.action]
        self._x = min(max(self._x + dx, 0), SIZE - 1)
        self._y = min(max(self._y + dy, 0), SIZE - 1)
        self._state.step_count += 1
        reached = (self._x, self._y) == GOAL
        return GridWorldObservation(
            x=self._x,
            y=self._y,
            message="You reached the goal!" if reached else f"Moved {action.action.value}.",
            reward=1.0 if reached else -0.01,
            done=reached,
        )

    @property
    def state(self) -> State:
        """Episode id and step count."""
        return self._state
