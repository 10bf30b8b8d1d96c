"""Gymnasium spaces and codecs: how a wire observation/action maps to a Gymnasium one.

A :class:`Codec` bundles an environment's spaces with the two conversions the facade
needs: Gymnasium action -> action fields sent on the wire, and wire observation fields ->
Gymnasium observation. :func:`codec_for` returns the codec of a known environment;
:func:`codec_from_schema` builds one for any OpenEnv server from its ``GET /schema``
(``docs/spaces.md`` has the mapping table).
"""

from __future__ import annotations

import json
import logging
import math
import re
import reprlib
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, OpenEnvGymError, RemoteProtocolError

__all__ = [
    "CALL_TOOL",
    "DEFAULT_TEXT_LENGTH",
    "ECHO_TOOL",
    "GENERIC",
    "LIST_TOOLS",
    "PRINTABLE",
    "TOOLS",
    "TOOL_TEXT_MAX",
    "Codec",
    "McpTool",
    "ToolActions",
    "action_error",
    "catch_grid",
    "codec_for",
    "codec_from_schema",
    "describe_space",
    "is_mcp_schema",
    "known_envs",
    "listed_tools",
    "schema_node",
    "short_repr",
    "to_printable",
    "tool_result_text",
    "why_not_in",
]

logger = logging.getLogger("openenv_gym.spaces")

PRINTABLE = frozenset(string.printable)
"""Charset of Text spaces: printable ASCII plus whitespace (newline, tab, ...)."""

TEXT_CHARSET = "".join(sorted(PRINTABLE))


_NOT_PRINTABLE = re.compile(r"[^ -~\t\n\r\x0b\x0c]")
"""Matches any character outside :data:`PRINTABLE` (one C-level scan instead of a loop)."""

_PRINTABLE_BYTES = "".join(sorted(PRINTABLE)).encode("ascii")


def _printable(text: str) -> bool:
    """Whether every character of ``text`` is in :data:`PRINTABLE`.

    ASCII, and nothing left once the printable bytes are deleted: two C-level passes over
    the bytes, about ten times faster than a regex scan of a long text.
    """
    return text.isascii() and not text.encode("ascii").translate(None, _PRINTABLE_BYTES)


def _text(max_length: int, min_length: int = 0) -> spaces.Text:
    return spaces.Text(max_length=max_length, min_length=min_length, charset=TEXT_CHARSET)


def text_contains(space: spaces.Text) -> Callable[[Any], bool]:
    """A fast ``space.contains`` for Text spaces over :data:`TEXT_CHARSET`."""
    low, high = space.min_length, space.max_length

    def contains(value: Any) -> bool:
        return isinstance(value, str) and low <= len(value) <= high and _printable(value)

    return contains


def texts_contain(space: spaces.Text) -> Callable[[list[Any]], bool]:
    """A fast "every action is in ``space``" for a batch of Text actions: one scan."""
    low, high = space.min_length, space.max_length

    def contain(values: list[Any]) -> bool:
        if not values:
            return True
        try:
            joined = "".join(values)  # TypeError: something is not a str
        except TypeError:
            return False
        if not _printable(joined):
            return False
        lengths = list(map(len, values))
        return low <= min(lengths) and max(lengths) <= high

    return contain


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


def _field(obs: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = obs.get(name)
    if not isinstance(value, kind):
        raise RemoteProtocolError(f"observation field {name!r} missing or not {kind}: {value!r}")
    return value


# ---------------------------------------------------------------- TextArena Wordle


def _wordle_text(obs: Mapping[str, Any]) -> str:
    """What the player is told this turn: the game's messages since its last move.

    After ``reset`` that is the prompt. Works with our Wordle (one message per thing said)
    and OpenEnv's TextArena server (one growing transcript: see :func:`_latest_turn`).
    """
    return _turn_text(obs.get("messages"), obs.get("current_player_id", 0), obs.get("prompt", ""))


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


def to_printable(text: str) -> str:
    """``text`` with every character outside the charset replaced by ``?``."""
    if _printable(text):  # the common case: nothing to copy
        return text
    return _NOT_PRINTABLE.sub("?", text)


def _wordle_obs(obs: Mapping[str, Any]) -> str:
    return to_printable(_wordle_text(obs))[:WORDLE_OBS_MAX]


WORDLE_OBS_MAX = 8192


def printable_texts(texts: list[Any], max_length: int) -> list[str] | None:
    """``texts`` as they are when every one is a printable ``str`` of at most ``max_length``.

    One scan over the whole batch instead of one per text; None when some text needs
    fixing (then decode them one by one).
    """
    try:
        joined = "".join(texts)
    except TypeError:  # something that is not a str
        return None
    if not _printable(joined) or (len(joined) > max_length and max(map(len, texts)) > max_length):
        return None
    return texts


def _wordle_columns(columns: Mapping[str, Any], numeric: frozenset[str], n: int) -> Any:
    messages, prompts = columns.get("messages"), columns.get("prompt")
    if not isinstance(messages, list) or not isinstance(prompts, list):
        return None
    players = columns.get("current_player_id")
    if players is None:
        players = [0] * n
    elif isinstance(players, np.ndarray):
        players = players.tolist()
    texts = [
        _turn_text(m, p, prompt) for m, p, prompt in zip(messages, players, prompts, strict=True)
    ]
    clean = printable_texts(texts, WORDLE_OBS_MAX)
    return clean if clean is not None else [to_printable(t)[:WORDLE_OBS_MAX] for t in texts]


def _turn_text(messages: Any, player: Any, prompt: Any) -> str:
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
            return text or str(prompt)
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
    return text or str(prompt)


def _message_action(action: Any) -> dict[str, Any]:
    return {"message": str(action)}


def _message_actions(actions: list[Any]) -> dict[str, list[Any]]:
    return {"message": [a if type(a) is str else str(a) for a in actions]}


# --------------------------------------------------------------------------- Echo


ECHO_MAX = 4096

ECHO_TOOL = "echo_message"
"""The tool of OpenEnv's MCP echo server (``envs/echo_env`` since 2026) that echoes."""


class _EchoWire:
    """Which echo server an Echo codec talks to, and the conversions for it.

    *Legacy* (``EchoAction{message}`` -> ``EchoObservation{echoed_message, ...}``): our
    server, and OpenEnv's echo until 2026. *MCP* (``CallToolAction`` ->
    ``CallToolObservation``): OpenEnv's echo since, whose tool ``echo_message`` echoes. The
    layout is set from the server's ``/schema`` where the facade reads it
    (:attr:`Codec.bind_schema`), else from the first reply (an MCP echo never sends
    ``echoed_message``); then it stays. Either way the spaces are the same ``Text``.
    """

    __slots__ = ("mcp",)

    def __init__(self) -> None:
        self.mcp: bool | None = None

    def bind_schema(self, schema: Mapping[str, Any]) -> None:
        self.mcp = is_mcp_schema(schema)

    def _is_mcp(self, obs: Mapping[str, Any]) -> bool:
        if self.mcp is None:
            self.mcp = "echoed_message" not in obs
        return self.mcp

    def decode(self, obs: Mapping[str, Any]) -> str:
        if self._is_mcp(obs):
            text = _echo_tool_text(obs)
        else:
            text = str(_field(obs, "echoed_message", str))
        return to_printable(text)[:ECHO_MAX]

    def columns(self, columns: Mapping[str, Any], numeric: frozenset[str], n: int) -> Any:
        texts = columns.get("echoed_message")
        if self.mcp or not isinstance(texts, list):
            return None  # decoded reply by reply
        self.mcp = False
        return printable_texts(texts, ECHO_MAX)

    def encode(self, action: Any) -> dict[str, Any]:
        if self.mcp:
            return _call_tool(ECHO_TOOL, {"message": str(action)})
        return {"message": str(action)}

    def encode_many(self, actions: list[Any]) -> dict[str, list[Any]] | None:
        return None if self.mcp else _message_actions(actions)


def _echo_tool_text(obs: Mapping[str, Any]) -> str:
    """The MCP echo's text: the tool's result, or after reset the server's greeting."""
    if obs.get("tool_name") is None and obs.get("result") is None and obs.get("error") is None:
        metadata = obs.get("metadata")  # reset: {"status": "ready", "message": ...} (>= 0.4)
        message = metadata.get("message") if isinstance(metadata, Mapping) else None
        return message if isinstance(message, str) else ""
    return tool_result_text(obs)[0]


def _echo_codec() -> Codec:
    wire = _EchoWire()
    return Codec(
        "echo",
        _text(ECHO_MAX),
        _text(ECHO_MAX, min_length=1),
        wire.encode,
        wire.decode,
        wire.decode,
        decode_columns=wire.columns,
        encode_actions=wire.encode_many,
        bind_schema=wire.bind_schema,
        reads_metadata=True,
    )


# -------------------------------------------------------------------------- Catch

CATCH_ROWS, CATCH_COLUMNS = 10, 5


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


_CODECS: dict[str, Callable[[], Codec]] = {
    "wordle": lambda: Codec(
        "wordle",
        _text(WORDLE_OBS_MAX),
        _text(256, min_length=1),
        _message_action,
        _wordle_obs,
        _wordle_text,
        decode_columns=_wordle_columns,
        encode_actions=_message_actions,
    ),
    "echo": _echo_codec,
    "catch": lambda: Codec(
        "catch",
        spaces.Box(0.0, 1.0, (CATCH_ROWS * CATCH_COLUMNS,), np.float32),
        spaces.Discrete(3),
        _catch_action,
        _catch_obs,
        _catch_render,
        primary="info_state",
        decode_columns=_catch_columns,
        encode_actions=_catch_actions,
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


# ------------------------------------------------------------- any server: /schema

GENERIC = "generic"
"""Name of the codec built from a server's ``GET /schema`` (``openenv/Generic-v0``)."""

DEFAULT_TEXT_LENGTH = 4096
"""``max_length`` of the Text space of a JSON-schema string without ``maxLength``."""

_NOT_IN_OBSERVATION = frozenset({"done", "reward", "metadata"})
"""Observation fields that travel separately (``done``, ``reward``) or go to ``info``."""

_NOT_IN_ACTION = frozenset({"metadata"})
"""OpenEnv's base ``Action`` field: never sent."""

_MAX_TUPLE = 64
"""Most items of a fixed-length array of non-numbers made a Tuple (longer: a Sequence)."""

_INT_LIMIT = 2**53
"""Integer bounds at or beyond this are taken as unbounded (float64 cannot hold them)."""


def _bad(value: Any, what: str) -> RemoteProtocolError:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return RemoteProtocolError(f"expected {what} in the observation, got {text}")


def _integer(value: Any) -> int:
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _bad(value, "an integer")


class _Conv:
    """Converts between one JSON value and one value of :attr:`space`."""

    __slots__ = ("space",)

    space: spaces.Space[Any]

    def decode(self, value: Any) -> Any:
        """JSON value (never None) -> value of the space; raises RemoteProtocolError."""
        raise NotImplementedError

    def encode(self, value: Any) -> Any:
        """Value of the space -> JSON-able value."""
        raise NotImplementedError

    def zero(self) -> Any:
        """A fresh value of the space standing for null."""
        raise NotImplementedError


class _Text(_Conv):
    __slots__ = ("_clean", "_filler", "_max", "_min")

    def __init__(self, space: spaces.Text) -> None:
        self.space = space
        self._max = space.max_length
        self._min = space.min_length
        charset = space.character_set
        self._clean = charset <= PRINTABLE  # then out-of-charset characters become "?"
        self._filler = " " if " " in charset else min(charset)

    def decode(self, value: Any) -> str:
        if not isinstance(value, str):
            raise _bad(value, "a string")
        text = to_printable(value) if self._clean else value
        return text[: self._max]

    def encode(self, value: Any) -> str:
        return str(value)

    def zero(self) -> str:
        return self._filler * self._min


class _Int(_Conv):
    """A Discrete space whose values are the integers sent on the wire."""

    __slots__ = ("_zero",)

    def __init__(self, space: spaces.Discrete) -> None:
        self.space = space
        start = int(space.start)
        self._zero = min(max(0, start), start + int(space.n) - 1)

    def decode(self, value: Any) -> np.int64:
        return np.int64(_integer(value))

    def encode(self, value: Any) -> int:
        return int(value)

    def zero(self) -> np.int64:
        return np.int64(self._zero)


class _Bool(_Conv):
    """``Discrete(2)``: 0 is false, 1 is true."""

    __slots__ = ()

    def __init__(self) -> None:
        self.space = spaces.Discrete(2)

    def decode(self, value: Any) -> np.int64:
        if isinstance(value, bool) or value in (0, 1):
            return np.int64(bool(value))
        raise _bad(value, "a boolean")

    def encode(self, value: Any) -> bool:
        return bool(value)

    def zero(self) -> np.int64:
        return np.int64(0)


def _enum_key(value: Any) -> Any:
    if isinstance(value, str | int | float | bool):
        return (type(value), value)  # True and 1 stay apart
    return json.dumps(value, sort_keys=True, default=str)


class _Enum(_Conv):
    """``Discrete(n)`` over the allowed values of an ``enum`` / ``const``.

    Integers are sorted, and ``start`` is the smallest when they are consecutive (then the
    action *is* the value); other values keep schema order (the action is their index).
    """

    __slots__ = ("_index", "_start", "values")

    def __init__(self, values: list[Any]) -> None:
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            values = sorted(set(values))
            consecutive = values[-1] - values[0] == len(values) - 1
            start = values[0] if consecutive else 0
        else:
            unique: dict[Any, Any] = {}
            for value in values:
                unique.setdefault(_enum_key(value), value)
            values = list(unique.values())
            start = 0
        self.values = values
        self._start = start
        self._index = {_enum_key(v): i for i, v in enumerate(values)}
        self.space = spaces.Discrete(len(values), start=start)

    def decode(self, value: Any) -> np.int64:
        index = self._index.get(_enum_key(value))
        if index is None:
            raise _bad(value, f"one of {self.values}")
        return np.int64(self._start + index)

    def encode(self, value: Any) -> Any:
        return self.values[int(value) - self._start]

    def zero(self) -> np.int64:
        return np.int64(self._start)


class _Array(_Conv):
    """Box (scalar when its shape is ``()``), MultiBinary, MultiDiscrete: numpy arrays."""

    __slots__ = ("_dtype", "_integer", "_shape")

    def __init__(self, space: spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete) -> None:
        self.space = space
        self._dtype = space.dtype
        self._shape = space.shape
        self._integer = space.dtype is not None and space.dtype.kind in "iub"

    def decode(self, value: Any) -> np.ndarray[Any, Any]:
        try:
            raw = np.asarray(value)
        except (TypeError, ValueError) as exc:  # ragged lists
            raise _bad(value, "numbers") from exc
        kind = raw.dtype.kind
        # no strings, nulls or objects; no fractions where integers are due
        if kind not in "biuf" or (
            self._integer and kind == "f" and not np.all(np.mod(raw, 1) == 0)
        ):
            raise _bad(value, "integers" if self._integer else "numbers")
        if raw.shape != self._shape:
            raise _bad(value, f"numbers of shape {self._shape}")
        return raw.astype(self._dtype)

    def encode(self, value: Any) -> Any:
        return np.asarray(value).tolist()

    def zero(self) -> np.ndarray[Any, Any]:
        space = self.space
        if isinstance(space, spaces.Box):
            # np.array: clip gives a numpy scalar, not a 0-d array, for shape ()
            return np.array(np.clip(np.zeros(space.shape), space.low, space.high), space.dtype)
        if isinstance(space, spaces.MultiDiscrete):
            return np.array(space.start, dtype=space.dtype)
        return np.zeros(space.shape, dtype=space.dtype)


class _Fallback(_Conv):
    """``inner``, where null (or a missing field) reads as ``default``, else as its zero."""

    __slots__ = ("_default", "inner")

    def __init__(self, inner: _Conv, default: Any = None) -> None:
        self.inner = inner
        self.space = inner.space
        self._default = None
        if default is not None:
            try:
                inner.decode(default)
            except OpenEnvGymError:
                pass
            else:
                self._default = default

    def decode(self, value: Any) -> Any:
        if value is None:
            return self.zero()
        return self.inner.decode(value)

    def encode(self, value: Any) -> Any:
        return self.inner.encode(value)

    def zero(self) -> Any:
        if self._default is None:
            return self.inner.zero()
        return self.inner.decode(self._default)


class _Seq(_Conv):
    """Sequence: a tuple of item values, any length."""

    __slots__ = ("_item",)

    def __init__(self, item: _Conv, space: spaces.Sequence | None = None) -> None:
        self._item = _Fallback(item)
        self.space = space if space is not None else spaces.Sequence(item.space)

    def decode(self, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise _bad(value, "a list")
        decode = self._item.decode
        return tuple(decode(v) for v in value)

    def encode(self, value: Any) -> list[Any]:
        encode = self._item.encode
        return [encode(v) for v in value]

    def zero(self) -> tuple[Any, ...]:
        return ()


class _Tup(_Conv):
    """Tuple: a fixed number of values of their own spaces."""

    __slots__ = ("_items",)

    def __init__(self, items: list[_Conv], space: spaces.Tuple[Any] | None = None) -> None:
        self._items = [_Fallback(item) for item in items]
        self.space = space if space is not None else spaces.Tuple([i.space for i in items])

    def decode(self, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple) or len(value) != len(self._items):
            raise _bad(value, f"a list of {len(self._items)} values")
        return tuple(item.decode(v) for item, v in zip(self._items, value, strict=True))

    def encode(self, value: Any) -> list[Any]:
        return [item.encode(v) for item, v in zip(self._items, value, strict=True)]

    def zero(self) -> tuple[Any, ...]:
        return tuple(item.zero() for item in self._items)


class _Dict(_Conv):
    """Dict: the named fields of a JSON object (the others are ignored)."""

    __slots__ = ("fields",)

    def __init__(self, fields: Mapping[str, _Conv], space: spaces.Dict | None = None) -> None:
        self.fields = {
            k: c if isinstance(c, _Fallback) else _Fallback(c) for k, c in fields.items()
        }
        self.space = (
            space if space is not None else spaces.Dict({k: c.space for k, c in fields.items()})
        )

    def decode(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise _bad(value, "an object")
        return {k: c.decode(value.get(k)) for k, c in self.fields.items()}

    def encode(self, value: Any) -> dict[str, Any]:
        return {k: c.encode(value[k]) for k, c in self.fields.items()}

    def zero(self) -> dict[str, Any]:
        return {k: c.zero() for k, c in self.fields.items()}


def _from_space(space: Any, where: str) -> _Conv:
    """The converter of a space the user chose (``action_fields=`` / ``observation_fields=``).

    Raises:
        ConfigurationError: Not a space, or one we cannot convert to and from JSON.
    """
    if isinstance(space, spaces.Discrete):
        return _Int(space)
    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        return _Array(space)
    if isinstance(space, spaces.Text):
        return _Text(space)
    if isinstance(space, spaces.Dict):
        return _Dict({k: _from_space(s, f"{where}[{k!r}]") for k, s in space.items()}, space)
    if isinstance(space, spaces.Tuple):
        return _Tup([_from_space(s, f"{where}[{i}]") for i, s in enumerate(space)], space)
    if isinstance(space, spaces.Sequence) and not space.stack:
        return _Seq(_from_space(space.feature_space, f"{where}.feature_space"), space)
    raise ConfigurationError(
        f"{where}: {space!r} is not a space we can convert to and from JSON "
        "(use Discrete, Box, MultiBinary, MultiDiscrete, Text, Dict, Tuple or "
        "Sequence(stack=False)), or None to leave the field out"
    )


def _number(value: Any) -> int | float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value):
        return value
    return None


def _bounds(node: Mapping[str, Any], integer: bool) -> tuple[float, float] | None:
    """``(low, high)`` from (exclusive) minimum / maximum; None when nothing fits."""

    def above(x: float) -> float:
        return math.floor(x) + 1 if integer else math.nextafter(x, math.inf)

    def below(x: float) -> float:
        return math.ceil(x) - 1 if integer else math.nextafter(x, -math.inf)

    low: float = -math.inf
    high: float = math.inf
    minimum, maximum = _number(node.get("minimum")), _number(node.get("maximum"))
    if minimum is not None:
        low = minimum
    if maximum is not None:
        high = maximum
    exclusive_low, exclusive_high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if exclusive_low is True and minimum is not None:  # draft 4 spelling
        low = above(minimum)
    elif (bound := _number(exclusive_low)) is not None:
        low = max(low, above(bound))
    if exclusive_high is True and maximum is not None:
        high = below(maximum)
    elif (bound := _number(exclusive_high)) is not None:
        high = min(high, below(bound))
    if integer:
        low = math.ceil(low) if -_INT_LIMIT < low < _INT_LIMIT else -math.inf
        high = math.floor(high) if -_INT_LIMIT < high < _INT_LIMIT else math.inf
    if low > high:
        return None
    return low, high


def _box(low: np.ndarray[Any, Any], high: np.ndarray[Any, Any], integer: bool) -> spaces.Box:
    """A Box of int64 or float64 from float bounds (infinite: unbounded)."""
    if not integer:
        return spaces.Box(low, high, low.shape, np.float64)
    # Box turns +inf in an *array* into int64 max via float64, which overflows to int64 min:
    # build it, then set those highs right (its bounded_above is already right)
    with np.errstate(invalid="ignore"):
        space = spaces.Box(low.copy(), high.copy(), low.shape, np.int64)
    space.high[np.isposinf(high)] = np.iinfo(np.int64).max
    return space


def _count(node: Mapping[str, Any], key: str) -> int | None:
    value = node.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _is_null(node: Any) -> bool:
    return isinstance(node, Mapping) and node.get("type") == "null"


def _is_numeric(node: Any) -> bool:
    return (
        isinstance(node, Mapping)
        and node.get("type") in ("integer", "number", "boolean")
        and "enum" not in node
        and "const" not in node
    )


def _without(node: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != key}


def _default(node: Any) -> Any:
    return node.get("default") if isinstance(node, Mapping) else None


def _brief(node: Any) -> str:
    text = json.dumps(node, separators=(",", ":"), default=str)
    return text if len(text) <= 120 else text[:117] + "..."


class _Reader:
    """Builds converters from one JSON schema document (a model's) and its ``$defs``.

    Args:
        root: The document: ``$ref`` pointers (``#/$defs/Name``) resolve inside it.
        lossless: An object with a field we cannot map is unmappable as a whole (for
            observations: it then goes to ``info`` whole). Otherwise (actions) fields with
            a default are dropped (the server uses its default).
    """

    def __init__(self, root: Mapping[str, Any], *, lossless: bool) -> None:
        self.root = root
        self.lossless = lossless
        self._active: set[str] = set()

    def lookup(self, ref: str) -> Any:
        """The node a local JSON pointer names (None if absent or not local)."""
        if not ref.startswith("#"):
            return None
        node: Any = self.root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def deref(self, node: Any) -> Mapping[str, Any] | None:
        """``node`` with ``$ref`` and one-element ``allOf`` resolved (siblings kept)."""
        seen: set[str] = set()
        while isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str):
                target = self.lookup(ref)
                if ref in seen or ref in self._active or not isinstance(target, Mapping):
                    return None
                seen.add(ref)
                node = {**target, **_without(node, "$ref")}
                continue
            parts = node.get("allOf")
            if parts is not None:
                if not isinstance(parts, list) or len(parts) != 1:
                    return None
                node = {**_without(node, "allOf"), **parts[0]}
                continue
            return node
        return None

    def properties(self, node: Any) -> tuple[Mapping[str, Any], frozenset[str]]:
        """An object schema's ``properties`` and ``required`` names."""
        node = self.deref(node) or {}
        props = node.get("properties")
        required = node.get("required")
        return (
            props if isinstance(props, Mapping) else {},
            frozenset(r for r in required if isinstance(r, str))
            if isinstance(required, list)
            else frozenset(),
        )

    def build(self, node: Any) -> _Conv | None:
        """The converter of a schema node, or None when no space fits it."""
        if not isinstance(node, Mapping):
            return None
        ref = node.get("$ref")
        if ref is not None:
            target = self.lookup(ref) if isinstance(ref, str) else None
            if not isinstance(target, Mapping) or ref in self._active:
                return None  # dangling, remote or recursive
            self._active.add(ref)
            try:
                return self.build({**target, **_without(node, "$ref")})
            finally:
                self._active.discard(ref)
        parts = node.get("allOf")
        if parts is not None:
            if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], Mapping):
                return None
            return self.build({**parts[0], **_without(node, "allOf")})
        for key in ("anyOf", "oneOf"):
            options = node.get(key)
            if options is None:
                continue
            if not isinstance(options, list):
                return None
            rest = _without(node, key)
            real = [o for o in options if not _is_null(o)]
            if len(real) == 1 and isinstance(real[0], Mapping):  # Optional[X]
                return self.build({**real[0], **rest})
            if real and all(_is_numeric(o) for o in real):  # int | float | bool
                return self.build({**rest, "type": "number"})
            return None
        if "const" in node or "enum" in node:
            values = [node["const"]] if "const" in node else node["enum"]
            if not isinstance(values, list):
                return None
            values = [v for v in values if v is not None]
            return _Enum(values) if values else None
        kind = node.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) == 1:
                kind = kinds[0]
            elif kinds and all(k in ("integer", "number", "boolean") for k in kinds):
                kind = "number"
            else:
                return None
        if kind is None and isinstance(node.get("properties"), Mapping):
            kind = "object"
        if kind == "string":
            return self._string(node)
        if kind == "boolean":
            return _Bool()
        if kind in ("integer", "number"):
            return self._scalar(node, kind == "integer")
        if kind == "array":
            return self._array(node)
        if kind == "object":
            return self._object(node)
        return None  # "null", free-form ({}), unknown types

    def _string(self, node: Mapping[str, Any]) -> _Conv | None:
        low = _count(node, "minLength") or 0
        high = _count(node, "maxLength")
        if high is None:
            high = max(DEFAULT_TEXT_LENGTH, low)
        if high < low or high < 1:
            return None
        return _Text(_text(high, min_length=low))

    def _scalar(self, node: Mapping[str, Any], integer: bool) -> _Conv | None:
        bounds = _bounds(node, integer)
        if bounds is None:
            return None
        low, high = bounds
        if integer and math.isfinite(low) and math.isfinite(high):
            return _Int(spaces.Discrete(int(high - low) + 1, start=int(low)))
        dtype = np.int64 if integer else np.float64
        return _Array(spaces.Box(low, high, (), dtype))

    def numeric(self, node: Any) -> tuple[bool, np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
        """``(integer, low, high)`` of a number or a fixed-shape array of numbers, else None."""
        node = self.deref(node)
        if node is None or any(k in node for k in ("enum", "const", "anyOf", "oneOf")):
            return None
        kind = node.get("type")
        if kind in ("integer", "number"):
            bounds = _bounds(node, kind == "integer")
            if bounds is None:
                return None
            return kind == "integer", np.array(bounds[0]), np.array(bounds[1])
        if kind != "array":
            return None
        size = _count(node, "maxItems")
        if not size or _count(node, "minItems") != size:
            return None
        prefix = node.get("prefixItems")
        if prefix is not None:
            if not isinstance(prefix, list) or len(prefix) != size:
                return None
            parts = [self.numeric(p) for p in prefix]
        else:
            parts = [self.numeric(node.get("items"))] * size
        if any(p is None for p in parts):
            return None
        known = [p for p in parts if p is not None]
        if len({p[1].shape for p in known}) != 1:
            return None
        return (
            all(p[0] for p in known),
            np.stack([p[1] for p in known]),
            np.stack([p[2] for p in known]),
        )

    def _array(self, node: Mapping[str, Any]) -> _Conv | None:
        numeric = self.numeric(node)
        if numeric is not None:
            integer, low, high = numeric
            return _Array(_box(low, high, integer))
        size = _count(node, "maxItems")
        prefix = node.get("prefixItems")
        if isinstance(prefix, list) and prefix and size == len(prefix):
            items = [self.build(p) for p in prefix]
        elif size and _count(node, "minItems") == size and size <= _MAX_TUPLE:
            items = [self.build(node.get("items")) for _ in range(size)]
        else:
            item = self.build(node.get("items"))
            return None if item is None else _Seq(item)
        known = [i for i in items if i is not None]
        return _Tup(known) if len(known) == len(items) else None

    def _object(self, node: Mapping[str, Any]) -> _Conv | None:
        props, required = self.properties(node)
        fields: dict[str, _Conv] = {}
        for key, sub in props.items():
            conv = self.build(sub)
            if conv is None:
                if self.lossless or key in required:
                    return None
                continue
            fields[key] = _Fallback(conv, _default(sub))
        return _Dict(fields) if fields else None  # free-form dicts (additionalProperties)


FieldSpaces = Mapping[str, spaces.Space[Any] | None]
"""Per-field choices: a field name -> the space to use for it, or None to leave it out."""


def _check_names(kind: str, chosen: FieldSpaces, names: Iterable[str]) -> None:
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigurationError(
            f"{kind}_fields names {unknown}, not fields of the server's {kind}: "
            f"its fields are {sorted(names)}"
        )


def _action_fields(
    document: Mapping[str, Any],
    chosen: FieldSpaces,
    *,
    what: str = "action",
    option: str = "action_fields",
    skip: frozenset[str] = _NOT_IN_ACTION,
    allow_empty: bool = False,
    hint: Callable[[str], str] | None = None,
) -> dict[str, _Conv]:
    """The converters of the fields an action (or a tool's arguments) is made of.

    ``what`` names the object in messages ("action", "tool 'move' argument"), ``option``
    the keyword that chooses spaces for its fields (``hint(field)``: how to, in Python);
    ``skip`` are never sent.
    """
    reader = _Reader(document, lossless=False)
    props, required = reader.properties(document)
    names = [k for k in props if k not in skip]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigurationError(
            f"{option} names {unknown}, not fields of the server's {what}: "
            f"its fields are {sorted(names)}"
        )
    # the fields the server needs; those with a default are left to it, unless none is needed
    wanted = {k for k in names if k in required} or set(names)
    fields: dict[str, _Conv] = {}
    unmapped: list[str] = []
    for key in names:
        if key in chosen:
            space = chosen[key]
            if space is None:
                if key in required:
                    raise ConfigurationError(
                        f"{what} field {key!r} is required by the server: it cannot be left out"
                    )
                continue
            fields[key] = _from_space(space, f"{option}[{key!r}]")
        elif key in wanted:
            conv = reader.build(props[key])
            if conv is not None:
                fields[key] = conv
            elif key in required:
                unmapped.append(key)
    if unmapped:
        detail = "; ".join(f"{k!r}: {_brief(props[k])}" for k in unmapped)
        how = hint(unmapped[0]) if hint else f"{option}={{{unmapped[0]!r}: <space>, ...}}"
        raise ConfigurationError(
            f"no Gymnasium space fits the {what} field(s) {detail}. Give one with {how}, "
            "or pass your own codec= (see docs/spaces.md)"
        )
    if not fields and not allow_empty:
        raise ConfigurationError(
            f"the server's {what} has no field to act with (fields: {names}); choose spaces "
            f"with {option}= or pass your own codec= (see docs/spaces.md)"
        )
    return fields


def _observation_fields(
    document: Mapping[str, Any],
    chosen: FieldSpaces,
    skip: frozenset[str] = _NOT_IN_OBSERVATION,
) -> dict[str, _Conv]:
    reader = _Reader(document, lossless=True)
    props, _ = reader.properties(document)
    names = [k for k in props if k not in skip]
    _check_names("observation", chosen, names)
    fields: dict[str, _Conv] = {}
    for key in names:
        if key in chosen:
            space = chosen[key]
            if space is not None:
                fields[key] = _Fallback(_from_space(space, f"observation_fields[{key!r}]"))
            continue
        conv = reader.build(props[key])
        if conv is not None:
            fields[key] = _Fallback(conv, _default(props[key]))
    return fields


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def codec_from_schema(
    schema: Mapping[str, Any],
    *,
    name: str = GENERIC,
    action_fields: FieldSpaces | None = None,
    observation_fields: FieldSpaces | None = None,
    tool: str | None = None,
) -> Codec:
    """The codec of any OpenEnv server, from its ``GET /schema`` body (no I/O).

    The observation space is a ``Dict`` of the observation's fields, less ``done``,
    ``reward`` and ``metadata`` (they travel separately) and the fields no space fits
    (free-form dicts, ``Any``, recursive models): those go to ``info``, which holds exactly
    the fields the observation leaves out. The action space is the space of the action's
    one field (the action is that field's value), or a ``Dict`` of its fields. Action
    fields with a default are left to the server unless the action has no required field
    (or you choose them with ``action_fields``); ``metadata`` is never sent.
    ``docs/spaces.md`` has the full mapping table.

    Args:
        schema: ``{"action": <JSON schema>, "observation": <JSON schema>, ...}``.
        name: The codec's name.
        action_fields: Per action field, the space to use instead (e.g.
            ``{"action_id": Discrete(3)}`` when the schema says only ``integer``), or
            None to leave a field with a default out.
        observation_fields: Per observation field, the space to use instead (e.g.
            ``{"board": Box(0, 1, (50,))}``), or None to move the field to ``info``.
        tool: MCP servers only: act with this one tool (the action space is its arguments').

    An MCP tool server (its action is OpenEnv's ``CallToolAction``: see
    :func:`is_mcp_schema`) gets tool actions instead: ``schema["tools"]`` must list its
    tools (:func:`openenv_gym.env.fetch_schema` adds them), and the action space is a
    ``Dict`` of ``tool`` (``Discrete`` over the tools) and ``arguments`` (per tool, a
    ``Dict`` of its arguments' spaces), or with ``tool=`` that tool's arguments alone;
    ``action_fields`` then names tools (``{tool: Dict({argument: space})}``, or None to
    leave a tool out), or with ``tool=`` that tool's arguments. The observation holds
    the tool's result as ``text`` and ``is_error``, beside the observation model's other
    fields (:func:`tool_result_text`); the raw ``result`` and ``error`` go to ``info``.

    Raises:
        ConfigurationError: ``schema`` is not such an object, a required action field has
            no space (choose one with ``action_fields`` or pass your own codec), an
            ``*_fields`` key is not a field of the schema, or ``tool=`` does not fit (no
            MCP server, or no such tool).

    Example:
        >>> from pydantic import BaseModel
        >>> class Move(BaseModel):
        ...     direction: int
        >>> class Board(BaseModel):
        ...     cells: tuple[int, int, int]
        ...     turn: str
        ...     done: bool = False
        >>> codec = codec_from_schema(
        ...     {"action": Move.model_json_schema(), "observation": Board.model_json_schema()},
        ...     action_fields={"direction": spaces.Discrete(4)},
        ... )
        >>> codec.action_space, codec.encode_action(2)
        (Discrete(4), {'direction': 2})
        >>> sorted(codec.observation_space.keys())
        ['cells', 'turn']
        >>> codec.observation_space["cells"]
        Box(-9223372036854775808, 9223372036854775807, (3,), int64)
        >>> codec.decode_observation({"cells": [1, 2, 0], "turn": "x"})
        {'cells': array([1, 2, 0]), 'turn': 'x'}
    """
    if not isinstance(schema, Mapping) or not all(
        isinstance(schema.get(k), Mapping) for k in ("action", "observation")
    ):
        raise ConfigurationError(
            "schema must be a /schema body: an object with 'action' and 'observation' "
            f"JSON schemas, got {_brief(schema)}"
        )
    if is_mcp_schema(schema):
        return _tool_codec(
            schema,
            name=name,
            tool=tool,
            action_fields=action_fields or {},
            observation_fields=observation_fields or {},
        )
    if tool is not None:
        raise ConfigurationError(
            f"tool={tool!r} picks a tool of an MCP server, and this server's action is "
            "not OpenEnv's CallToolAction (see docs/spaces.md)"
        )
    actions = _action_fields(schema["action"], action_fields or {})
    observations = _observation_fields(schema["observation"], observation_fields or {})
    observation = _Dict(observations)
    keys = list(observations)

    def render(obs: Mapping[str, Any]) -> str:
        shown = keys or [k for k in obs if k != "metadata"]
        return "\n".join(f"{k}: {_show(obs.get(k))}" for k in shown)

    action_space: spaces.Space[Any]
    encode_action: Callable[[Any], dict[str, Any]]
    if len(actions) == 1:
        ((key, conv),) = actions.items()
        action_space = conv.space
        encode = conv.encode

        def encode_one(action: Any) -> dict[str, Any]:
            return {key: encode(action)}

        encode_action = encode_one
    else:
        action = _Dict(actions)
        action_space = action.space
        encode_action = action.encode
    return Codec(
        name,
        observation.space,
        action_space,
        encode_action,
        observation.decode,
        render,
        observed=frozenset(observations),
    )


# ------------------------------------------------------------- MCP tool servers

CALL_TOOL = "call_tool"
"""``CallToolAction.type``: the action calls a tool."""

LIST_TOOLS = "list_tools"
"""``ListToolsAction.type``: the step lists the tools (:func:`openenv_gym.env.list_tools`)."""

TOOLS = "tools"
"""Key of the tool list that :func:`openenv_gym.env.fetch_schema` adds to an MCP server's
``/schema`` body (the server's own body has no such key)."""

TOOL_TEXT_MAX = 65536
"""``max_length`` of the ``text`` observation of a tool server (longer results are cut;
the whole result stays in ``info["result"]``)."""

_TOOL_OBSERVATION = frozenset({"result", "error"}) | _NOT_IN_OBSERVATION
"""``CallToolObservation`` fields the tool codec turns into ``text`` / ``is_error``."""

_TOOL_OUTPUTS = ("text", "is_error")


@dataclass(frozen=True)
class McpTool:
    """One tool of an MCP environment, as its server lists it.

    Attributes:
        name: What ``CallToolAction.tool_name`` names it.
        description: What it does (a FastMCP tool's: from its docstring).
        input_schema: The JSON schema of its arguments (an object).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]

    @classmethod
    def from_listing(cls, entry: Any) -> McpTool:
        """A tool from one entry of a tool list.

        Both spellings are read: ``input_schema`` (OpenEnv's ``ListToolsObservation``, and
        MCP SDK 2) and ``inputSchema`` (MCP's ``tools/list``, SDK 1).

        Raises:
            RemoteProtocolError: Not a tool (no name, or a schema that is not an object).
        """
        if isinstance(entry, McpTool):
            return entry
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            raise RemoteProtocolError(f"not a tool: {_brief(entry)}")
        schema = entry.get("input_schema", entry.get("inputSchema"))
        if schema is None:
            schema = {"type": "object", "properties": {}}
        if not isinstance(schema, Mapping):
            raise RemoteProtocolError(f"tool {name!r}: its input schema is not an object")
        return cls(name, str(entry.get("description") or ""), schema)

    def as_json(self) -> dict[str, Any]:
        """``{"name", "description", "input_schema"}`` (as :data:`TOOLS` holds it)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }


@dataclass(frozen=True)
class ToolActions:
    """How the actions of a tool server's codec call its tools.

    Attributes:
        tools: The tools, in the order of the action's ``tool`` index.
        single: The action is one tool's arguments (``tool=``), not
            ``{"tool": index, "arguments": {name: arguments}}``.
        arguments: Per tool with arguments, the ``Dict`` of its arguments' spaces. In
            ``single`` mode the action follows Generic-v0's rule: one argument's value, a
            ``Dict`` of several, ``Discrete(1)`` (action 0) for none.
    """

    tools: tuple[McpTool, ...]
    single: bool
    arguments: Mapping[str, spaces.Space[Any]]


def is_mcp_schema(schema: Mapping[str, Any]) -> bool:
    """Whether a ``/schema`` body is an MCP tool server's: its action is ``CallToolAction``.

    That is an action with ``tool_name`` and ``arguments`` fields and, if it has a ``type``
    field, ``type`` ``"call_tool"``: what OpenEnv's ``MCPEnvironment`` apps publish (echo,
    coding_tools, finqa, jupyter, opencode, terminus), subclasses of it included. (``GET
    /metadata`` tells nothing more: name, description, readme, version, author.)
    """
    action = schema.get("action") if isinstance(schema, Mapping) else None
    if not isinstance(action, Mapping):
        return False
    reader = _Reader(action, lossless=False)
    props, _ = reader.properties(action)
    if not isinstance(props.get("tool_name"), Mapping) or "arguments" not in props:
        return False
    if "type" not in props:
        return True
    kind = reader.deref(props["type"]) or {}
    values = [kind["const"]] if "const" in kind else kind.get("enum") or [kind.get("default")]
    return isinstance(values, list) and CALL_TOOL in values


def schema_node(root: Mapping[str, Any], node: Any) -> Mapping[str, Any]:
    """``node`` of the JSON schema ``root``, its ``$ref``, ``allOf`` and ``X | None`` resolved.

    Sibling keys of a ``$ref`` (a field's ``description``) are kept. ``{}`` when ``node``
    is not a schema or cannot be resolved (a remote or recursive ``$ref``).
    """
    reader = _Reader(root, lossless=False)
    for _ in range(16):  # bounded: Optional[Optional[...]] nests only so deep
        resolved = reader.deref(node)
        if resolved is None:
            return {}
        for key in ("anyOf", "oneOf"):
            options = resolved.get(key)
            if isinstance(options, list):
                real = [o for o in options if not _is_null(o)]
                if len(real) == 1 and isinstance(real[0], Mapping):
                    node = {**real[0], **_without(resolved, key)}
                    break
        else:
            return resolved
    return {}


def listed_tools(schema: Mapping[str, Any]) -> tuple[McpTool, ...]:
    """The tools a ``/schema`` body carries under :data:`TOOLS`.

    Raises:
        ConfigurationError: There is no tool list (a body read by plain ``GET /schema``).
        RemoteProtocolError: An entry is not a tool.
    """
    listed = schema.get(TOOLS)
    if not isinstance(listed, list | tuple):
        raise ConfigurationError(
            "this is an MCP tool server's /schema, and it lists no tools: read it with "
            "openenv_gym.env.fetch_schema, which adds them (see docs/spaces.md)"
        )
    return tuple(McpTool.from_listing(entry) for entry in listed)


def _call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": CALL_TOOL, "tool_name": name, "arguments": arguments}


def tool_result_text(obs: Mapping[str, Any]) -> tuple[str, bool]:
    """A tool server's observation as ``(text, is_error)``.

    ``text`` is the tool's result: the text parts of its MCP ``content``, else its
    structured content (or ``data``) as JSON, else the result itself; when the call failed
    (``error``, or ``is_error`` in the result), the error's message. An observation with no
    tool result (a reset) gives its ``metadata`` as JSON (openenv >= 0.4 sends it), or "".
    """
    error = obs.get("error")
    if isinstance(error, Mapping):
        return str(error.get("message") or _show(error)), True
    if error is not None:
        return _show(error), True
    result = obs.get("result")
    if isinstance(result, Mapping):
        failed = bool(result.get("is_error") or result.get("isError"))
        content = result.get("content")
        texts = [
            part["text"]
            for part in (content if isinstance(content, list) else ())
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        if texts:
            return "\n".join(texts), failed
        for key in ("structured_content", "structuredContent", "data"):
            if result.get(key) is not None:
                return _show(result[key]), failed
        return ("" if content is not None else _show(result)), failed
    if result is not None:
        return _show(result), False
    if obs.get("tool_name") is None:
        metadata = obs.get("metadata")
        return (_show(metadata) if metadata else ""), False
    return "", False


def _tool_arguments(tool: McpTool, chosen: FieldSpaces, *, single: bool) -> dict[str, _Conv]:
    def hint(key: str) -> str:
        if single:
            return f"action_fields={{{key!r}: <space>}}"
        return f"action_fields={{{tool.name!r}: Dict({{{key!r}: <space>, ...}})}}"

    return _action_fields(
        tool.input_schema,
        chosen,
        what=f"tool {tool.name!r} argument",
        option="action_fields" if single else f"action_fields[{tool.name!r}]",
        skip=frozenset(),
        allow_empty=True,
        hint=hint,
    )


def _pick_tools(
    tools: tuple[McpTool, ...], chosen: FieldSpaces
) -> dict[str, tuple[McpTool, dict[str, _Conv]]]:
    """The tools the action calls, each with its arguments' converters.

    A tool ``chosen`` maps to None is left out; to a ``Dict``, those are its arguments'
    spaces. A tool with a required argument no space fits is left out with a warning
    (unless chosen), so one odd tool does not make the server unusable.
    """
    names = [t.name for t in tools]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigurationError(
            f"action_fields names {unknown}, not tools of the server: its tools are {names}"
        )
    picked: dict[str, tuple[McpTool, dict[str, _Conv]]] = {}
    problems: list[str] = []
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise RemoteProtocolError(f"the server lists tool {tool.name!r} twice")
        seen.add(tool.name)
        if tool.name in chosen:
            space = chosen[tool.name]
            if space is None:
                continue
            if not isinstance(space, spaces.Dict):
                raise ConfigurationError(
                    f"action_fields[{tool.name!r}] must be a Dict of argument spaces (or None "
                    f"to leave the tool out), got {space!r}"
                )
            fields = _tool_arguments(tool, dict(space.spaces), single=False)
            picked[tool.name] = (tool, fields)
            continue
        try:
            picked[tool.name] = (tool, _tool_arguments(tool, {}, single=False))
        except ConfigurationError as exc:
            logger.warning("tool %r left out of the action space: %s", tool.name, exc)
            problems.append(str(exc))
    if not picked:
        raise ConfigurationError(
            f"no tool of the server fits an action space (tools: {names})"
            + "".join(f"; {p}" for p in problems)
        )
    return picked


def _tool_codec(
    schema: Mapping[str, Any],
    *,
    name: str,
    tool: str | None,
    action_fields: FieldSpaces,
    observation_fields: FieldSpaces,
) -> Codec:
    """The codec of an MCP tool server (see :func:`codec_from_schema`)."""
    tools = listed_tools(schema)
    if tool is not None:
        found = [t for t in tools if t.name == tool]
        if not found:
            raise ConfigurationError(
                f"tool={tool!r}: the server has no such tool; its tools are "
                f"{[t.name for t in tools]}"
            )
        action_space, encode, contains, actions = _one_tool(found[0], action_fields)
    else:
        action_space, encode, contains, actions = _many_tools(tools, action_fields)

    fields = _observation_fields(schema["observation"], observation_fields, _TOOL_OBSERVATION)
    clash = sorted(set(fields) & set(_TOOL_OUTPUTS))
    if clash:
        raise ConfigurationError(
            f"the observation has fields named {clash}, which the tool codec fills itself: "
            "move them to info with observation_fields={name: None}"
        )
    base = _Dict(fields)
    text = _Text(_text(TOOL_TEXT_MAX))
    space = spaces.Dict(
        {**{k: c.space for k, c in fields.items()}, "text": text.space, "is_error": _Bool().space}
    )

    def decode(obs: Mapping[str, Any]) -> dict[str, Any]:
        out = base.decode(obs)
        said, failed = tool_result_text(obs)
        out["text"] = text.decode(said)
        out["is_error"] = np.int64(failed)
        return out

    def render(obs: Mapping[str, Any]) -> str:
        said, failed = tool_result_text(obs)
        called = obs.get("tool_name")
        head = f"{called}: " if isinstance(called, str) and called else ""
        return f"{head}{'error: ' if failed else ''}{said}"

    return Codec(
        name,
        space,
        action_space,
        encode,
        decode,
        render,
        contains_action=contains,
        observed=frozenset(fields),
        tool_actions=actions,
        reads_metadata=True,
    )


_Encode = Callable[[Any], dict[str, Any]]


def _one_tool(
    tool: McpTool, chosen: FieldSpaces
) -> tuple[spaces.Space[Any], _Encode, Callable[[Any], bool], ToolActions]:
    """``tool=``: the action is that tool's arguments, as Generic-v0 makes an action."""
    fields = _tool_arguments(tool, chosen, single=True)
    if not fields:
        action_space: spaces.Space[Any] = spaces.Discrete(1)

        def encode(action: Any) -> dict[str, Any]:
            return _call_tool(tool.name, {})

    elif len(fields) == 1:
        ((key, conv),) = fields.items()
        action_space = conv.space

        def encode(action: Any) -> dict[str, Any]:
            return _call_tool(tool.name, {key: conv.encode(action)})

    else:
        arguments = _Dict(fields)
        action_space = arguments.space

        def encode(action: Any) -> dict[str, Any]:
            return _call_tool(tool.name, arguments.encode(action))

    listed = {tool.name: spaces.Dict({k: c.space for k, c in fields.items()})} if fields else {}
    actions = ToolActions((tool,), single=True, arguments=listed)
    return action_space, encode, action_space.contains, actions


def _many_tools(
    tools: tuple[McpTool, ...], chosen: FieldSpaces
) -> tuple[spaces.Space[Any], _Encode, Callable[[Any], bool], ToolActions]:
    """``Dict(tool=Discrete(n), arguments=Dict({tool: Dict(its arguments)}))``.

    Tools without arguments have no entry in ``arguments`` (an empty ``Dict`` breaks
    Gymnasium's batching), and ``arguments`` is left out when no tool has any. An action
    needs the chosen tool's entry only: the others are not read.
    """
    picked = _pick_tools(tools, chosen)
    names = list(picked)
    converters = {k: _Dict(fields) for k, (_, fields) in picked.items() if fields}
    tool_index = spaces.Discrete(len(names))
    parts: dict[str, spaces.Space[Any]] = {"tool": tool_index}
    if converters:
        parts["arguments"] = spaces.Dict({k: c.space for k, c in converters.items()})
    action_space = spaces.Dict(parts)

    def encode(action: Any) -> dict[str, Any]:
        name = names[int(action["tool"])]
        conv = converters.get(name)
        return _call_tool(name, {} if conv is None else conv.encode(action["arguments"][name]))

    def contains(action: Any) -> bool:
        if not isinstance(action, Mapping) or not tool_index.contains(action.get("tool")):
            return False
        conv = converters.get(names[int(action["tool"])])
        if conv is None:
            return True
        arguments = action.get("arguments")
        name = names[int(action["tool"])]
        return (
            isinstance(arguments, Mapping)
            and name in arguments
            and bool(conv.space.contains(arguments[name]))
        )

    actions = ToolActions(
        tuple(t for t, _ in picked.values()),
        single=False,
        arguments={k: c.space for k, c in converters.items()},
    )
    return action_space, encode, contains, actions


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
