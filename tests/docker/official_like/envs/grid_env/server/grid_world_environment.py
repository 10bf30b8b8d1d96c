"""A 5x5 grid walk from (0, 0) to (4, 4). Not marked concurrent (one session per process)."""

import os
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

from ..models import GridWorldAction, GridWorldObservation, MoveAction

SIZE = 5
MOVES = {
    MoveAction.UP: (0, 1),
    MoveAction.DOWN: (0, -1),
    MoveAction.LEFT: (-1, 0),
    MoveAction.RIGHT: (1, 0),
}


class GridWorldEnvironment(Environment):
    def __init__(self) -> None:
        super().__init__()
        self._x = self._y = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, **kwargs: Any) -> GridWorldObservation:
        self._x = self._y = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        return GridWorldObservation(x=0, y=0, message="Reach (4, 4).", pid=os.getpid())

    def step(
        self, action: GridWorldAction, timeout_s: Any = None, **kwargs: Any
    ) -> GridWorldObservation:
        dx, dy = MOVES[action.action]
        self._x = min(max(self._x + dx, 0), SIZE - 1)
        self._y = min(max(self._y + dy, 0), SIZE - 1)
        self._state.step_count += 1
        done = (self._x, self._y) == (SIZE - 1, SIZE - 1)
        return GridWorldObservation(
            x=self._x,
            y=self._y,
            message="goal" if done else "moved",
            pid=os.getpid(),
            reward=1.0 if done else -0.01,
            done=done,
        )

    @property
    def state(self) -> State:
        return self._state
