"""An environment written against OpenEnv's own ``Environment`` base and types.

Not a test module. It is served two ways by the interop tests:

* by OpenEnv's app factory under uvicorn (``python -m interop_apps counter``), and
* by our runtime, ``openenv-gym serve --env openenv_counter_env:CounterEnvironment`` with
  this directory on ``PYTHONPATH``: our loader has to find the models from the type hints
  of ``step`` and ``state`` (the class sets no ``action_type``).

The game: a counter starts at 0 and a target in ``1..5`` is drawn from ``reset``'s seed
(:func:`target_for`). Each step adds ``delta`` (``-2..2``, validated by the action model);
the episode ends with reward 1.0 when the count hits the target. A step that would take the
count below 0 or above :data:`MAX_COUNT` raises ``ValueError`` (an ``EXECUTION_ERROR`` on
the wire) and changes nothing. ``reset`` also accepts ``start`` (an env-specific kwarg).

:func:`counter_codec` is the client-side :class:`~openenv_gym.spaces.Codec` (spaces and
conversions) for stepping it through ``OpenEnvEnv`` / ``OpenEnvVectorEnv``.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import numpy as np
from gymnasium import spaces
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from openenv_gym.spaces import Codec

__all__ = [
    "MAX_COUNT",
    "CounterAction",
    "CounterEnvironment",
    "CounterObservation",
    "CounterState",
    "counter_codec",
    "expected_run",
    "target_for",
]

MAX_COUNT = 50
MAX_DELTA = 2


def target_for(seed: int | None) -> int:
    """The target a fresh instance draws on ``reset(seed=seed)``."""
    return random.Random(seed).randint(1, 5)


class CounterAction(Action):
    """Add ``delta`` to the counter."""

    delta: int = Field(..., ge=-MAX_DELTA, le=MAX_DELTA)


class CounterObservation(Observation):
    """The count and the target."""

    count: int
    target: int


class CounterState(State):
    """Base state plus the game."""

    count: int = 0
    target: int = 0


class CounterEnvironment(Environment[CounterAction, CounterObservation, CounterState]):
    """Reach the target count; see the module docstring."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._rng = random.Random()
        self._state = CounterState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CounterObservation:
        """Draw a target (from ``seed`` if given); ``start`` sets the initial count."""
        if seed is not None:
            self._rng.seed(seed)
        start = int(kwargs.get("start", 0))
        self._state = CounterState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            count=start,
            target=self._rng.randint(1, 5),
        )
        return self._observation(reward=0.0, metadata={"seed": seed})

    def step(
        self, action: CounterAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CounterObservation:
        """Add ``action.delta``; done with reward 1.0 on the target."""
        count = self._state.count + action.delta
        if not 0 <= count <= MAX_COUNT:
            raise ValueError(f"the count must stay within 0..{MAX_COUNT}, not {count}")
        self._state.count = count
        self._state.step_count += 1
        hit = count == self._state.target
        return self._observation(
            reward=1.0 if hit else 0.0, done=hit, metadata={"step": self._state.step_count}
        )

    @property
    def state(self) -> CounterState:
        """Episode id, step count, count and target."""
        return self._state

    def _observation(
        self, reward: float, metadata: dict[str, Any], done: bool = False
    ) -> CounterObservation:
        return CounterObservation(
            count=self._state.count,
            target=self._state.target,
            reward=reward,
            done=done,
            metadata=metadata,
        )


def _decode(obs: Any) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.array([obs["count"], obs["target"]], dtype=np.int64)


def counter_codec(max_delta: int = MAX_DELTA) -> Codec:
    """Spaces and conversions for the counter: obs ``[count, target]``, action ``delta``.

    ``max_delta`` above :data:`MAX_DELTA` makes a codec wider than the server's action
    model, so an in-space action can still be refused by the server (VALIDATION_ERROR).
    """
    return Codec(
        "counter",
        spaces.Box(0, MAX_COUNT, (2,), np.int64),
        spaces.Discrete(2 * max_delta + 1, start=-max_delta),
        lambda action: {"delta": int(action)},
        _decode,
        lambda obs: f"{obs['count']}/{obs['target']}",
    )


def expected_run(
    seed: int, num_envs: int, rounds: int
) -> list[tuple[list[list[int]], list[float], list[bool]]]:
    """What a vector env of counters gives for ``reset(seed=seed)`` then ``rounds`` steps of
    ``+1``, under Gymnasium's NEXT_STEP autoreset: per round (obs, rewards, terminations).

    The first entry is the reset (rewards 0, no terminations). A sub-env that terminated is
    reset by the next step (its action ignored), drawing its next target from the stream
    its seed started.
    """
    rngs = [random.Random(seed + i) for i in range(num_envs)]
    targets = [rng.randint(1, 5) for rng in rngs]
    counts = [0] * num_envs
    pending = [False] * num_envs
    runs = [([[0, t] for t in targets], [0.0] * num_envs, [False] * num_envs)]
    for _ in range(rounds):
        rewards, dones = [0.0] * num_envs, [False] * num_envs
        for i in range(num_envs):
            if pending[i]:
                targets[i], counts[i], pending[i] = rngs[i].randint(1, 5), 0, False
                continue
            counts[i] += 1
            dones[i] = pending[i] = counts[i] == targets[i]
            rewards[i] = 1.0 if dones[i] else 0.0
        runs.append(([[c, t] for c, t in zip(counts, targets, strict=True)], rewards, dones))
    return runs
