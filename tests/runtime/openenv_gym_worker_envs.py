"""Environments for the worker-process tests (``test_server_workers.py``).

Not a test module. :class:`LoneEnv` is not marked ``SUPPORTS_CONCURRENT_SESSIONS``: the
server gives each of its sessions a worker process of its own. Its state is a module
global (one per process), as a C library's singleton would be, so the tests can tell
whether two sessions shared a process. Every observation carries the process id.

Messages: ``"count"`` adds one to the process's counter and shows it; ``"crash"`` ends the
worker process at once (``os._exit``); ``"wait:PATH"`` blocks until the file ``PATH``
exists (a test creates it when it has seen other connections answered meanwhile).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, ClassVar

from openenv_gym.runtime.environment import Action, Environment, Observation, State

__all__ = ["COUNTER", "LoneAction", "LoneEnv", "LoneObservation"]

COUNTER = {"value": 0}
"""The process's counter: shared by every instance in one process."""

WAIT_LIMIT = 60.0


class LoneAction(Action):
    """What to do."""

    message: str


class LoneObservation(Observation):
    """The process hosting the session, and the counter there."""

    pid: int
    count: int


class LoneEnv(Environment[LoneAction, LoneObservation, State]):
    """Not concurrent-safe: see the module docstring."""

    action_type = LoneAction
    observation_type = LoneObservation
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = False

    def __init__(self) -> None:
        self._state = State()

    def _observation(self) -> LoneObservation:
        return LoneObservation(pid=os.getpid(), count=COUNTER["value"], reward=0.0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> LoneObservation:
        """A new episode; the counter is left as it is."""
        self._state = State(episode_id=episode_id)
        return self._observation()

    def step(self, action: LoneAction) -> LoneObservation:
        """Do what the message says."""
        self._state.step_count += 1
        if action.message == "count":
            COUNTER["value"] += 1
        elif action.message == "crash":
            os._exit(3)
        elif action.message.startswith("wait:"):
            flag = Path(action.message[5:])
            deadline = time.monotonic() + WAIT_LIMIT
            while not flag.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return self._observation()

    @property
    def state(self) -> State:
        """Episode id and step count."""
        return self._state
