"""A scripted counting environment for exact vector traces, and its client codec.

Not a test module (no ``test_`` prefix). Local server processes import it by name,
``openenv-gym serve --env openenv_gym_vector_envs:CounterEnv``, with this directory on
``PYTHONPATH`` (see :func:`subprocess_pythonpath` and the session fixture in conftest.py).

:class:`CounterEnv`, after the counting env of Gymnasium's ``tests/vector``:

* ``reset(seed=s)`` sets the counter to ``s`` (0 without a seed); ``reset(episode_length=k)``
  sets the episode length K, which sticks over later resets (default :data:`DEFAULT_LENGTH`),
  so an autoreset (no kwargs) keeps it. ``reset(gate=path)`` names the file that
  :data:`SLOW` waits for (it sticks too); ``reset(unrewarded=True)`` makes its steps
  answer without a reward (``None``, as some OpenEnv envs do; it sticks too).
* ``step(a)`` adds one to the counter and to the step count; the reward is the step count;
  the episode terminates after K steps. The wire observation carries ``count``, ``steps``,
  ``action`` (the action of the step; -1 after a reset) and ``episode_length``.
* Action :data:`SLOW` blocks the whole server process until the gate file exists (at most
  :data:`GATE_MAX_SECONDS`), so a test decides when it finishes, with no timing involved.
* Action :data:`RAISE` raises in the server (an ``EXECUTION_ERROR``; the session survives).

:func:`counter_codec` builds the client side: the Gymnasium observation is the counter
(``Box((), int64)``), the action space ``Discrete(5)``. Its name is the ``module:Class``
spec, which the local provider starts as ``serve --env``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from gymnasium import spaces
from pydantic import Field, TypeAdapter

from openenv_gym.runtime.environment import Action, Environment, Observation, State
from openenv_gym.spaces import Codec

HERE = Path(__file__).resolve().parent
SPEC = "openenv_gym_vector_envs:CounterEnv"
"""What ``openenv-gym serve --env`` (and the codec's name) says."""

DEFAULT_LENGTH = 3
SLOW = 3
RAISE = 4
NUM_ACTIONS = 5
GATE_MAX_SECONDS = 20.0
COUNTER_MAX = 1_000_000


_LENGTH = TypeAdapter(int)
"""``reset(episode_length=...)`` is checked by pydantic: a bad one is a ``ValidationError``,
which a server answers with ``VALIDATION_ERROR`` (as an env checking its options with a
model would)."""


class CounterAction(Action):
    """One integer action; :data:`SLOW` and :data:`RAISE` are special."""

    value: int = Field(..., ge=0)


class CounterObservation(Observation):
    """The counter, the episode's step count, the action taken (-1 after reset), K."""

    count: int
    steps: int = 0
    action: int = -1
    episode_length: int = DEFAULT_LENGTH


class CounterState(State):
    """Base state plus the counter and K."""

    count: int = 0
    episode_length: int = DEFAULT_LENGTH


class CounterEnv(Environment[CounterAction, CounterObservation, CounterState]):
    """Counts steps; see the module docstring."""

    action_type: ClassVar[type[Action]] = CounterAction
    observation_type: ClassVar[type[Observation]] = CounterObservation
    state_type: ClassVar[type[State]] = CounterState

    def __init__(self) -> None:
        self._count = 0
        self._steps = 0
        self._length = DEFAULT_LENGTH
        self._gate: str | None = None
        self._unrewarded = False
        self._episode_id: str | None = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        episode_length: int | None = None,
        gate: str | None = None,
        unrewarded: bool | None = None,
        **kwargs: Any,
    ) -> CounterObservation:
        """Counter to ``seed`` (or 0); ``episode_length``, ``gate``, ``unrewarded`` stick."""
        if unrewarded is not None:
            self._unrewarded = bool(unrewarded)
        if episode_length is not None:
            self._length = _LENGTH.validate_python(episode_length)  # as a model would
        if gate is not None:
            self._gate = gate
        self._count = seed if seed is not None else 0
        self._steps = 0
        self._episode_id = episode_id
        return self._observation(action=-1, reward=None)

    def step(self, action: CounterAction) -> CounterObservation:
        """Count; :data:`SLOW` waits for the gate, :data:`RAISE` raises."""
        if action.value == RAISE:
            raise RuntimeError("counter env: action 4 raises")
        if action.value == SLOW:
            wait_for_file(self._gate, GATE_MAX_SECONDS)
        self._count += 1
        self._steps += 1
        reward = None if self._unrewarded else float(self._steps)
        return self._observation(action=action.value, reward=reward)

    def _observation(self, action: int, reward: float | None) -> CounterObservation:
        return CounterObservation(
            count=self._count,
            steps=self._steps,
            action=action,
            episode_length=self._length,
            reward=reward,
            done=self._steps >= self._length,
        )

    @property
    def state(self) -> CounterState:
        """Episode id, step count, counter and K."""
        return CounterState(
            episode_id=self._episode_id,
            step_count=self._steps,
            count=self._count,
            episode_length=self._length,
        )


MOVE_SPEC = "openenv_gym_vector_envs:MoveEnv"


class MoveAction(Action):
    """A move of several fields: Generic-v0 makes it a ``Dict`` action space."""

    dx: Literal[-1, 0, 1]
    dy: Literal[-1, 0, 1]
    label: Literal["walk", "run"]


class MoveObservation(Observation):
    """Where the walker is and the label of its last move."""

    x: int = 0
    y: int = 0
    label: str = ""


class MoveEnv(Environment[MoveAction, MoveObservation, State]):
    """A walker on a plane: each step adds ``(dx, dy)`` (twice when running)."""

    action_type: ClassVar[type[Action]] = MoveAction
    observation_type: ClassVar[type[Observation]] = MoveObservation
    state_type: ClassVar[type[State]] = State

    def __init__(self) -> None:
        self._x = self._y = 0

    def reset(self, seed: int | None = None, **kwargs: Any) -> MoveObservation:
        """Back to the origin."""
        self._x = self._y = 0
        return MoveObservation()

    def step(self, action: MoveAction) -> MoveObservation:
        """Move."""
        times = 2 if action.label == "run" else 1
        self._x += times * action.dx
        self._y += times * action.dy
        return MoveObservation(x=self._x, y=self._y, label=action.label, reward=0.0)

    @property
    def state(self) -> State:
        """The base state."""
        return State()


def wait_for_file(path: str | None, limit: float) -> None:
    """Block until ``path`` exists, at most ``limit`` seconds (no gate: return at once)."""
    if path is None:
        return
    deadline = time.monotonic() + limit
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def _decode(obs: Mapping[str, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.asarray(obs["count"], dtype=np.int64)


def counter_codec() -> Codec:
    """The client codec of :class:`CounterEnv` (a fresh one: spaces carry their own RNG)."""
    return Codec(
        SPEC,
        spaces.Box(0, COUNTER_MAX, shape=(), dtype=np.int64),
        spaces.Discrete(NUM_ACTIONS),
        lambda action: {"value": int(action)},
        _decode,
        lambda obs: f"count={obs['count']}",
    )


def subprocess_pythonpath() -> str:
    """``PYTHONPATH`` with this directory first, for servers that import this module."""
    return os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
