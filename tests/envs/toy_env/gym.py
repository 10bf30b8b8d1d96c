"""The toy counter's client side: its codec and its text interface."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.integrations.text import Param, TextInterface, strip_reasoning
from openenv_gym.spaces import Codec


def _encode(action: Any) -> dict[str, Any]:
    return {"amount": int(action)}


def _decode(obs: Mapping[str, Any]) -> np.ndarray:
    return np.array([obs["count"]], dtype=np.int64)


def _render(obs: Mapping[str, Any]) -> str:
    return f"count: {obs['count']}"


def codec() -> Codec:
    return Codec(
        "toy_counter",
        spaces.Box(0, 1000, (1,), np.int64),
        spaces.Discrete(3),
        _encode,
        _decode,
        _render,
        primary="count",
    )


def _add(args: Mapping[str, Any]) -> int:
    return int(args["amount"])


def _parse(text: str) -> int:
    return int(strip_reasoning(text))


def _text(obs: Any) -> str:
    return f"The counter is at {int(obs[0])}."


def text_interface() -> TextInterface:
    return TextInterface(
        "add",
        "Add an amount to the counter; the episode ends when it reaches 5.",
        (Param("amount", int, "0, 1 or 2."),),
        _add,
        _parse,
        _text,
        returns="The counter.",
    )
