"""The grid walk: its world is one per PROCESS (a module global), so it is not marked
``SUPPORTS_CONCURRENT_SESSIONS``: two sessions in one process would walk the same walker.

Every observation's metadata carries the process id hosting the session (for the tests).
"""

import os
import uuid
from typing import Any

try:
    from openenv.core.env_server import Environment
    from openenv.core.env_server.types import State
except ImportError:
    from core.env_server import Environment
    from core.env_server.types import State
from ..models import GridWalkAction, GridWalkObservation, MoveAction

SIZE = 5
GOAL = (SIZE - 1, SIZE - 1)
_MOVES = {
    MoveAction.UP: (0, 1),
    MoveAction.DOWN: (0, -1),
    MoveAction.LEFT: (-1, 0),
    MoveAction.RIGHT: (1, 0),
}

_WORLD = {"x": 0, "y": 0}  # one walker per process, as a C library's singleton would be


class GridWalkEnvironment(Environment):
    """Walk from (0, 0) to (4, 4); walls stop the walker; each step costs 0.01."""

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def _observation(
        self, message: str, reward: float = 0.0, done: bool = False
    ) -> GridWalkObservation:
        return GridWalkObservation(
            x=_WORLD["x"],
            y=_WORLD["y"],
            message=message,
            reward=reward,
            done=done,
            metadata={"pid": os.getpid()},
        )

    def reset(self, **kwargs: Any) -> GridWalkObservation:  # type: ignore[override]
        """Back to (0, 0)."""
        _WORLD.update(x=0, y=0)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        return self._observation("Reach the goal at (4, 4).")

    def step(
        self, action: GridWalkAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GridWalkObservation:  # type: ignore[override]
        """Move one cell."""
        dx, dy = _MOVES[action.action]
        _WORLD.update(
            x=min(max(_WORLD["x"] + dx, 0), SIZE - 1), y=min(max(_WORLD["y"] + dy, 0), SIZE - 1)
        )
        self._state.step_count += 1
        reached = (_WORLD["x"], _WORLD["y"]) == GOAL
        message = "You reached the goal!" if reached else f"Moved {action.action.value}."
        return self._observation(message, 1.0 if reached else -0.01, reached)

    @property
    def state(self) -> State:
        """Episode id and step count."""
        return self._state
