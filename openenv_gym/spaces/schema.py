"""The one JSON-schema walker: schema nodes -> converters, field spaces, examples.

:class:`SchemaReader` resolves ``$ref`` / ``allOf`` / ``X | None`` in one schema document and
builds a converter (:mod:`openenv_gym.spaces.convert`) for a node. Built on it:

* the converters of an action's and an observation's fields (:func:`action_converters`,
  :func:`observation_converters`), which :func:`~openenv_gym.spaces.codec_from_schema` makes
  its spaces of;
* :func:`schema_node` (a node with its references resolved: what the text interfaces
  read to type a tool's parameters);
* :func:`enum_action` (the ONE mapping of ``enum`` / ``const`` values to ``Discrete``
  actions: ``True`` and ``1`` stay apart);
* :func:`example_value` (a plausible value of a schema: ``openenv-gym check``'s actions).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.spaces.convert import (
    ArrayConverter,
    BoolConverter,
    Converter,
    DictConverter,
    EnumConverter,
    FallbackConverter,
    IntConverter,
    SequenceConverter,
    TextConverter,
    TupleConverter,
    enum_key,
)
from openenv_gym.spaces.printable import text_space

__all__ = [
    "DEFAULT_TEXT_LENGTH",
    "GENERIC",
    "NOT_IN_ACTION",
    "NOT_IN_OBSERVATION",
    "FieldSpaces",
    "SchemaReader",
    "brief_json",
    "default_of",
    "deref",
    "enum_action",
    "example_value",
    "json_text",
    "schema_node",
]


GENERIC = "generic"
"""Name of the codec built from a server's ``GET /schema`` (``openenv/Generic-v0``)."""

DEFAULT_TEXT_LENGTH = 4096
"""``max_length`` of the Text space of a JSON-schema string without ``maxLength``."""

NOT_IN_OBSERVATION = frozenset({"done", "reward", "metadata"})
"""Observation fields that travel separately (``done``, ``reward``) or go to ``info``."""

NOT_IN_ACTION = frozenset({"metadata"})
"""OpenEnv's base ``Action`` field: never sent."""

_MAX_TUPLE = 64
"""Most items of a fixed-length array of non-numbers made a Tuple (longer: a Sequence)."""

_INT_LIMIT = 2**53
"""Integer bounds at or beyond this are taken as unbounded (float64 cannot hold them)."""


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


def default_of(node: Any) -> Any:
    """The ``default`` of a schema node (None if it has none)."""
    return node.get("default") if isinstance(node, Mapping) else None


def brief_json(node: Any) -> str:
    """A schema node (or any value) as compact JSON, cut to 120 characters (for messages)."""
    text = json.dumps(node, separators=(",", ":"), default=str)
    return text if len(text) <= 120 else text[:117] + "..."


class SchemaReader:
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

    def build(self, node: Any) -> Converter | None:
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
            return EnumConverter(values) if values else None
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
            return BoolConverter()
        if kind in ("integer", "number"):
            return self._scalar(node, kind == "integer")
        if kind == "array":
            return self._array(node)
        if kind == "object":
            return self._object(node)
        return None  # "null", free-form ({}), unknown types

    def _string(self, node: Mapping[str, Any]) -> Converter | None:
        low = _count(node, "minLength") or 0
        high = _count(node, "maxLength")
        if high is None:
            high = max(DEFAULT_TEXT_LENGTH, low)
        if high < low or high < 1:
            return None
        return TextConverter(text_space(high, min_length=low))

    def _scalar(self, node: Mapping[str, Any], integer: bool) -> Converter | None:
        bounds = _bounds(node, integer)
        if bounds is None:
            return None
        low, high = bounds
        if integer and math.isfinite(low) and math.isfinite(high):
            return IntConverter(spaces.Discrete(int(high - low) + 1, start=int(low)))
        dtype = np.int64 if integer else np.float64
        return ArrayConverter(spaces.Box(low, high, (), dtype))

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

    def _array(self, node: Mapping[str, Any]) -> Converter | None:
        numeric = self.numeric(node)
        if numeric is not None:
            integer, low, high = numeric
            return ArrayConverter(_box(low, high, integer))
        size = _count(node, "maxItems")
        prefix = node.get("prefixItems")
        if isinstance(prefix, list) and prefix and size == len(prefix):
            items = [self.build(p) for p in prefix]
        elif size and _count(node, "minItems") == size and size <= _MAX_TUPLE:
            items = [self.build(node.get("items")) for _ in range(size)]
        else:
            item = self.build(node.get("items"))
            return None if item is None else SequenceConverter(item)
        known = [i for i in items if i is not None]
        return TupleConverter(known) if len(known) == len(items) else None

    def _object(self, node: Mapping[str, Any]) -> Converter | None:
        props, required = self.properties(node)
        fields: dict[str, Converter] = {}
        for key, sub in props.items():
            conv = self.build(sub)
            if conv is None:
                if self.lossless or key in required:
                    return None
                continue
            fields[key] = FallbackConverter(conv, default_of(sub))
        return DictConverter(fields) if fields else None  # free-form dicts (additionalProperties)


FieldSpaces = Mapping[str, spaces.Space[Any] | None]
"""Per-field choices: a field name -> the space to use for it, or None to leave it out."""


def json_text(value: Any) -> str:
    """A string as it is, anything else as compact JSON (for text shown to a user or model)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def deref(root: Mapping[str, Any], node: Any) -> Mapping[str, Any] | None:
    """``node`` of the JSON schema ``root`` with its ``$ref`` and a one-part ``allOf`` followed.

    Sibling keys of a ``$ref`` are kept. None when ``node`` is not a schema object or its
    ``$ref`` leads nowhere (remote, missing or recursive).

    >>> root = {"$defs": {"A": {"properties": {"x": {"type": "string"}}}}}
    >>> deref(root, {"$ref": "#/$defs/A", "title": "a"})
    {'properties': {'x': {'type': 'string'}}, 'title': 'a'}
    >>> deref(root, {"$ref": "#/$defs/B"}) is None
    True
    """
    return SchemaReader(root, lossless=False).deref(node)


def schema_node(root: Mapping[str, Any], node: Any) -> Mapping[str, Any]:
    """``node`` of the JSON schema ``root``, its ``$ref``, ``allOf`` and ``X | None`` resolved.

    Sibling keys of a ``$ref`` (a field's ``description``) are kept. ``{}`` when ``node``
    is not a schema or cannot be resolved (a remote or recursive ``$ref``).
    """
    reader = SchemaReader(root, lossless=False)
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


def enum_action(values: list[Any]) -> tuple[spaces.Discrete, Callable[[Any], int | None]]:
    """The ``Discrete`` space of an ``enum`` (or ``const``) and the action of each value.

    The one mapping every part of openenv-gym uses (the spaces of
    :func:`~openenv_gym.spaces.codec_from_schema`, the tool parameters of the text
    interfaces): integers are sorted, and the space starts at the smallest when they are
    consecutive (the action *is* the value); other values keep schema order (the action is
    their index). ``null`` is no value; ``True`` and ``1`` stay apart.

    Returns:
        The space, and value -> its action (None for a value not in the enum).

    Raises:
        ConfigurationError: No value but null.

    >>> space, action = enum_action(["left", "stay", "right"])
    >>> space, action("right"), action("up")
    (Discrete(3), 2, None)
    >>> space, action = enum_action([True, 1])
    >>> int(space.n), action(True), action(1)
    (2, 0, 1)
    """
    real = [v for v in values if v is not None]
    if not real:
        raise ConfigurationError(f"an enum needs a value other than null: {values!r}")
    conv = EnumConverter(real)
    space = conv.space
    assert isinstance(space, spaces.Discrete)
    start = int(space.start)
    index = conv._index  # value key -> index

    def action(value: Any) -> int | None:
        found = index.get(enum_key(value))
        return None if found is None else start + found

    return space, action


_NO_EXAMPLE = object()


def example_value(schema: Mapping[str, Any], node: Any = None) -> Any:
    """A plausible value of the JSON schema ``schema`` (or of its ``node``).

    ``const``, then the first of ``enum`` / ``examples``, then ``default`` when given;
    else strings ``"a"`` (repeated to ``minLength``), integers and numbers their
    (exclusive) minimum clamped to the maximum, or 0; booleans false; null; arrays
    ``minItems`` copies of an item; objects their required fields only. ``anyOf`` /
    ``oneOf`` / ``allOf``: the first option that has one, null last. ``$ref`` pointers
    resolve inside ``schema``.

    Raises:
        LookupError: No value can be made (a required field of an unknown type, a
            dangling or recursive ``$ref``, nesting deeper than 8).

    >>> example_value({"properties": {"message": {"type": "string"}}, "required": ["message"]})
    {'message': 'a'}
    >>> example_value(
    ...     {
    ...         "properties": {
    ...             "action_id": {"type": "integer", "minimum": 2},
    ...             "game_name": {"type": "string", "default": "catch"},
    ...         },
    ...         "required": ["action_id"],
    ...     }
    ... )
    {'action_id': 2}
    """
    value = _example(SchemaReader(schema, lossless=False), schema if node is None else node, 0)
    if value is _NO_EXAMPLE:
        raise LookupError("no example value fits the schema")
    return value


def _example(reader: SchemaReader, node: Any, depth: int) -> Any:
    for _ in range(16):  # a chain of $ref
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str):
            break
        node = reader.lookup(ref) if ref.startswith("#/") else None
    if depth > 8 or not isinstance(node, Mapping) or isinstance(node.get("$ref"), str):
        return _NO_EXAMPLE
    if "const" in node:
        return node["const"]
    for key in ("enum", "examples"):
        values = node.get(key)
        if isinstance(values, list) and values:
            return values[0]
    if "default" in node:
        return node["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = node.get(key)
        if isinstance(options, list):
            for option in sorted(options, key=_is_null):  # a real value before null
                value = _example(reader, option, depth + 1)
                if value is not _NO_EXAMPLE:
                    return value
            return _NO_EXAMPLE
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and isinstance(node.get("properties"), Mapping):
        kind = "object"
    return _typed_example(reader, kind, node, depth)


def _example_number(node: Mapping[str, Any], integer: bool) -> float:
    low = node.get("minimum")
    if low is None and node.get("exclusiveMinimum") is not None:
        low = node["exclusiveMinimum"] + 1
    high = node.get("maximum")
    if high is None and node.get("exclusiveMaximum") is not None:
        high = node["exclusiveMaximum"] - 1
    value = low if low is not None else 0
    if high is not None and value > high:
        value = high
    return int(value) if integer else float(value)


def _typed_example(reader: SchemaReader, kind: Any, node: Mapping[str, Any], depth: int) -> Any:
    if kind == "string":
        length = max(1, int(node.get("minLength") or 0))
        if isinstance(node.get("maxLength"), int):
            length = min(length, node["maxLength"])
        return "a" * length
    if kind in ("integer", "number"):
        return _example_number(node, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        count = int(node.get("minItems") or 0)
        if not count:
            return []
        item = _example(reader, node.get("items", {}), depth + 1)
        return _NO_EXAMPLE if item is _NO_EXAMPLE else [item] * count
    if kind == "object":
        properties = node.get("properties") or {}
        out: dict[str, Any] = {}
        for name in node.get("required") or []:
            value = _example(reader, properties.get(name), depth + 1)
            if value is _NO_EXAMPLE:
                return _NO_EXAMPLE
            out[name] = value
        return out
    return _NO_EXAMPLE
