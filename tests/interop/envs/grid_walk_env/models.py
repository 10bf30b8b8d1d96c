"""The grid walk's action and observation."""

from enum import Enum

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class MoveAction(str, Enum):  # noqa: UP042 - as upstream writes it
    """The four moves."""

    UP = "UP"
    DOWN = "DOWN"
    LEFT = "LEFT"
    RIGHT = "RIGHT"


class GridWalkAction(Action):
    """One move."""

    action: MoveAction = Field(..., description="The direction to move the agent.")


class GridWalkObservation(Observation):
    """Where the walker is."""

    x: int = Field(..., description="Current X position")
    y: int = Field(..., description="Current Y position")
    message: str = Field("", description="Status message")
    reward: float = Field(0.0, description="Reward received from the last action")
    done: bool = Field(False, description="Whether the episode has ended")
