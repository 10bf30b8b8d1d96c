"""Wordle for openenv-gym's client side: its codec and its text interface.

The codec (spaces and wire conversions of ``openenv/Wordle-v0``) reads both our Wordle
server and OpenEnv's TextArena one; the text interface is the ``guess(word)`` tool TRL
gives the model. Its record (:func:`~openenv_gym_servers.wordle.record.record`) names both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from openenv_gym.spaces import Codec, printable_texts, text_space, to_printable

if TYPE_CHECKING:
    from openenv_gym.integrations.text import TextInterface

__all__ = ["WORDLE_ACTION_MAX", "WORDLE_OBS_MAX", "codec", "text_interface"]

WORDLE_OBS_MAX = 8192
"""Longest Wordle observation (the observation space's ``max_length``)."""

WORDLE_ACTION_MAX = 256
"""Longest Wordle action (the action space's ``max_length``)."""


def _wordle_text(obs: Mapping[str, Any]) -> str:
    """What the player is told this turn: the game's messages since its last move.

    After ``reset`` that is the prompt. Works with our Wordle (one message per thing said)
    and OpenEnv's TextArena server (one growing transcript: see :func:`_latest_turn`). A
    move that ends the game with no message of its own (the winning guess, the second
    invalid move in a row) shows the game's last word on it: ``info["reason"]`` (e.g.
    ``"Congratulations! You guessed the word correctly!"``), not the wire's ``prompt``
    (which is the env id ``"Wordle-v0"`` on every step).
    """
    return _turn_text(
        obs.get("messages"), obs.get("current_player_id", 0), obs.get("prompt", ""), obs.get("info")
    )


_TRANSCRIPT_ENTRY = re.compile(r"(?:^|\n)\[(?:GAME|Player(?: \d+)?)\] ")
"""Where an entry starts in TextArena's ``LLMObservationWrapper`` transcript."""

_WORDLE_PROMPT = "You are Playing Wordle"
_WORDLE_SAYS = (_WORDLE_PROMPT, "You submitted [", "You attempted an invalid move")
"""How every message of TextArena's Wordle game begins (prompt, feedback, warning)."""


def _latest_turn(text: str) -> str:
    """This turn's part of a TextArena Wordle transcript; ``text`` itself if it is none.

    OpenEnv's TextArena server plays through ``LLMObservationWrapper``, which renders the
    whole episode as ``[GAME] <entry>`` lines; the server then merges them into one message
    (sender ``-1``), so the transcript grows every turn. Each move adds the player's echoed
    guess (also tagged ``[GAME]``), then at most one game message. Entries that begin as
    Wordle's own messages are the game's; the turn is what follows the last other entry
    (the echoed guess): the feedback or warning, or nothing when the move ended the game.
    """
    if not text.startswith("[GAME] "):
        return text
    entries = [entry.strip() for entry in _TRANSCRIPT_ENTRY.split(text)[1:]]
    if not entries or not entries[0].startswith(_WORDLE_PROMPT):
        return text  # some other game: its messages cannot be told from the moves
    last_move = max(
        (i for i, entry in enumerate(entries) if not entry.startswith(_WORDLE_SAYS)), default=-1
    )
    return "\n".join(entries[last_move + 1 :])


def _wordle_obs(obs: Mapping[str, Any]) -> str:
    return to_printable(_wordle_text(obs))[:WORDLE_OBS_MAX]


def _wordle_columns(columns: Mapping[str, Any], numeric: frozenset[str], n: int) -> Any:
    messages, prompts = columns.get("messages"), columns.get("prompt")
    if not isinstance(messages, list) or not isinstance(prompts, list):
        return None
    players = columns.get("current_player_id")
    if players is None:
        players = [0] * n
    elif isinstance(players, np.ndarray):
        players = players.tolist()
    infos = columns.get("info")
    if not isinstance(infos, list):
        infos = [None] * n
    texts = [
        _turn_text(m, p, prompt, info)
        for m, p, prompt, info in zip(messages, players, prompts, infos, strict=True)
    ]
    clean = printable_texts(texts, WORDLE_OBS_MAX)
    return clean if clean is not None else [to_printable(t)[:WORDLE_OBS_MAX] for t in texts]


def _turn_text(messages: Any, player: Any, prompt: Any, info: Any = None) -> str:
    """This turn's text: the game's messages after the player's, else :func:`_no_message`."""
    if messages.__class__ is list and len(messages) == 2:
        # the usual turn: the player's echo, then one message of the game's
        echo, said = messages
        if (
            echo.__class__ is dict
            and said.__class__ is dict
            and echo.get("sender_id") == player
            and said.get("sender_id") != player
        ):
            content = said.get("content", "")
            text = (content if content.__class__ is str else str(content)).strip()
            if text.startswith("[GAME] "):
                text = _latest_turn(text)
            return text or _no_message(prompt, info)
    tail: list[str] = []
    for message in reversed(messages or ()):
        if message.__class__ is not dict and not isinstance(message, Mapping):
            break
        if message.get("sender_id") == player:
            break
        content = message.get("content", "")
        tail.append(content if content.__class__ is str else str(content))
    text = tail[0].strip() if len(tail) == 1 else "\n".join(reversed(tail)).strip()
    if text.startswith("[GAME] "):  # OpenEnv's TextArena: the whole episode in one message
        text = _latest_turn(text)
    return text or _no_message(prompt, info)


def _no_message(prompt: Any, info: Any) -> str:
    """A turn the game said nothing on: why the game ended, if it did; else the prompt."""
    if info.__class__ is dict or isinstance(info, Mapping):
        reason = info.get("reason")
        if isinstance(reason, str) and reason.strip():
            return reason.strip()
    return str(prompt)


def _message_action(action: Any) -> dict[str, Any]:
    return {"message": str(action)}


def _message_actions(actions: list[Any]) -> dict[str, list[Any]]:
    return {"message": [a if type(a) is str else str(a) for a in actions]}


def codec() -> Codec:
    """The codec of ``openenv/Wordle-v0``: Text observations (this turn) and actions."""
    return Codec(
        "wordle",
        text_space(WORDLE_OBS_MAX),
        text_space(WORDLE_ACTION_MAX, min_length=1),
        _message_action,
        _wordle_obs,
        _wordle_text,
        decode_columns=_wordle_columns,
        encode_actions=_message_actions,
    )


# ------------------------------------------------------------------ text interface

_BRACKETED = re.compile(r"\[([A-Za-z]+)\]")
_WORD = re.compile(r"[A-Za-z]+")


def _tool_action(args: Mapping[str, Any]) -> str:
    word = str(args["word"]).strip()
    return word if "[" in word else f"[{word}]"


def _parse(text: str) -> str:
    """The last ``[word]`` of the answer, a bare word, or else the answer as it is.

    An answer with no guess still goes to the game, which judges it as TextArena does (an
    invalid move: a warning, and the game ends at the second one in a row).
    """
    from openenv_gym.integrations.text import strip_reasoning

    answer = strip_reasoning(text)
    found = _BRACKETED.findall(answer)
    if found:
        return f"[{found[-1].lower()}]"
    if _WORD.fullmatch(answer):
        return f"[{answer.lower()}]"
    return to_printable(answer)[:WORDLE_ACTION_MAX] or "[]"


def _observation_text(obs: str) -> str:
    # a step with no game message (the move that ended the game) shows the env id, as
    # upstream's ``prompt`` field does: nothing to tell the model
    return "" if obs == "Wordle-v0" else obs


def text_interface() -> TextInterface:
    """The ``guess(word)`` tool, and plain-text answers as ``[word]``."""
    from openenv_gym.integrations.text import Param, TextInterface

    return TextInterface(
        "guess",
        "Guess the secret five-letter word of the Wordle game.",
        (Param("word", str, "A five-letter English word, for example crane."),),
        _tool_action,
        _parse,
        _observation_text,
        instructions="Answer with your guess: one five-letter word in square brackets, "
        "for example [crane].",
        returns="The feedback: G (right letter, right place), Y (in the word, elsewhere), "
        "X (not in the word).",
    )
