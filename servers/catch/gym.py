"""Catch for openenv-gym's client side: its codec and its text interface.

The codec of ``openenv/Catch-v0`` (a ``Box`` board of 50 cells, ``Discrete(3)`` moves,
rendered as text or as a picture) and the ``move(direction)`` tool. Its record
(:func:`~openenv_gym_servers.catch.record.record`) names both.
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
    "CATCH_CELL",
    "CATCH_COLUMNS",
    "CATCH_DIRECTIONS",
    "CATCH_ROWS",
    "catch_grid",
    "catch_image",
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


CATCH_CELL = 16
"""Pixels per side of a board cell in :func:`catch_image` (the picture is 160 x 80)."""

_BACKGROUND = np.array([24, 24, 32], dtype=np.uint8)
_BALL = np.array([250, 170, 40], dtype=np.uint8)
_PADDLE = np.array([80, 160, 250], dtype=np.uint8)


def catch_image(board: Any, cell: int = CATCH_CELL) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """A Catch board (50 values, top row first) as an RGB picture.

    ``uint8`` of shape ``(10 * cell, 5 * cell, 3)``: the ball orange, the paddle (bottom
    row) blue, on a dark background.

    >>> board = [0.0] * 50
    >>> board[2] = board[47] = 1.0  # the ball in row 0, the paddle under it
    >>> image = catch_image(board)
    >>> image.shape, image.dtype.name
    ((160, 80, 3), 'uint8')
    >>> image[0, 2 * 16].tolist(), image[-1, 2 * 16].tolist(), image[0, 0].tolist()
    ([250, 170, 40], [80, 160, 250], [24, 24, 32])
    """
    grid = np.asarray(board).reshape(CATCH_ROWS, CATCH_COLUMNS) != 0
    cells = np.empty((CATCH_ROWS, CATCH_COLUMNS, 3), dtype=np.uint8)
    cells[:] = _BACKGROUND
    cells[grid] = _BALL
    cells[-1][grid[-1]] = _PADDLE  # the bottom row holds the paddle (and a caught ball)
    return np.repeat(np.repeat(cells, cell, axis=0), cell, axis=1)


def _catch_picture(obs: Mapping[str, Any]) -> np.ndarray[Any, np.dtype[np.uint8]]:
    return catch_image(_catch_obs(obs))


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
        render_rgb=_catch_picture,
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
