"""Helpers of tests/check: a Wordle-like environment that ignores seeds, served in-process.

Not a test module (no ``test_`` prefix). :class:`SeedlessWordleEnv` is what the seed check
must not be fooled by (issue 12): like TextArena's Wordle, its reset observation never
depends on the secret word, and the secret comes from a random source that ``seed`` does
not touch, so two resets with the same seed look alike while the episodes differ. Only a
step shows it: each guess is answered, letter by letter, with how far the secret's letter
is in the alphabet, so the feedback tells secrets apart.

:func:`serve` hosts a class on this project's :class:`~openenv_gym.runtime.app.EnvServer`,
on an event loop of its own thread, and yields the server's URL. :class:`OverAtResetEnv`
ends every episode at reset (there is no step to compare).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import string
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from pydantic import Field

from openenv_gym.runtime.app import EnvServer, ServerConfig
from openenv_gym.runtime.environment import Action, Environment, Observation, State
from openenv_gym_servers.wordle import WordleEnvironment

__all__ = [
    "PROMPT",
    "OverAtResetEnv",
    "QuestionInMetadataEnv",
    "SeedIgnoringWordle",
    "SeedlessWordleEnv",
    "serve",
]

PROMPT = "Guess the 5-letter word, e.g. [crane]."
WORD_LENGTH = 5

# one source for the whole process, seeded from the OS, never from a reset's seed
_UNSEEDED = random.Random()


class GuessAction(Action):
    """One guess; brackets are allowed, as in ``[crane]``."""

    message: str = Field(..., min_length=1)


class GuessObservation(Observation):
    """What the game says: the prompt after a reset, the feedback after a guess."""

    feedback: str


class SeedlessWordleEnv(Environment[GuessAction, GuessObservation, State]):
    """A Wordle-like game whose secret ignores ``seed``; see the module docstring."""

    action_type: ClassVar[type[Action]] = GuessAction
    observation_type: ClassVar[type[Observation]] = GuessObservation
    state_type: ClassVar[type[State]] = State
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        self._secret = ""
        self._episode_id: str | None = None
        self._steps = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        """A new secret (``seed`` is accepted and ignored); the same prompt every time."""
        self._secret = "".join(_UNSEEDED.choices(string.ascii_lowercase, k=WORD_LENGTH))
        self._episode_id = episode_id or str(uuid.uuid4())
        self._steps = 0
        return GuessObservation(feedback=PROMPT, reward=0.0, done=False)

    def step(self, action: GuessAction) -> GuessObservation:
        """Per letter of the guess (padded with ``a``), how far the secret's letter is."""
        self._steps += 1
        guess = action.message.strip("[] ").lower()
        letters = (guess + "a" * WORD_LENGTH)[:WORD_LENGTH]
        feedback = " ".join(
            f"{g}{ord(s) - ord(g):+d}" for g, s in zip(letters, self._secret, strict=True)
        )
        won = letters == self._secret
        return GuessObservation(feedback=feedback, reward=float(won), done=won)

    @property
    def state(self) -> State:
        """Episode id and step count (the secret stays hidden)."""
        return State(episode_id=self._episode_id, step_count=self._steps)


class OverAtResetEnv(SeedlessWordleEnv):
    """The same game, except that every episode is over as soon as it starts."""

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        """The prompt, with ``done=True``."""
        super().reset(seed, episode_id)
        return GuessObservation(feedback=PROMPT, reward=0.0, done=True)


class SeedIgnoringWordle(WordleEnvironment):
    """Our Wordle, except that ``reset`` ignores the seed (as TextArena's Wordle does).

    An invalid move (``[a]``: not five letters) is answered with the same warning whatever
    the secret, so only a valid guess shows that the secrets differ.
    """

    def _start(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> None:
        """A new game from the instance's own stream, whatever ``seed`` is (``reset`` and
        the batched ``reset_batch`` both start games here)."""
        super()._start(None, episode_id)


class QuestionObservation(Observation):
    """A finqa-like observation: the question travels in ``metadata``."""

    text: str


class AnswerAction(Action):
    """An answer."""

    answer: str


class QuestionInMetadataEnv(Environment[AnswerAction, QuestionObservation, State]):
    """A finqa-like env: each reset asks a random question (ignoring ``seed``) in its
    ``metadata``; the observation's own fields and every step's reply are always the same.
    """

    action_type: ClassVar[type[Action]] = AnswerAction
    observation_type: ClassVar[type[Observation]] = QuestionObservation
    state_type: ClassVar[type[State]] = State
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> QuestionObservation:
        """A random question, in ``metadata``."""
        question = f"What is {_UNSEEDED.randrange(1000)} + {_UNSEEDED.randrange(1000)}?"
        return QuestionObservation(
            text="Answer the question.", reward=0.0, done=False, metadata={"question": question}
        )

    def step(self, action: AnswerAction) -> QuestionObservation:
        """The same reply to every answer."""
        return QuestionObservation(text="Answer recorded.", reward=0.0, done=False)

    @property
    def state(self) -> State:
        """Nothing to show."""
        return State(episode_id=None, step_count=0)


@contextlib.contextmanager
def serve(factory: Callable[[], Any], **config: Any) -> Iterator[str]:
    """Serve ``factory`` with :class:`EnvServer` on 127.0.0.1; yields its URL, then stops it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="seedless-server", daemon=True)
    thread.start()
    server = EnvServer(factory, ServerConfig(**config))
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(15)
        yield server.url
    finally:
        try:
            asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(15)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(15)
            loop.close()
