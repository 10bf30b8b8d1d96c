"""Gymnasium spaces and codecs: how a wire observation/action maps to a Gymnasium one.

A :class:`Codec` bundles an environment's spaces with the two conversions the facade
needs: Gymnasium action -> action fields sent on the wire, and wire observation fields ->
Gymnasium observation. :func:`codec_for` returns the codec of a known environment.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, RemoteProtocolError

__all__ = ["PRINTABLE", "Codec", "codec_for", "known_envs"]

PRINTABLE = frozenset(string.printable)
"""Charset of Text spaces: printable ASCII plus whitespace (newline, tab, ...)."""

TEXT_CHARSET = "".join(sorted(PRINTABLE))


_NOT_PRINTABLE = re.compile(r"[^ -~\t\n\r\x0b\x0c]")
"""Matches any character outside :data:`PRINTABLE` (one C-level scan instead of a loop)."""


def _text(max_length: int, min_length: int = 0) -> spaces.Text:
    return spaces.Text(max_length=max_length, min_length=min_length, charset=TEXT_CHARSET)


def text_contains(space: spaces.Text) -> Callable[[Any], bool]:
    """A fast ``space.contains`` for Text spaces over :data:`TEXT_CHARSET`."""
    low, high = space.min_length, space.max_length

    def contains(value: Any) -> bool:
        return (
            isinstance(value, str)
            and low <= len(value) <= high
            and _NOT_PRINTABLE.search(value) is None
        )

    return contains


def discrete_contains(space: spaces.Discrete) -> Callable[[Any], bool]:
    """A fast ``space.contains`` for Discrete spaces (Python and numpy integers)."""
    low = int(space.start)
    high = low + int(space.n)

    def contains(value: Any) -> bool:
        if isinstance(value, int | np.integer) and not isinstance(value, bool):
            return bool(low <= value < high)
        return bool(space.contains(value))

    return contains


@dataclass(frozen=True)
class Codec:
    """An environment's spaces and wire conversions.

    Attributes:
        name: Short name (``"wordle"``): also the server the local provider starts.
        observation_space: Space of one observation.
        action_space: Space of one action.
        encode_action: Gymnasium action -> the action's wire fields.
        decode_observation: Wire observation fields -> Gymnasium observation.
        render: Wire observation fields -> text for ``render_mode="ansi"``.
        primary: The wire field the Gymnasium observation is made of (left out of
            ``info``), or None when it is derived from several fields.
        contains_action: A fast ``action_space.contains`` (default: the space's own).
    """

    name: str
    observation_space: spaces.Space[Any]
    action_space: spaces.Space[Any]
    encode_action: Callable[[Any], dict[str, Any]]
    decode_observation: Callable[[Mapping[str, Any]], Any]
    render: Callable[[Mapping[str, Any]], str]
    primary: str | None = None
    contains_action: Callable[[Any], bool] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.contains_action is None:
            space = self.action_space
            fast: Callable[[Any], bool] = space.contains
            if isinstance(space, spaces.Text) and set(space.character_set) <= PRINTABLE:
                fast = text_contains(space)
            elif isinstance(space, spaces.Discrete):
                fast = discrete_contains(space)
            object.__setattr__(self, "contains_action", fast)


def _field(obs: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = obs.get(name)
    if not isinstance(value, kind):
        raise RemoteProtocolError(f"observation field {name!r} missing or not {kind}: {value!r}")
    return value


# ---------------------------------------------------------------- TextArena Wordle


def _wordle_text(obs: Mapping[str, Any]) -> str:
    """What the player is told this turn: the game's messages since its last move.

    After ``reset`` that is the prompt. Works with our Wordle and OpenEnv's TextArena.
    """
    messages = obs.get("messages") or []
    player = obs.get("current_player_id", 0)
    tail: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("sender_id") == player:
            break
        tail.append(str(message.get("content", "")))
    text = "\n".join(reversed(tail)).strip()
    return text or str(obs.get("prompt", ""))


def _ascii(text: str) -> str:
    """``text`` with every character outside the charset replaced by ``?``."""
    if _NOT_PRINTABLE.search(text) is None:  # the common case: nothing to copy
        return text
    return _NOT_PRINTABLE.sub("?", text)


def _wordle_obs(obs: Mapping[str, Any]) -> str:
    return _ascii(_wordle_text(obs))[:WORDLE_OBS_MAX]


WORDLE_OBS_MAX = 8192


def _message_action(action: Any) -> dict[str, Any]:
    return {"message": str(action)}


# --------------------------------------------------------------------------- Echo


def _echo_obs(obs: Mapping[str, Any]) -> str:
    return _ascii(str(_field(obs, "echoed_message", str)))[:ECHO_MAX]


ECHO_MAX = 4096

# -------------------------------------------------------------------------- Catch

CATCH_ROWS, CATCH_COLUMNS = 10, 5


def _catch_obs(obs: Mapping[str, Any]) -> np.ndarray[Any, np.dtype[np.float32]]:
    state = obs.get("info_state")
    array = np.asarray(state, dtype=np.float32)
    if array.shape != (CATCH_ROWS * CATCH_COLUMNS,):
        raise RemoteProtocolError(f"catch info_state must have 50 values, got shape {array.shape}")
    return array


def _catch_action(action: Any) -> dict[str, Any]:
    return {"action_id": int(action)}


def _catch_render(obs: Mapping[str, Any]) -> str:
    grid = _catch_obs(obs).reshape(CATCH_ROWS, CATCH_COLUMNS)
    return "\n".join("".join("#" if v else "." for v in row) for row in grid)


_CODECS: dict[str, Callable[[], Codec]] = {
    "wordle": lambda: Codec(
        "wordle",
        _text(WORDLE_OBS_MAX),
        _text(256, min_length=1),
        _message_action,
        _wordle_obs,
        _wordle_text,
    ),
    "echo": lambda: Codec(
        "echo",
        _text(ECHO_MAX),
        _text(ECHO_MAX, min_length=1),
        _message_action,
        _echo_obs,
        _echo_obs,
    ),
    "catch": lambda: Codec(
        "catch",
        spaces.Box(0.0, 1.0, (CATCH_ROWS * CATCH_COLUMNS,), np.float32),
        spaces.Discrete(3),
        _catch_action,
        _catch_obs,
        _catch_render,
        primary="info_state",
    ),
}


def known_envs() -> list[str]:
    """Names accepted by :func:`codec_for`."""
    return sorted(_CODECS)


def codec_for(name: str) -> Codec:
    """The codec of a known environment (a fresh one: spaces carry their own RNG).

    Raises:
        ConfigurationError: Unknown name.
    """
    try:
        return _CODECS[name.lower()]()
    except KeyError:
        raise ConfigurationError(
            f"unknown environment {name!r}; known: {', '.join(known_envs())}"
        ) from None
