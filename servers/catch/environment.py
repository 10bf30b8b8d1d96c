"""Catch, as OpenSpiel's ``catch`` game served by OpenEnv's ``openspiel_env``.

A 10-row by 5-column board. A reset drops the ball into row 0 of a random column and puts the
paddle in the middle of the bottom row (column 2). Each step the ball falls one row and the
paddle moves by ``action_id - 1`` (``0`` left, ``1`` stay, ``2`` right), kept on the board.
When the ball reaches the bottom row, after exactly 9 steps, the episode ends with reward
``+1.0`` if the paddle is under it and ``-1.0`` if not; every other step has reward ``0.0``.

Choices where OpenEnv's wrapper gives no guidance or differs:

- ``reset(seed=...)`` reseeds a per-instance ``random.Random``: the same seed gives the same
  sequence of ball columns over this and the following unseeded resets; ``seed=None``
  continues the instance's stream. The reset observation has ``reward=None``, as OpenSpiel's
  first time step.
- An ``action_id`` other than 0, 1, 2 raises ``ValueError`` from :meth:`CatchEnvironment.step`
  and changes nothing (the server answers with an error frame). OpenSpiel would abort.
- A step after the episode ended does not start a new one (OpenSpiel's RL environment would
  silently reset): the action is ignored and the terminal observation comes back again with
  ``done=True`` and ``reward=0.0``. Call ``reset()`` to play again.
- The board is plain Python floats; no NumPy or OpenSpiel is needed.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, ClassVar

from openenv_gym.runtime.environment import Environment, EnvironmentMetadata
from openenv_gym_servers.catch.models import CatchAction, CatchObservation, CatchState

__all__ = ["CatchEnvironment"]

ROWS = 10
COLUMNS = 5
LEFT, STAY, RIGHT = 0, 1, 2
LEGAL_ACTIONS = (LEFT, STAY, RIGHT)
TERMINAL_PLAYER_ID = -4  # OpenSpiel's kTerminalPlayerId
_EMPTY_BOARD = (0.0,) * (ROWS * COLUMNS)


class CatchEnvironment(Environment[CatchAction, CatchObservation, CatchState]):
    """One drop of the ball per episode; see the module docstring for the rules.

    Takes no arguments (the board is OpenSpiel's default, 10 x 5).

    Example:
        >>> env = CatchEnvironment()
        >>> obs = env.reset(seed=0)
        >>> obs.game_phase, len(obs.info_state), obs.legal_actions
        ('initial', 50, [0, 1, 2])
        >>> for _ in range(9):
        ...     obs = env.step(CatchAction(action_id=1))
        >>> obs.done, obs.game_phase, obs.reward in (1.0, -1.0)
        (True, 'terminal', True)
    """

    action_type: ClassVar[type[CatchAction]] = CatchAction
    observation_type: ClassVar[type[CatchObservation]] = CatchObservation
    state_type: ClassVar[type[CatchState]] = CatchState
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        self._rng = random.Random()
        self._episode_id: str | None = None
        self._step_count = 0
        self._ball_row = 0
        self._ball_col = 0
        self._paddle_col = COLUMNS // 2
        self._done = False
        # A game is ready without reset(); its episode id comes with the first reset.
        self._new_game()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CatchObservation:
        """Drop a new ball.

        Args:
            seed: Reseeds this instance's RNG (same seed, same ball columns from here on);
                ``None`` draws from the instance's current stream.
            episode_id: Id of the new episode; a random UUID when ``None``.
            **kwargs: Accepted and ignored, as OpenEnv does.

        Returns:
            The board with the ball in row 0, ``game_phase="initial"``, ``reward=None``.
        """
        if seed is not None:
            self._rng.seed(seed)
        self._new_game()
        self._episode_id = episode_id if episode_id is not None else str(uuid.uuid4())
        self._step_count = 0
        return self._observation(phase="initial", reward=None)

    def step(self, action: CatchAction) -> CatchObservation:
        """Move the paddle and let the ball fall one row.

        Args:
            action: ``action_id`` 0 (left), 1 (stay) or 2 (right).

        Returns:
            The new board; on the 9th step ``done=True`` and reward ``+1.0`` or ``-1.0``.

        Raises:
            ValueError: ``action_id`` is not 0, 1 or 2 (nothing changes).
        """
        action_id = action.action_id
        if action_id not in LEGAL_ACTIONS:
            raise ValueError(
                f"illegal action_id {action_id!r} for catch: legal actions are "
                f"{list(LEGAL_ACTIONS)}"
            )
        self._step_count += 1
        if self._done:
            return self._observation(phase="terminal", reward=0.0)
        self._ball_row += 1
        self._paddle_col = min(max(self._paddle_col + action_id - 1, 0), COLUMNS - 1)
        if self._ball_row < ROWS - 1:
            return self._observation(phase="playing", reward=0.0)
        self._done = True
        reward = 1.0 if self._paddle_col == self._ball_col else -1.0
        return self._observation(phase="terminal", reward=reward)

    @property
    def state(self) -> CatchState:
        """Episode id, step count and the fixed OpenSpiel fields."""
        return CatchState(episode_id=self._episode_id, step_count=self._step_count)

    def get_metadata(self) -> EnvironmentMetadata:
        """Describe the environment (served at ``GET /metadata``)."""
        return EnvironmentMetadata(
            name="CatchEnvironment",
            description=(
                "OpenSpiel's catch: move a paddle left/stay/right to catch a ball falling down "
                "a 10 x 5 board; +1 for a catch, -1 for a miss, after 9 steps. Wire-compatible "
                "with OpenEnv's openspiel_env; reset(seed=...) is reproducible."
            ),
        )

    def _new_game(self) -> None:
        self._ball_row = 0
        self._ball_col = self._rng.randrange(COLUMNS)
        self._paddle_col = COLUMNS // 2
        self._done = False

    def _observation(self, phase: str, reward: float | None) -> CatchObservation:
        board = list(_EMPTY_BOARD)
        board[self._ball_row * COLUMNS + self._ball_col] = 1.0
        board[(ROWS - 1) * COLUMNS + self._paddle_col] = 1.0
        terminal = self._done
        return CatchObservation(
            info_state=board,
            legal_actions=[] if terminal else list(LEGAL_ACTIONS),
            game_phase=phase,
            current_player_id=TERMINAL_PLAYER_ID if terminal else 0,
            opponent_last_action=None,
            done=terminal,
            reward=reward,
        )
