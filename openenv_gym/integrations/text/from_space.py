"""A :class:`~openenv_gym.integrations.text.TextInterface` built from an action space.

Text, Discrete, Box, or a Dict of them; with the action's JSON schema (``openenv/Generic-v0``:
the server's ``/schema``) the tool is named after the action model, its parameters are
described, and ``enum`` and boolean fields take their values.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, InvalidActionError
from openenv_gym.integrations.text.interface import (
    NO_DEFAULT,
    RESERVED_NAMES,
    Param,
    TextInterface,
    strip_reasoning,
    text_answer,
)
from openenv_gym.spaces import enum_action, schema_node

__all__ = ["JSON_VALUE", "Converter", "interface_from_space", "param_for_field"]


_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _annotation(space: spaces.Space[Any]) -> Any:
    if isinstance(space, spaces.Text):
        return str
    if isinstance(space, spaces.Discrete):
        return int
    if isinstance(space, spaces.Box) and space.shape == ():
        return int if np.issubdtype(space.dtype, np.integer) else float
    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        return list
    if isinstance(space, spaces.Dict):
        return dict
    return None


def _describe(space: spaces.Space[Any]) -> str:
    if isinstance(space, spaces.Text):
        return f"Text of at most {space.max_length} characters."
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return f"An integer from {start} to {start + int(space.n) - 1}."
    if isinstance(space, spaces.Box):
        what = "A number" if space.shape == () else f"A list of numbers, shape {space.shape}"
        return f"{what} between {space.low.min()} and {space.high.max()}."
    return f"A value of {space}."


def _convert(space: spaces.Space[Any], value: Any) -> Any:
    """A tool argument (JSON value) as a value of ``space``."""
    try:
        if value is None:
            raise ValueError("no value")
        if isinstance(space, spaces.Text):
            return str(value)
        if isinstance(space, spaces.Discrete):
            if isinstance(value, bool) or float(value) != int(value):
                raise ValueError("not an integer")
            return int(value)
        if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
            return np.asarray(value, dtype=space.dtype).reshape(space.shape)
        if isinstance(space, spaces.Dict):
            return {k: _convert(s, value[k]) for k, s in space.spaces.items()}
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise InvalidActionError(f"{value!r} does not fit {space}") from exc
    return value


def _schema_title_name(schema: Mapping[str, Any] | None) -> str:
    title = str((schema or {}).get("title", ""))
    base = re.sub(r"Action$", "", title)
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()
    if not name.isidentifier() or name in RESERVED_NAMES:
        return "act"
    return name


Converter = Callable[[Any], Any]


def _enum_converter(values: list[Any], space: spaces.Discrete) -> Converter:
    """Enum value -> the Discrete action ``codec_from_schema`` maps it to.

    The one mapping of :func:`openenv_gym.spaces.enum_action` (``True`` and ``1`` apart).
    """
    mapped, action = enum_action(values)
    shown = [v for v in values if v is not None]
    offset = int(space.start) - int(mapped.start)  # 0 unless the user chose the space

    def convert(value: Any) -> int:
        found = action(value)
        if found is None:
            raise InvalidActionError(f"{value!r} is not one of {shown}")
        return found + offset

    return convert


def _boolean(value: Any) -> int:
    """A JSON boolean (or 0 / 1) as the ``Discrete(2)`` action ``codec_from_schema`` maps it to."""
    if isinstance(value, bool) or value in (0, 1):
        return int(bool(value))
    raise InvalidActionError(f"{value!r} is not a boolean")


def param_for_field(
    name: str,
    space: spaces.Space[Any],
    props: Mapping[str, Any],
    required: set[str],
    root: Mapping[str, Any] | None = None,
) -> tuple[Param, Converter]:
    """One tool parameter for an action field, and its argument -> action-value converter.

    ``root`` is the JSON schema ``props`` come from: ``$ref`` (an ``Enum`` class), a
    one-element ``allOf`` and ``X | None`` are resolved in it.
    """
    prop = schema_node(root or {}, props.get(name))
    annotation = _annotation(space)
    description = prop.get("description") or _describe(space)
    convert: Converter = functools.partial(_convert, space)
    enum = prop.get("enum")
    if isinstance(space, spaces.Discrete) and int(space.n) == 2 and prop.get("type") == "boolean":
        annotation = bool
        convert = _boolean
    elif (
        isinstance(space, spaces.Discrete)
        and isinstance(enum, list)
        and enum
        and all(isinstance(v, str | int) for v in enum)
    ):
        annotation = Literal[tuple(enum)]
        description = prop.get("description") or f"One of {', '.join(map(str, enum))}."
        convert = _enum_converter(enum, space)
    elif annotation is None:
        annotation = _JSON_TYPES.get(str(prop.get("type")))
    if annotation is None:
        raise ConfigurationError(
            f"no tool parameter type fits action field {name!r} ({space}); "
            "pass interface= with your own TextInterface"
        )
    default = prop["default"] if name not in required and "default" in prop else NO_DEFAULT
    return Param(name, annotation, " ".join(str(description).split()), default), convert


def interface_from_space(
    action_space: spaces.Space[Any],
    *,
    schema: Mapping[str, Any] | None = None,
    tool_name: str | None = None,
) -> TextInterface:
    """A :class:`TextInterface` for any action space: Text, Discrete, Box, or a Dict of them.

    Args:
        action_space: The env's (single) action space.
        schema: The action's JSON schema (``openenv/Generic-v0``: the server's
            ``/schema``): names the tool after the action model, describes parameters,
            maps ``enum`` fields to their values.
        tool_name: The tool's name (default: from the schema's title, else ``act``).

    Raises:
        ConfigurationError: No tool parameter fits the space.
    """
    props: Mapping[str, Any] = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    name = tool_name or _schema_title_name(schema)
    parse: Callable[[str], Any]
    if isinstance(action_space, spaces.Dict):
        fields = {
            k: param_for_field(k, s, props, required, schema)
            for k, s in action_space.spaces.items()
        }

        def to_action(args: Mapping[str, Any]) -> Any:
            values = {k: args.get(k, p.default) for k, (p, _) in fields.items()}
            missing = [k for k, v in values.items() if v is NO_DEFAULT]
            if missing:
                raise InvalidActionError(f"missing field(s) {', '.join(missing)}")
            return {k: convert(values[k]) for k, (_, convert) in fields.items()}

        params = tuple(param for param, _ in fields.values())
        instructions = f"Answer with a JSON object with the fields {', '.join(fields)}."
        parse = _json_parser(to_action, None)
    else:
        # a one-field action: the schema names that field, if it has just one
        wanted = [k for k in props if k != "metadata"]
        wanted = [k for k in wanted if k in required] or wanted
        key = wanted[0] if len(wanted) == 1 else "action"
        param, convert = param_for_field(key, action_space, props, required, schema)

        def to_action(args: Mapping[str, Any]) -> Any:
            if key not in args:
                raise InvalidActionError(f"missing {key}")
            return convert(args[key])

        params = (param,)
        instructions = f"Answer with the action: {param.description}"
        if isinstance(action_space, spaces.Text):
            parse = text_answer
        elif isinstance(action_space, spaces.Discrete) and param.annotation is int:
            parse = _parse_int
        else:
            parse = _json_parser(to_action, key)
    return TextInterface(
        name,
        "Take one action in the environment.",
        params,
        to_action,
        parse,
        instructions=instructions,
    )


_INT = re.compile(r"-?\d+")
JSON_VALUE = re.compile(
    r"\{.*\}|\[.*\]|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", re.S
)


def _parse_int(text: str) -> int:
    found = _INT.findall(strip_reasoning(text))
    if not found:
        raise InvalidActionError("no action found: answer with an integer")
    return int(found[-1])


def _json_parser(
    to_action: Callable[[Mapping[str, Any]], Any], key: str | None
) -> Callable[[str], Any]:
    """Answers in JSON: an object of the fields (``key`` None), or the one field's value.

    The whole answer is tried first, then the last JSON-looking part of it.
    """

    def parse(text: str) -> Any:
        answer = strip_reasoning(text)
        candidates = [answer, *reversed(JSON_VALUE.findall(answer))]
        for candidate in candidates:
            try:
                value = json.loads(candidate)
            except json.JSONDecodeError:
                continue
            if key is None:
                if isinstance(value, dict):
                    return to_action(value)
                continue
            if isinstance(value, dict) and key in value:
                value = value[key]
            return to_action({key: value})
        what = "a JSON object" if key is None else "a JSON value"
        raise InvalidActionError(f"no action found: answer with {what}")

    return parse
