"""The :class:`Codec` (an environment's spaces and wire conversions) and fast checks.

Also here: the fast ``contains`` check of Discrete spaces (Text's are in
:mod:`openenv_gym.spaces.printable`), :func:`codec_for` (the codec of a known environment,
from its :class:`~openenv_gym.envs.EnvRecord`) and the one-line error messages about
actions.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym import envs
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.spaces.printable import PRINTABLE, text_contains, texts_contain
from openenv_gym.spaces.tools import ToolActions

__all__ = [
    "Codec",
    "ColumnDecoder",
    "action_error",
    "codec_for",
    "describe_space",
    "discrete_contains",
    "known_envs",
    "short_repr",
    "why_not_in",
]


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
        contain_actions: A fast "all of these actions are in the space", for batches
            (default: :attr:`contains_action` on each).
        observed: The wire fields the Gymnasium observation holds, left out of ``info``
            (always includes ``primary``).
        decode_columns: Optional fast path of the vector env: observation columns (field ->
            one entry per env, a list or an ndarray; the set of ndarray columns that
            stand for JSON numbers; the count) -> the batch in Gymnasium's batched form
            for :attr:`observation_space` (a list of ``str`` for Text, an ndarray for Box),
            or None when it cannot (the vector env then decodes env by env).
        encode_actions: Optional fast path of the vector env: a list of actions -> the wire
            fields as columns (field -> one entry per action), or None when it cannot.
        bind_schema: For a hand-made codec that speaks several wire layouts (Echo: the
            legacy ``EchoAction`` server or OpenEnv's MCP echo): called with the server's
            ``GET /schema`` body by the facades that read it, before the first reset. A
            codec not bound picks its layout from the first reply it decodes.
        tool_actions: For an MCP tool server (:func:`codec_from_schema` of one): the tools
            the actions call, and how.
        reads_metadata: :attr:`decode_observation` and :attr:`render` read the reply's
            ``metadata`` as an observation field (a tool server's reset greeting). The
            facades then put it there whatever the protocol (OpenEnv's JSON nests it in
            the observation; the batched protocol sends it apart).
        schema: The ``GET /schema`` body the codec was built from
            (:func:`~openenv_gym.spaces.codec_from_schema`), None for a hand-made one.
        render_rgb: Wire observation fields -> an RGB picture (``uint8``, height x width
            x 3) for ``render_mode="rgb_array"``; None when the env has no picture.
    """

    name: str
    observation_space: spaces.Space[Any]
    action_space: spaces.Space[Any]
    encode_action: Callable[[Any], dict[str, Any]]
    decode_observation: Callable[[Mapping[str, Any]], Any]
    render: Callable[[Mapping[str, Any]], str]
    primary: str | None = None
    contains_action: Callable[[Any], bool] | None = field(default=None)
    observed: frozenset[str] = frozenset()
    contain_actions: Callable[[list[Any]], bool] | None = field(default=None)
    decode_columns: ColumnDecoder | None = None
    encode_actions: Callable[[list[Any]], dict[str, list[Any]] | None] | None = None
    bind_schema: Callable[[Mapping[str, Any]], None] | None = None
    tool_actions: ToolActions | None = None
    reads_metadata: bool = False
    schema: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    render_rgb: Callable[[Mapping[str, Any]], np.ndarray[Any, Any]] | None = None

    def __post_init__(self) -> None:
        if self.primary is not None and self.primary not in self.observed:
            object.__setattr__(self, "observed", self.observed | {self.primary})
        if self.contains_action is None:
            space = self.action_space
            fast: Callable[[Any], bool] = space.contains
            if isinstance(space, spaces.Text) and set(space.character_set) <= PRINTABLE:
                fast = text_contains(space)
                if self.contain_actions is None:
                    object.__setattr__(self, "contain_actions", texts_contain(space))
            elif isinstance(space, spaces.Discrete):
                fast = discrete_contains(space)
            object.__setattr__(self, "contains_action", fast)
        if self.contain_actions is None:
            one = self.contains_action
            assert one is not None
            object.__setattr__(self, "contain_actions", lambda values: all(map(one, values)))


ColumnDecoder = Callable[[Mapping[str, Any], frozenset[str], int], Any]
"""``(columns, numeric, n) -> batch or None``: see :attr:`Codec.decode_columns`."""


def known_envs() -> list[str]:
    """Names accepted by :func:`codec_for`: every :class:`~openenv_gym.envs.EnvRecord`'s."""
    return sorted(envs.environments())


def codec_for(name: str) -> Codec:
    """The codec of a known environment (a fresh one: spaces carry their own RNG).

    Raises:
        ConfigurationError: Unknown name.
    """
    record = envs.environment(name)
    if record is None:
        raise ConfigurationError(f"unknown environment {name!r}; known: {', '.join(known_envs())}")
    codec = record.make_codec()
    if not isinstance(codec, Codec):
        raise ConfigurationError(
            f"the codec factory of {record.name!r} made {codec!r}, not a Codec"
        )
    return codec


# ------------------------------------------------------------------ error messages
_SHORT = reprlib.Repr()
_SHORT.maxstring = 60
_SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 6


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to about 60 characters (long strings keep their two ends)."""
    return _SHORT.repr(value)


def describe_space(space: spaces.Space[Any]) -> str:
    """A one-line description of ``space`` (a Text space's charset is not spelled out)."""
    if isinstance(space, spaces.Text):
        charset = "printable ASCII" if set(space.character_set) == PRINTABLE else "its charset"
        return f"Text({space.min_length}, {space.max_length}, {charset})"
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe_space(v)}" for k, v in space.items()) + ")"
    return " ".join(str(space).split())


def _a_type(value: Any) -> str:
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def why_not_in(space: spaces.Space[Any], value: Any) -> str:
    """Why ``value`` is not in ``space``, in a few words (for an error message).

    Never raises: a value too odd to say more about (a ragged nested list for a ``Box``)
    is just "outside the space", so the caller's typed error is what the user sees.
    """
    try:
        return _why_not_in(space, value)
    except Exception:  # an error message must not fail on the value it names
        return "outside the space"


def _why_not_in(space: spaces.Space[Any], value: Any) -> str:
    if isinstance(value, np.ndarray) and value.shape == () and not isinstance(space, spaces.Box):
        value = value.item()  # a 0-d array stands for its one value
    if isinstance(space, spaces.Text):
        if not isinstance(value, str):
            return f"{_a_type(value)}, not a str"
        if len(value) > space.max_length:
            return f"{len(value)} characters, more than the {space.max_length} allowed"
        if len(value) < space.min_length:
            return f"{len(value)} characters, fewer than the {space.min_length} needed"
        for at, char in enumerate(value):
            if char not in space.character_set:
                return f"character {char!r} at index {at} is not in the charset"
        return "the space refused it"
    if isinstance(space, spaces.Dict):
        if not isinstance(value, Mapping):
            return f"{_a_type(value)}, not a dict"
        missing = sorted(set(space.keys()) - set(value))
        if missing:
            return f"missing key(s) {', '.join(map(repr, missing))}"
        extra = sorted(map(str, set(value) - set(space.keys())))
        if extra:
            return f"unexpected key(s) {', '.join(map(repr, extra))}"
        for key, sub in space.items():
            if not sub.contains(value[key]):
                return f"[{key!r}] is {short_repr(value[key])}: {_why_not_in(sub, value[key])}"
        return "the space refused it"
    if isinstance(space, spaces.Discrete):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            return f"{_a_type(value)}, not an integer"
        return f"outside [{space.start}, {space.start + space.n - 1}]"
    if isinstance(space, spaces.Box):
        shape = np.shape(value)
        if shape != space.shape:
            return f"shape {shape}, not {space.shape}"
        return f"outside the bounds [{space.low.min()}, {space.high.max()}]"
    return "outside the space"


def action_error(space: spaces.Space[Any], value: Any, what: str = "action") -> str:
    """One line: which ``value`` (shortened), which ``space``, and what is wrong."""
    return (
        f"{what} {short_repr(value)} is not in the action space {describe_space(space)}: "
        f"{why_not_in(space, value)}"
    )
