"""The grid world's action and observation."""

from enum import Enum

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class MoveAction(str, Enum):  # noqa: UP042 - as upstream writes it
    UP = "UP"
    DOWN = "DOWN"
    LEFT = "LEFT"
    RIGHT = "RIGHT"


class GridWorldAction(Action):
    action: MoveAction = Field(..., description="Where to move.")


class GridWorldObservation(Observation):
    x: int = Field(..., description="Column")
    y: int = Field(..., description="Row")
    message: str = Field("", description="What happened")
    pid: int = Field(0, description="The process that holds this env instance")
    reward: float = Field(0.0, description="Reward of the last move")
    done: bool = Field(False, description="Whether the goal was reached")
