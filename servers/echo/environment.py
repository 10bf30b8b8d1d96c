"""The Echo environment: OpenEnv's classic ``echo_env``, the trivial environment of benchmarks.

A step echoes the action's message back with reward ``0.1 * len(message)`` and is never done;
a reset returns ``"Echo environment ready!"`` with reward ``0.0``. There is no game state, so a
step costs little more than building the observation. Unlike OpenEnv's current ``echo_env``
this is the plain action/observation version, without MCP tools.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from openenv_gym.runtime.environment import (
    Environment,
    EnvironmentMetadata,
    ObservationBatch,
    State,
    trusted,
)
from openenv_gym_servers.echo.models import EchoAction, EchoObservation

__all__ = ["EchoEnvironment"]

READY_MESSAGE = "Echo environment ready!"
REWARD_PER_CHARACTER = 0.1


class EchoEnvironment(Environment[EchoAction, EchoObservation, State]):
    """Echoes every message back; takes no arguments.

    ``seed`` is accepted and ignored (nothing is random). ``state`` has the base fields only:
    ``episode_id`` (``None`` until the first reset) and ``step_count``.

    Example:
        >>> env = EchoEnvironment()
        >>> env.reset(episode_id="ep-1").echoed_message
        'Echo environment ready!'
        >>> obs = env.step(EchoAction(message="Hello"))
        >>> obs.echoed_message, obs.message_length, obs.reward, obs.done
        ('Hello', 5, 0.5, False)
        >>> env.state.episode_id, env.state.step_count
        ('ep-1', 1)
    """

    action_type: ClassVar[type[EchoAction]] = EchoAction
    observation_type: ClassVar[type[EchoObservation]] = EchoObservation
    state_type: ClassVar[type[State]] = State
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        self._episode_id: str | None = None
        self._step_count = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        """Start a new episode.

        Args:
            seed: Ignored.
            episode_id: Id of the new episode; a random UUID when ``None``.
            **kwargs: Accepted and ignored, as OpenEnv does.

        Returns:
            The greeting, with ``reward=0.0``.
        """
        self._episode_id = episode_id if episode_id is not None else str(uuid.uuid4())
        self._step_count = 0
        return trusted(
            EchoObservation,
            {
                "done": False,
                "reward": 0.0,
                "metadata": {},
                "echoed_message": READY_MESSAGE,
                "message_length": 0,
            },
        )

    def step(self, action: EchoAction) -> EchoObservation:
        """Echo ``action.message`` back.

        Args:
            action: The message.

        Returns:
            The message and its length, ``reward=0.1 * len(message)``, ``done=False``, and
            ``metadata`` ``{"original_message": ..., "step": ...}`` as upstream.
        """
        self._step_count += 1
        message = action.message
        length = len(message)
        # built without validation: the action was validated and we make the rest
        return trusted(
            EchoObservation,
            {
                "done": False,
                "reward": length * REWARD_PER_CHARACTER,
                "metadata": {"original_message": message, "step": self._step_count},
                "echoed_message": message,
                "message_length": length,
            },
        )

    @classmethod
    def step_batch(cls, envs: list[EchoEnvironment], actions: list[EchoAction]) -> ObservationBatch:
        """:meth:`step` for many instances at once, by column (the batched protocol's hook).

        Example:
            >>> envs = [EchoEnvironment(), EchoEnvironment()]
            >>> batch = EchoEnvironment.step_batch(
            ...     envs, [EchoAction(message="hi"), EchoAction(message="hey")]
            ... )
            >>> batch.fields["echoed_message"], batch.rewards, batch.metadata["step"]
            (['hi', 'hey'], [0.2, 0.30000000000000004], [1, 1])
        """
        messages = [action.message for action in actions]
        lengths = list(map(len, messages))
        steps = []
        for env in envs:
            env._step_count += 1
            steps.append(env._step_count)
        return ObservationBatch(
            {"echoed_message": messages, "message_length": lengths},
            rewards=[length * REWARD_PER_CHARACTER for length in lengths],
            dones=[False] * len(envs),
            metadata={"original_message": messages, "step": steps},
        )

    @property
    def state(self) -> State:
        """Episode id and step count."""
        return State(episode_id=self._episode_id, step_count=self._step_count)

    def get_metadata(self) -> EnvironmentMetadata:
        """Describe the environment (served at ``GET /metadata``)."""
        return EnvironmentMetadata(
            name="EchoEnvironment",
            description=(
                "Echoes each message back with reward 0.1 per character; never done. "
                "OpenEnv's classic echo_env."
            ),
        )
