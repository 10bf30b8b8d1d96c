"""A small Wordle told in TextArena's words, merged into one growing message as upstream's
server merges TextArena's transcript (every entry a ``[GAME]`` line)."""

import random
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment

try:
    from textarena_env.models import TextArenaMessage, TextArenaObservation, TextArenaState
except ImportError:
    from models import TextArenaMessage, TextArenaObservation, TextArenaState

SECRETS = ("crane", "slate", "pious", "mound", "brick", "flint", "ghost", "plumb")
PROMPT = (
    "You are Playing Wordle. Guess the secret 5-letter word in 6 turns, each guess "
    "in square brackets, e.g. [crane]. Feedback: G right place, Y wrong place, X absent."
)


def feedback(guess: str, secret: str) -> str:
    marks = []
    for i, letter in enumerate(guess):
        marks.append("G" if secret[i] == letter else "Y" if letter in secret else "X")
    return " ".join(marks)


class TextArenaEnvironment(Environment):
    """Wordle; the secret is drawn from ``reset``'s seed, else the next one in turn (so runs
    can be compared)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str = "Wordle-v0", max_turns: int = 6) -> None:
        super().__init__()
        self.env_id = env_id
        self.max_turns = max_turns
        self._secret = SECRETS[0]
        self._transcript = ""
        self._state = TextArenaState(episode_id=str(uuid.uuid4()))

    def _say(self, *entries: str) -> None:
        self._transcript += "".join(f"\n[GAME] {entry}" for entry in entries)

    def _observation(self, reward: float, done: bool) -> TextArenaObservation:
        message = TextArenaMessage(sender_id=-1, content=self._transcript, category="MESSAGE")
        return TextArenaObservation(
            prompt=self._transcript.strip() if self._state.step_count == 0 else self.env_id,
            messages=[message],
            legal_players=[0],
            info={"turn": self._state.turn},
            reward=reward,
            done=done,
            metadata={"env_id": self.env_id, "turn": self._state.turn},
        )

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TextArenaObservation:
        if seed is None:  # the next secret in turn: episodes stay comparable between runs
            self._secret = SECRETS[(SECRETS.index(self._secret) + 1) % len(SECRETS)]
        else:
            self._secret = random.Random(seed).choice(SECRETS)
        self._transcript = ""
        self._state = TextArenaState(episode_id=episode_id or str(uuid.uuid4()), env_id=self.env_id)
        self._say(PROMPT)
        return self._observation(0.0, False)

    def step(self, action: Any, timeout_s: Any = None, **kwargs: Any) -> TextArenaObservation:
        guess = action.message.strip().strip("[]").lower()
        self._state.step_count += 1
        self._state.turn += 1
        left = self.max_turns - self._state.turn
        if guess == self._secret:
            self._say(action.message)
            return self._observation(1.0, True)
        if len(guess) != 5 or not guess.isalpha():
            self._say(action.message, "You attempted an invalid move: guess five letters.")
            return self._observation(0.0, left <= 0)
        self._say(
            action.message,
            f"You submitted [{guess}].\nFeedback:\n{' '.join(guess.upper())}\n"
            f"{feedback(guess, self._secret)}\nYou have {left} guesses left.",
        )
        return self._observation(0.0, left <= 0)

    @property
    def state(self) -> TextArenaState:
        self._state.raw_state = {"secret_word": self._secret}
        return self._state
