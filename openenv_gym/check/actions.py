"""An example action made from an action JSON schema (when none is given to the check)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["example_action", "resolve"]

_NO = object()  # "no example value can be made"


def example_action(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """Make a plausible action from an action JSON schema: its required fields only.

    Strings become ``"a"`` (repeated to ``minLength``), integers their ``minimum`` (or 0),
    numbers likewise, booleans ``false``, enums their first value; ``const``, ``default``
    and ``examples`` are used when given; ``$ref`` into ``$defs`` is followed. Returns
    None when some required field cannot be made (the caller then needs a given action).

    >>> example_action({"properties": {"message": {"type": "string"}}, "required": ["message"]})
    {'message': 'a'}
    >>> example_action(
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
    value = _example(schema, schema, 0)
    return value if isinstance(value, dict) else None


def resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """``schema`` with its ``$ref`` into ``root`` followed (None: a ref that leads nowhere)."""
    for _ in range(16):
        if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
            return schema
        ref: str = schema["$ref"]
        if not ref.startswith("#/"):
            return None
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = target
    return None


def _example(schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    schema = resolve(schema, root)
    if depth > 8 or not isinstance(schema, Mapping):
        return _NO
    if "const" in schema:
        return schema["const"]
    for key in ("enum", "examples"):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return values[0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            # prefer a real value over null
            ordered = sorted(
                options, key=lambda o: isinstance(o, Mapping) and o.get("type") == "null"
            )
            for option in ordered:
                value = _example(option, root, depth + 1)
                if value is not _NO:
                    return value
            return _NO
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and isinstance(schema.get("properties"), Mapping):
        kind = "object"
    return _typed_example(kind, schema, root, depth)


def _number(schema: Mapping[str, Any], integer: bool) -> float:
    low = schema.get("minimum")
    if low is None and schema.get("exclusiveMinimum") is not None:
        low = schema["exclusiveMinimum"] + 1
    high = schema.get("maximum")
    if high is None and schema.get("exclusiveMaximum") is not None:
        high = schema["exclusiveMaximum"] - 1
    value = low if low is not None else 0
    if high is not None and value > high:
        value = high
    return int(value) if integer else float(value)


def _typed_example(
    kind: Any, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int
) -> Any:
    if kind == "string":
        length = max(1, int(schema.get("minLength") or 0))
        if isinstance(schema.get("maxLength"), int):
            length = min(length, schema["maxLength"])
        return "a" * length
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        count = int(schema.get("minItems") or 0)
        if not count:
            return []
        item = _example(schema.get("items", {}), root, depth + 1)
        return _NO if item is _NO else [item] * count
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        out: dict[str, Any] = {}
        for name in required:
            value = _example(properties.get(name), root, depth + 1)
            if value is _NO:
                return _NO
            out[name] = value
        return out
    return _NO
