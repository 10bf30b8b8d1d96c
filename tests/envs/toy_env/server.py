"""The toy counter's server side: its models and its ``Environment``."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from pydantic import Field

from openenv_gym.runtime.environment import Action, Environment, Observation, State

GOAL = 5


class AddAction(Action):
    """Add ``amount`` to the counter."""

    amount: int = Field(ge=0, le=2)


class CountObservation(Observation):
    """The counter."""

    count: int = 0


class CounterEnvironment(Environment[AddAction, CountObservation, State]):
    """The counter starts at ``seed % 3``; a step adds; reward is the amount; done at 5."""

    action_type: ClassVar[type[AddAction]] = AddAction
    observation_type: ClassVar[type[CountObservation]] = CountObservation
    state_type: ClassVar[type[State]] = State
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        self._count = 0
        self._episode: str | None = None
        self._steps = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CountObservation:
        self._count = (seed or 0) % 3
        self._episode = episode_id or str(uuid.uuid4())
        self._steps = 0
        return CountObservation(count=self._count, done=False, reward=0.0)

    def step(self, action: AddAction) -> CountObservation:
        self._count += action.amount
        self._steps += 1
        return CountObservation(
            count=self._count, done=self._count >= GOAL, reward=float(action.amount)
        )

    @property
    def state(self) -> State:
        return State(episode_id=self._episode, step_count=self._steps)
