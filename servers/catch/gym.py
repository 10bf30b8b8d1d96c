"""Catch for openenv-gym's client side: its codec and its text interface.

The codec of ``openenv/Catch-v0`` (a ``Box`` board of 50 cells, ``Discrete(3)`` moves)
and the ``move(direction)`` tool. :data:`~openenv_gym_servers.catch.RECORD` names both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import InvalidActionError, RemoteProtocolError
from openenv_gym.spaces import Codec

if TYPE_CHECKING:
    from openenv_gym.integrations.text import TextInterface

__all__ = [
    "CATCH_COLUMNS",
    "CATCH_DIRECTIONS",
    "CATCH_ROWS",
    "catch_grid",
    "codec",
    "text_interface",
]


CATCH_ROWS, CATCH_COLUMNS = 10, 5
"""The board's size."""


def _catch_obs(obs: Mapping[str, Any]) -> np.ndarray[Any, np.dtype[np.float32]]:
    state = obs.get("info_state")
    array = np.asarray(state, dtype=np.float32)
    if array.shape != (CATCH_ROWS * CATCH_COLUMNS,):
        raise RemoteProtocolError(f"catch info_state must have 50 values, got shape {array.shape}")
    return array


def _catch_columns(columns: Mapping[str, Any], numeric: frozenset[str], n: int) -> Any:
    state = columns.get("info_state")
    try:
        array = np.asarray(state, dtype=np.float32)
    except (TypeError, ValueError):
        return None
    if array.shape != (n, CATCH_ROWS * CATCH_COLUMNS):
        return None
    return array


def _catch_action(action: Any) -> dict[str, Any]:
    return {"action_id": int(action)}


def _catch_actions(actions: list[Any]) -> dict[str, list[Any]]:
    return {"action_id": [int(a) for a in actions]}


def catch_grid(board: Any) -> str:
    """A Catch board (50 values, top row first) as text: ``#`` ball or paddle, ``.`` empty."""
    grid = np.asarray(board).reshape(CATCH_ROWS, CATCH_COLUMNS)
    return "\n".join("".join("#" if v else "." for v in row) for row in grid)


def _catch_render(obs: Mapping[str, Any]) -> str:
    return catch_grid(_catch_obs(obs))


def codec() -> Codec:
    """The codec of ``openenv/Catch-v0``: the board (``info_state``) and the move."""
    return Codec(
        "catch",
        spaces.Box(0.0, 1.0, (CATCH_ROWS * CATCH_COLUMNS,), np.float32),
        spaces.Discrete(3),
        _catch_action,
        _catch_obs,
        _catch_render,
        primary="info_state",
        decode_columns=_catch_columns,
        encode_actions=_catch_actions,
    )


# ------------------------------------------------------------------ text interface

CATCH_DIRECTIONS = ("left", "stay", "right")
"""The moves, in the order of their actions."""

_DIRECTION = re.compile(r"\b(left|stay|right)\b", re.I)


def _tool_action(args: Mapping[str, Any]) -> int:
    direction = str(args["direction"]).strip().lower()
    if direction not in CATCH_DIRECTIONS:
        raise InvalidActionError(
            f"direction must be one of {', '.join(CATCH_DIRECTIONS)}, got {direction!r}"
        )
    return CATCH_DIRECTIONS.index(direction)


def _parse(text: str) -> int:
    from openenv_gym.integrations.text import strip_reasoning

    found = _DIRECTION.findall(strip_reasoning(text))
    if not found:
        raise InvalidActionError("no move found: answer with left, stay or right")
    return CATCH_DIRECTIONS.index(found[-1].lower())


def text_interface() -> TextInterface:
    """The ``move(direction)`` tool; a plain-text answer's last direction is the move."""
    from openenv_gym.integrations.text import Param, TextInterface

    return TextInterface(
        "move",
        "Move the paddle on the bottom row to catch the falling ball.",
        (
            Param(
                "direction",
                Literal["left", "stay", "right"],
                "Where the paddle goes: left, stay or right.",
            ),
        ),
        _tool_action,
        _parse,
        catch_grid,
        instructions="Answer with one word: left, stay or right.",
        returns="The board, top row first: '#' marks the ball and the paddle.",
    )
