"""Wordle, played as TextArena 0.7.4's ``Wordle-v0`` served by OpenEnv's ``textarena_env``.

Rules (TextArena's): a secret five-letter word, six guesses. The guess is the first
``[word]`` in the action's message, lower-cased; a message with no square bracket at all is a
bare guess (TextArena's ``ActionFormattingWrapper``). Each valid guess gets ``G``/``Y``/``X``
feedback (see :func:`~openenv_gym_servers.wordle.words.score_guess`). A move is invalid when it
has no ``[word]``, the word is not five letters, it was guessed before, or it is not in the word
list. TextArena allows one error: the first invalid move only earns a ``GAME_ADMIN`` warning
and uses no guess; a second invalid move in a row ends the game. A valid guess clears the
count.

Rewards: ``0.0`` on reset and on every step that does not end the game; ``1.0`` for guessing
the word; otherwise, when the game ends (six guesses used, or the second invalid move in a row)
the completion of the latest valid guess, ``(greens + 0.5 * yellows) / 5``.

``info["reward_signals"]`` (also in ``metadata``) carries the shaping signals of OpenEnv's
``textarena_env/rewards.py`` after every step:

- ``wordle.greens``, ``wordle.yellows``: greens and yellows of the latest valid guess, over 5
  (``0.0`` before the first one).
- ``wordle.repetitions``: ``1.0`` minus how many times the same ``[word]`` was submitted
  earlier in the episode, valid or not (``1.0`` new, ``0.0`` once repeated, negative after);
  ``1.0`` when the message holds no ``[word]``.
- ``wordle.correct``: the step's reward, as upstream (``1.0`` on a win, the completion on a
  loss, ``0.0`` before the end).

Where this differs from OpenEnv's server, on purpose:

- ``reset(seed=...)`` is honoured with a per-instance ``random.Random``: the same seed gives
  the same secret word, sessions never share or disturb a global RNG, and ``seed=None``
  continues the instance's own stream. Nothing is downloaded; the word lists ship in ``data/``
  and are read once per process (guesses are checked against Webster's ``web2``, not Hunspell
  and NLTK, so a few words are judged differently).
- ``messages`` holds only what was said since the previous observation, typed as raw
  TextArena's ``get_observation()`` returns it (and clears it): after a reset the ``PROMPT``;
  after a step the player's ``PLAYER_ACTION`` echo, then the game's ``GAME_MESSAGE`` feedback
  or ``GAME_ADMIN`` warning, if any (sender ``-1`` is the game, ``0`` the player; consecutive
  messages of the same sender and category are merged, as upstream merges them). Upstream
  plays through TextArena's ``LLMObservationWrapper``, whose whole-episode transcript,
  flattened into one ``MESSAGE`` string of ``[GAME] ...`` lines, is not reproduced: it would
  grow every observation with the episode. The full history (every guess and its feedback) is
  in ``state.raw_state["game_state"]["guess_history"]``. As upstream, ``prompt`` holds the
  instructions on the observation of ``reset`` and the env id ``"Wordle-v0"`` on every later
  one (the instructions are not re-sent each turn).
- ``wordle.greens``/``wordle.yellows`` on a winning step count the winning guess (upstream
  reads the previous guess's feedback, as a win prints none).
- ``metadata`` has ``env_id``, ``turn`` and ``reward_signals``, but not ``raw_messages`` (a
  copy of ``messages``).
- A step after the game ended is ignored: it returns no messages, ``done=True`` and
  ``reward=0.0`` (upstream would keep playing on a finished board).
"""

from __future__ import annotations

import dataclasses
import random
import re
import uuid
from typing import Any, ClassVar

from openenv_gym.runtime.environment import (
    Environment,
    EnvironmentMetadata,
    ObservationBatch,
    trusted,
)
from openenv_gym_servers.wordle.models import (
    WordleAction,
    WordleMessage,
    WordleObservation,
    WordleState,
)
from openenv_gym_servers.wordle.words import feedback_line, secret_words, valid_words

__all__ = ["WordleEnvironment"]

ENV_ID = "Wordle-v0"
WORD_LENGTH = 5
NUM_GUESSES = 6
ERROR_ALLOWANCE = 1
GAME_ID = -1
PLAYER_ID = 0

_GUESS = re.compile(r"\[(\w+)\]")
# TextArena strips role tags ("[Player]", "[GAME]") from the echoed player action.
_ROLE_TAGS = ("[Player]", "[GAME]")
# The only "[word]" messages that are a role tag (echoed as ""), by the word.
_TAG_WORDS = frozenset(tag[1:-1] for tag in _ROLE_TAGS)

_PROMPT_TEXT = (
    "You are Playing Wordle.\n"
    f"A secret {WORD_LENGTH}-letter word has been chosen. "
    f"You have {NUM_GUESSES} attempts to guess it.\n"
    "For each guess, wrap your word in square brackets (e.g., '[apple]').\n"
    "Feedback for each letter will be given as follows:\n"
    "  - G (green): correct letter in the correct position\n"
    "  - Y (yellow): letter exists in the word but in the wrong position\n"
    "  - X (wrong): letter is not in the word\n"
    "Enter your guess to begin.\n"
)
_PROMPT = _PROMPT_TEXT.strip()
# Messages are frozen, so every reset observation may hold this one.
_PROMPT_MESSAGE = WordleMessage(sender_id=GAME_ID, content=_PROMPT_TEXT, category="PROMPT")
_PROMPT_SAID = {"sender_id": GAME_ID, "content": _PROMPT_TEXT, "category": "PROMPT"}
_NO_BRACKETS = (
    "You tried submitting a word in the wrong format. Please make sure to use squared brackets."
)
_WIN_REASON = "Congratulations! You guessed the word correctly!"
_LENGTH_PROBLEM = f"Your word must be exactly {WORD_LENGTH} letters."
# The game's reply to a valid guess up to its feedback line, by word: a valid guess is a
# word of the list, so this holds at most one entry per listed word.
_SUBMITTED: dict[str, str] = {}

_DESCRIPTION = (
    "Wordle as TextArena's Wordle-v0: guess a secret five-letter word in six tries, with "
    "G/Y/X letter feedback. Wire-compatible with OpenEnv's textarena_env; reset(seed=...) is "
    "reproducible and nothing is downloaded."
)


# A message as its model dumps it: {"sender_id": int, "content": str, "category": str}.
_Said = dict[str, Any]


class WordleEnvironment(Environment[WordleAction, WordleObservation, WordleState]):
    """One game of Wordle per episode; see the module docstring for rules and rewards.

    Takes no arguments. Construction is cheap (no I/O): the word lists are loaded once per
    process, on first use, and shared.

    Example:
        >>> env = WordleEnvironment()
        >>> obs = env.reset(seed=7)
        >>> obs.done, obs.reward, [m.category for m in obs.messages]
        (False, 0.0, ['PROMPT'])
        >>> secret = env.state.raw_state["game_state"]["secret_word"]
        >>> obs = env.step(WordleAction(message=f"[{secret}]"))
        >>> obs.done, obs.reward, [m.category for m in obs.messages]
        (True, 1.0, ['PLAYER_ACTION'])
    """

    action_type: ClassVar[type[WordleAction]] = WordleAction
    observation_type: ClassVar[type[WordleObservation]] = WordleObservation
    state_type: ClassVar[type[WordleState]] = WordleState
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        self._rng = random.Random()
        self._episode_id: str | None = None
        self._step_count = 0
        self._secret = ""
        # (word, feedback line: the letters joined by spaces, as printed)
        self._history: list[tuple[str, str]] = []
        self._greens = 0  # of the latest valid guess
        self._yellows = 0
        self._submitted: dict[str, int] = {}
        self._error_count = 0
        self._turn = 0
        self._done = False
        self._invalid_end = False
        self._reason: str | None = None
        self._final_reward: float | None = None
        self._last_reward = 0.0
        self._last_signals: dict[str, float] | None = None  # handed out as copies only
        # A game is ready without reset(), as upstream's constructor resets.
        self._new_game(episode_id=None)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> WordleObservation:
        """Start a new game and return its first observation.

        Args:
            seed: Reseeds this instance's RNG, so the same seed draws the same secret word;
                ``None`` draws from the instance's current stream.
            episode_id: Id of the new episode; a random UUID when ``None``.
            **kwargs: Accepted and ignored, as OpenEnv does.

        Returns:
            The prompt, with ``reward=0.0`` and ``done=False``.
        """
        self._start(seed, episode_id)
        return self._observation([_PROMPT_MESSAGE], 0.0)

    def _start(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> None:
        if seed is not None:
            self._rng.seed(seed)
        self._new_game(episode_id=episode_id)

    def step(self, action: WordleAction) -> WordleObservation:
        """Play one message; see the module docstring for what counts as a valid guess.

        Args:
            action: The player's message.

        Returns:
            This turn's messages (the echoed action and the game's reply), with the step's
            reward, ``done`` and ``info``.
        """
        said, reward = self._play_message(action.message)
        # each dict is fresh and referenced nowhere else: it may become the model's __dict__
        return self._observation([trusted(WordleMessage, m) for m in said], reward)

    @classmethod
    def step_batch(
        cls, envs: list[WordleEnvironment], actions: list[WordleAction]
    ) -> ObservationBatch:
        """:meth:`step` for many games at once, by column (the batched protocol's hook).

        The same game logic as :meth:`step`; the observations come as the columns their
        models would be dumped to, without building one.
        """
        said: list[list[_Said]] = []
        rewards: list[float] = []
        for env, action in zip(envs, actions, strict=True):
            messages, reward = env._play_message(action.message)
            said.append(messages)
            rewards.append(reward)
        return _batch(envs, said, rewards, ENV_ID)  # every game has stepped: prompt is the id

    @classmethod
    def reset_batch(
        cls, envs: list[WordleEnvironment], kwargs: list[dict[str, Any]]
    ) -> ObservationBatch:
        """:meth:`reset` for many games at once, by column (the batched protocol's hook)."""
        errors: dict[int, BaseException] = {}
        for j, (env, options) in enumerate(zip(envs, kwargs, strict=True)):
            try:
                env._start(**options)
            except Exception as exc:  # that game only: as reset() would fail alone
                errors[j] = exc
        said = [[_PROMPT_SAID.copy()] for _ in envs]
        if not errors:  # every game was just reset
            return _batch(envs, said, [0.0] * len(envs), _PROMPT)
        batch = _batch(envs, said, [0.0] * len(envs))
        return dataclasses.replace(batch, errors=errors)

    def _play_message(self, message: str) -> tuple[list[_Said], float]:
        """One step of the game: this turn's messages (fresh dicts), and its reward."""
        self._step_count += 1
        if self._done:
            self._last_reward = 0.0
            self._last_signals = None
            return [], 0.0

        shown, word = _read_move(message)
        # This turn's messages: the player's, then at most one of the game's. No two in a row
        # share sender and category, so there is never anything to merge.
        said = [{"sender_id": PLAYER_ID, "content": shown, "category": "PLAYER_ACTION"}]

        earlier = 0
        if word is None:
            problem: str | None = _NO_BRACKETS
        else:
            earlier = self._submitted.get(word, 0)
            self._submitted[word] = earlier + 1
            problem = self._problem(word, earlier)

        reward = 0.0
        if problem is None:
            assert word is not None
            reward = self._play(word, said)
        elif self._error_count < ERROR_ALLOWANCE:
            self._error_count += 1
            said.append(
                {
                    "sender_id": GAME_ID,
                    "content": f"You attempted an invalid move. Reason: {problem} Please "
                    "resubmit a valid move and remember to follow the game rules to avoid "
                    "penalties.",
                    "category": "GAME_ADMIN",
                }
            )
        else:
            self._turn += 1  # TextArena counts the move that loses the game as a turn
            reward = self._completion()
            self._finish(reward, reason=f"Invalid Move: {problem}", invalid=True)

        self._last_reward = reward
        self._last_signals = {
            "wordle.greens": self._greens / WORD_LENGTH,
            "wordle.yellows": self._yellows / WORD_LENGTH,
            "wordle.repetitions": 1.0 - earlier,
            "wordle.correct": reward,
        }
        return said, reward

    def _problem(self, word: str, earlier: int) -> str | None:
        """Why ``word`` is not a valid guess (TextArena's checks, wording and order), or None.

        ``earlier``: how often it was submitted before in this game (a word never submitted
        was never guessed, so the history is searched only when it was).
        """
        if len(word) != WORD_LENGTH:
            return _LENGTH_PROBLEM
        if earlier and any(word == guessed for guessed, _ in self._history):
            return f"You have already guessed '{word}' before. Please try a different word."
        if word not in valid_words():
            return f"'{word}' is not an English word."
        return None

    def _play(self, word: str, said: list[_Said]) -> float:
        """Score a valid guess, append the game's reply and return the step's reward."""
        self._error_count = 0
        self._turn += 1
        secret = self._secret
        feedback = feedback_line(word, secret)
        history = self._history
        history.append((word, feedback))
        self._greens = feedback.count("G")
        self._yellows = feedback.count("Y")
        if word == secret:
            self._finish(1.0, reason=_WIN_REASON, invalid=False)
            return 1.0
        left = NUM_GUESSES - len(history)
        head = _SUBMITTED.get(word)
        if head is None:
            head = _SUBMITTED[word] = (
                f"You submitted [{word}].\nFeedback:\n{' '.join(word.upper())}\n"
            )
        said.append(
            {
                "sender_id": GAME_ID,
                "content": f"{head}{feedback}\nYou have {left} guesses left.",
                "category": "GAME_MESSAGE",
            }
        )
        if left:
            return 0.0
        completion = self._completion()
        self._finish(
            completion,
            reason=(
                "The turn limit has been reached. You didn't guess the word, but your best "
                f"guess matched {round(completion * 100)}% of the letters in the correct "
                f"positions.\nThe secret word was: **{secret}**."
            ),
            invalid=False,
        )
        return completion

    @property
    def state(self) -> WordleState:
        """The session state; ``raw_state["game_state"]["secret_word"]`` holds the secret."""
        if self._episode_id is None:
            # Drawn on first read, not on every reset: uuid4 costs more than the rest of a reset.
            self._episode_id = str(uuid.uuid4())
        reward = self._final_reward
        raw: dict[str, Any] = {
            "turn": self._turn,
            "done": self._done,
            "rewards": None if reward is None else {str(PLAYER_ID): reward},
            "error_count": self._error_count,
            "game_info": {
                str(PLAYER_ID): {
                    "role": f"Player {PLAYER_ID}",
                    "invalid_move": self._invalid_end,
                    "turn_count": self._turn,
                    "reason": self._reason,
                }
            },
            "game_state": {
                "secret_word": self._secret,
                "guess_history": [[word, list(fb[::2])] for word, fb in self._history],
                "word_length": WORD_LENGTH,
                "num_guesses": NUM_GUESSES,
            },
        }
        if self._last_signals is not None:
            raw["reward_signals"] = self._last_signals.copy()
        return WordleState(
            episode_id=self._episode_id,
            step_count=self._step_count,
            env_id=ENV_ID,
            num_players=1,
            max_turns=None,
            turn=self._turn,
            last_reward=self._last_reward,
            last_info=self._info(),
            raw_state=raw,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """Describe the environment (served at ``GET /metadata``)."""
        return EnvironmentMetadata(name="WordleEnvironment", description=_DESCRIPTION)

    # ------------------------------------------------------------------ helpers

    def _new_game(self, episode_id: str | None) -> None:
        self._secret = self._rng.choice(secret_words())
        self._episode_id = episode_id  # None: drawn when ``state`` is first read
        self._step_count = 0
        self._history = []
        self._greens = self._yellows = 0
        self._submitted = {}
        self._error_count = 0
        self._turn = 0
        self._done = False
        self._invalid_end = False
        self._reason = None
        self._final_reward = None
        self._last_reward = 0.0
        self._last_signals = None

    def _finish(self, reward: float, reason: str, invalid: bool) -> None:
        self._done = True
        self._final_reward = reward
        self._reason = reason
        self._invalid_end = invalid

    def _info(self) -> dict[str, Any]:
        """A fresh ``info`` dict for the latest step (empty after a reset)."""
        info: dict[str, Any] = {}
        if self._last_signals is not None:
            info["reward_signals"] = self._last_signals.copy()
        if self._done:
            info["reason"] = self._reason
            info["invalid_move"] = self._invalid_end
        return info

    def _completion(self) -> float:
        """``(greens + 0.5 * yellows) / 5`` of the latest valid guess (``0.0`` if none)."""
        return (self._greens + 0.5 * self._yellows) / WORD_LENGTH

    def _metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"env_id": ENV_ID, "turn": self._turn}
        if self._last_signals is not None:
            metadata["reward_signals"] = self._last_signals.copy()
        return metadata

    def _observation(self, messages: list[WordleMessage], reward: float) -> WordleObservation:
        """The observation of the latest reset or step; it shares nothing mutable with ``self``.

        Built without validation (see :func:`~openenv_gym.runtime.environment.trusted`):
        every value below has its field's type, and ``messages`` is a fresh list.
        """
        return trusted(
            WordleObservation,
            {
                "done": self._done,
                "reward": reward,
                "metadata": self._metadata(),
                "prompt": _PROMPT if self._step_count == 0 else ENV_ID,
                "messages": messages,
                "current_player_id": PLAYER_ID,
                "legal_players": [PLAYER_ID],
                "info": self._info(),
            },
        )


def _read_move(message: str) -> tuple[str, str | None]:
    """A move's echo and its guess (None for no guess).

    The echo is the message with role tags stripped; the guess is its first ``[word]``,
    lower-cased, and a message without brackets is a bare guess. A message that is one
    bracketed run of letters and digits (``str.isalnum``: re's word characters less ``_``)
    is its own ``[word]`` and holds a role tag only if it is one; anything else takes the
    general path (:data:`_GUESS`, the tags).
    """
    if "[" in message:
        inner = message[1:-1]
        if message[0] == "[" and message[-1] == "]" and inner.isalnum():
            return ("" if inner in _TAG_WORDS else message), inner.lower()
        shown = message
        for tag in _ROLE_TAGS:
            if tag in shown:
                shown = shown.replace(tag, "")
        match = _GUESS.search(message)
        return shown, (match.group(1).lower() if match is not None else None)
    if "]" in message:  # no "[": no [word], no role tag
        return message, None
    if message.isalnum():
        return ("" if message in _TAG_WORDS else f"[{message}]"), message.lower()
    shown = f"[{message}]"
    match = _GUESS.search(shown)  # only "_" can still make a [word]
    return shown, (match.group(1).lower() if match is not None else None)


def _batch(
    envs: list[WordleEnvironment],
    said: list[list[_Said]],
    rewards: list[float],
    prompt: str | None = None,
) -> ObservationBatch:
    """The observations :meth:`WordleEnvironment._observation` would give, by column.

    ``said``: each game's messages, as fresh dicts (they go into the batch as they are).
    ``prompt``: every game's prompt, when the caller knows it is the same for all.
    One pass over the games builds every column: ``info`` as :meth:`~WordleEnvironment._info`
    builds it, and ``metadata`` by column when every game has the same keys.
    """
    n = len(envs)
    turns: list[int] = []
    infos: list[dict[str, Any]] = []
    dones: list[bool] = []
    signals: list[dict[str, float]] = []  # metadata's copies, of the games that have some
    for env in envs:
        last = env._last_signals
        info: dict[str, Any]
        if last is None:
            info = {}
        else:
            info = {"reward_signals": last.copy()}
            signals.append(last.copy())
        done = env._done
        if done:
            info["reason"] = env._reason
            info["invalid_move"] = env._invalid_end
        dones.append(done)
        infos.append(info)
        turns.append(env._turn)
    metadata: dict[str, list[Any]] | list[dict[str, Any]]
    if not n:
        metadata = []
    elif len(signals) == n:  # every game has stepped: metadata by column
        metadata = {"env_id": [ENV_ID] * n, "turn": turns, "reward_signals": signals}
    elif not signals:  # every game was just reset
        metadata = {"env_id": [ENV_ID] * n, "turn": turns}
    else:
        metadata = [env._metadata() for env in envs]
    return ObservationBatch(
        {
            "prompt": [_PROMPT if env._step_count == 0 else ENV_ID for env in envs]
            if prompt is None
            else [prompt] * n,
            "messages": said,
            "current_player_id": [PLAYER_ID] * n,
            "legal_players": [[PLAYER_ID] for _ in envs],
            "info": infos,
        },
        rewards=rewards,
        dones=dones,
        metadata=metadata,
    )
