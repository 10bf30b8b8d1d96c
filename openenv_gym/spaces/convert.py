"""Converters: one JSON value <-> one value of a Gymnasium space.

Each :class:`Converter` holds its space and turns a wire (JSON) value into a value of it,
back, and makes the value standing for null. :func:`converter_for_space` makes one for a
space a user chose; :mod:`openenv_gym.spaces.schema` makes them from JSON schemas. Used by
the modules of :mod:`openenv_gym.spaces` (the package does not re-export them).
"""

# ruff: noqa: D102 - each converter's decode / encode / zero is the one Converter documents

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, OpenEnvGymError, RemoteProtocolError
from openenv_gym.spaces.printable import PRINTABLE, to_printable

__all__ = [
    "ArrayConverter",
    "BoolConverter",
    "Converter",
    "DictConverter",
    "EnumConverter",
    "FallbackConverter",
    "IntConverter",
    "SequenceConverter",
    "TextConverter",
    "TupleConverter",
    "converter_for_space",
    "enum_key",
]


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


class Converter:
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


class TextConverter(Converter):
    """A string as a Text space's value: cut to ``max_length``, cleaned to its charset."""

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


class IntConverter(Converter):
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


class BoolConverter(Converter):
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


def enum_key(value: Any) -> Any:
    """A hashable key of an ``enum`` value under which ``True`` and ``1`` stay apart."""
    if isinstance(value, str | int | float | bool):
        return (type(value), value)  # True and 1 stay apart
    return json.dumps(value, sort_keys=True, default=str)


class EnumConverter(Converter):
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
                unique.setdefault(enum_key(value), value)
            values = list(unique.values())
            start = 0
        self.values = values
        self._start = start
        self._index = {enum_key(v): i for i, v in enumerate(values)}
        self.space = spaces.Discrete(len(values), start=start)

    def decode(self, value: Any) -> np.int64:
        index = self._index.get(enum_key(value))
        if index is None:
            raise _bad(value, f"one of {self.values}")
        return np.int64(self._start + index)

    def encode(self, value: Any) -> Any:
        return self.values[int(value) - self._start]

    def zero(self) -> np.int64:
        return np.int64(self._start)


class ArrayConverter(Converter):
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


class FallbackConverter(Converter):
    """``inner``, where null (or a missing field) reads as ``default``, else as its zero."""

    __slots__ = ("_default", "inner")

    def __init__(self, inner: Converter, default: Any = None) -> None:
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


class SequenceConverter(Converter):
    """Sequence: a tuple of item values, any length."""

    __slots__ = ("_item",)

    def __init__(self, item: Converter, space: spaces.Sequence | None = None) -> None:
        self._item = FallbackConverter(item)
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


class TupleConverter(Converter):
    """Tuple: a fixed number of values of their own spaces."""

    __slots__ = ("_items",)

    def __init__(self, items: list[Converter], space: spaces.Tuple[Any] | None = None) -> None:
        self._items = [FallbackConverter(item) for item in items]
        self.space = space if space is not None else spaces.Tuple([i.space for i in items])

    def decode(self, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple) or len(value) != len(self._items):
            raise _bad(value, f"a list of {len(self._items)} values")
        return tuple(item.decode(v) for item, v in zip(self._items, value, strict=True))

    def encode(self, value: Any) -> list[Any]:
        return [item.encode(v) for item, v in zip(self._items, value, strict=True)]

    def zero(self) -> tuple[Any, ...]:
        return tuple(item.zero() for item in self._items)


class DictConverter(Converter):
    """Dict: the named fields of a JSON object (the others are ignored)."""

    __slots__ = ("fields",)

    def __init__(self, fields: Mapping[str, Converter], space: spaces.Dict | None = None) -> None:
        self.fields = {
            k: c if isinstance(c, FallbackConverter) else FallbackConverter(c)
            for k, c in fields.items()
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


def converter_for_space(space: Any, where: str) -> Converter:
    """The converter of a space the user chose (``action_fields=`` / ``observation_fields=``).

    Raises:
        ConfigurationError: Not a space, or one we cannot convert to and from JSON.
    """
    if isinstance(space, spaces.Discrete):
        return IntConverter(space)
    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        return ArrayConverter(space)
    if isinstance(space, spaces.Text):
        return TextConverter(space)
    if isinstance(space, spaces.Dict):
        return DictConverter(
            {k: converter_for_space(s, f"{where}[{k!r}]") for k, s in space.items()}, space
        )
    if isinstance(space, spaces.Tuple):
        return TupleConverter(
            [converter_for_space(s, f"{where}[{i}]") for i, s in enumerate(space)], space
        )
    if isinstance(space, spaces.Sequence) and not space.stack:
        return SequenceConverter(
            converter_for_space(space.feature_space, f"{where}.feature_space"), space
        )
    raise ConfigurationError(
        f"{where}: {space!r} is not a space we can convert to and from JSON "
        "(use Discrete, Box, MultiBinary, MultiDiscrete, Text, Dict, Tuple or "
        "Sequence(stack=False)), or None to leave the field out"
    )
