"""OpenSpiel's catch, in Python, behind upstream's OpenSpielEnvironment interface."""

import random
import uuid
from typing import Any

try:
    from openenv.core.env_server.interfaces import Environment

    from ..models import OpenSpielAction, OpenSpielObservation, OpenSpielState
except ImportError:
    from models import OpenSpielAction, OpenSpielObservation, OpenSpielState
    from openenv.core.env_server.interfaces import Environment

ROWS, COLUMNS = 10, 5


class SpielEnvironment(Environment):
    """Catch; see the package docstring."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self, game_name: str = "catch", agent_player: int = 0, opponent_policy: str = "random"
    ) -> None:
        super().__init__()
        if game_name != "catch":
            raise ValueError(f"only catch is played here, not {game_name!r}")
        self._state = OpenSpielState(
            game_name=game_name, agent_player=agent_player, opponent_policy=opponent_policy
        )
        self._ball = (0, 0)
        self._paddle = COLUMNS // 2
        self._episodes = 0

    def _observation(self, reward: float = 0.0, done: bool = False) -> OpenSpielObservation:
        board = [0.0] * (ROWS * COLUMNS)
        row, column = self._ball
        board[row * COLUMNS + column] = 1.0
        board[(ROWS - 1) * COLUMNS + self._paddle] = 1.0
        return OpenSpielObservation(
            info_state=board,
            legal_actions=[] if done else [0, 1, 2],
            game_phase="terminal" if done else "playing",
            current_player_id=-4 if done else 0,
            reward=reward,
            done=done,
        )

    def reset(self) -> OpenSpielObservation:  # type: ignore[override]
        """A new game, no seed taken (as upstream's): the ball's column cycles per instance."""
        self._episodes += 1
        self._ball = (0, random.Random(self._episodes).randrange(COLUMNS))
        self._paddle = COLUMNS // 2
        self._state = OpenSpielState(
            episode_id=str(uuid.uuid4()),
            game_name=self._state.game_name,
            agent_player=self._state.agent_player,
            opponent_policy=self._state.opponent_policy,
        )
        return self._observation()

    def step(
        self, action: OpenSpielAction, timeout_s: float | None = None, **kwargs: Any
    ) -> OpenSpielObservation:  # type: ignore[override]
        """Move the paddle; the ball falls a row."""
        if action.action_id not in (0, 1, 2):
            raise ValueError(f"illegal action {action.action_id}")
        self._paddle = min(max(self._paddle + action.action_id - 1, 0), COLUMNS - 1)
        row, column = self._ball
        self._ball = (row + 1, column)
        self._state.step_count += 1
        if row + 1 == ROWS - 1:
            return self._observation(1.0 if column == self._paddle else -1.0, True)
        return self._observation()

    @property
    def state(self) -> OpenSpielState:
        """The game being played."""
        return self._state
