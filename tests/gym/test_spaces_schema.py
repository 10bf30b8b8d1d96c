"""``openenv_gym.spaces.schema``: the one walker's example values and enum mapping.

``example_value`` is what ``openenv-gym check`` makes its example actions with: the cases
here are check's own, and while ``openenv_gym.check.example_action`` still walks schemas
by itself the two must agree on every one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.spaces import codec_from_schema, enum_action, example_value


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


MADE = [
    (_object({"message": {"type": "string"}}, ["message"]), {"message": "a"}),
    (_object({"message": {"type": "string", "minLength": 3}}, ["message"]), {"message": "aaa"}),
    (_object({"m": {"type": "string", "minLength": 3, "maxLength": 2}}, ["m"]), {"m": "aa"}),
    (_object({"n": {"type": "integer"}}, ["n"]), {"n": 0}),
    (_object({"n": {"type": "integer", "minimum": 2, "maximum": 5}}, ["n"]), {"n": 2}),
    (_object({"n": {"type": "integer", "exclusiveMinimum": 2}}, ["n"]), {"n": 3}),
    (_object({"n": {"type": "integer", "exclusiveMaximum": -2}}, ["n"]), {"n": -3}),
    (_object({"n": {"type": "integer", "maximum": -4}}, ["n"]), {"n": -4}),
    (_object({"x": {"type": "number", "minimum": 0.5}}, ["x"]), {"x": 0.5}),
    (_object({"b": {"type": "boolean"}}, ["b"]), {"b": False}),
    (_object({"z": {"type": "null"}}, ["z"]), {"z": None}),
    (_object({"e": {"enum": ["up", "down"]}}, ["e"]), {"e": "up"}),
    (_object({"e": {"type": "string", "examples": ["hi"]}}, ["e"]), {"e": "hi"}),
    (_object({"c": {"const": "move"}}, ["c"]), {"c": "move"}),
    (_object({"d": {"type": "string", "default": "x"}}, ["d"]), {"d": "x"}),
    (_object({"o": {"anyOf": [{"type": "null"}, {"type": "integer"}]}}, ["o"]), {"o": 0}),
    (_object({"o": {"oneOf": [{"type": "null"}]}}, ["o"]), {"o": None}),
    (_object({"a": {"allOf": [{"type": "string"}]}}, ["a"]), {"a": "a"}),
    (_object({"t": {"type": ["null", "string"]}}, ["t"]), {"t": "a"}),
    (_object({"l": {"type": "array", "items": {"type": "integer"}}}, ["l"]), {"l": []}),
    (
        _object({"l": {"type": "array", "items": {"type": "integer"}, "minItems": 2}}, ["l"]),
        {"l": [0, 0]},
    ),
    (_object({"message": {"type": "string"}, "metadata": {"type": "object"}}, []), {}),
    ({"properties": {"k": {"type": "integer"}}, "required": ["k"]}, {"k": 0}),
    (
        {
            "$defs": {"Move": {"enum": ["left", "right"]}},
            **_object({"move": {"$ref": "#/$defs/Move"}}, ["move"]),
        },
        {"move": "left"},
    ),
    (
        {
            "$defs": {"Inner": _object({"k": {"type": "integer"}}, ["k"])},
            **_object({"inner": {"$ref": "#/$defs/Inner"}}, ["inner"]),
        },
        {"inner": {"k": 0}},
    ),
    (
        {"$ref": "#/$defs/A", "$defs": {"A": _object({"s": {"type": "string"}}, ["s"])}},
        {"s": "a"},
    ),
]

NONE = [
    _object({"x": {}}, ["x"]),  # no type
    _object({}, ["x"]),  # required but not described
    _object({"x": {"$ref": "#/$defs/Missing"}}, ["x"]),
    _object({"x": {"$ref": "http://elsewhere/schema"}}, ["x"]),
    _object({"x": {"anyOf": [{}, {"not": {}}]}}, ["x"]),
    _object({"l": {"type": "array", "items": {}, "minItems": 1}}, ["l"]),
    {"$ref": "#/$defs/Loop", "$defs": {"Loop": {"$ref": "#/$defs/Loop"}}},
    _object({"deep": {"$ref": "#"}}, ["deep"]),  # recursive: nests past the limit
]


@pytest.mark.parametrize(("schema", "value"), MADE)
def test_example_value(schema: dict[str, Any], value: Any) -> None:
    assert example_value(schema) == value


@pytest.mark.parametrize("schema", NONE)
def test_example_value_gives_up(schema: dict[str, Any]) -> None:
    with pytest.raises(LookupError):
        example_value(schema)


def test_example_value_of_a_node_resolves_in_the_schema() -> None:
    schema = {"$defs": {"Move": {"enum": ["left", "right"]}}}
    assert example_value(schema, {"$ref": "#/$defs/Move"}) == "left"
    assert example_value({"type": "string"}) == "a"  # any schema, not only objects


@pytest.mark.parametrize(("schema", "value"), MADE)
def test_check_example_action_agrees(schema: dict[str, Any], value: Any) -> None:
    check = pytest.importorskip("openenv_gym.check")
    assert check.example_action(schema) == value


@pytest.mark.parametrize(
    ("values", "n", "start", "actions"),
    [
        (["left", "stay", "right"], 3, 0, [("left", 0), ("stay", 1), ("right", 2)]),
        ([9, 1, 5], 3, 0, [(1, 0), (5, 1), (9, 2)]),  # integers sorted
        ([3, 1, 2], 3, 1, [(1, 1), (2, 2), (3, 3)]),  # consecutive: the action is the value
        ([True, 1, "a"], 3, 0, [(True, 0), (1, 1), ("a", 2)]),  # True and 1 stay apart
        ([1.0, "x", None], 2, 0, [(1.0, 0), ("x", 1)]),  # null is no value
        (["a", "a", "b"], 2, 0, [("a", 0), ("b", 1)]),
    ],
)
def test_enum_action(values: list[Any], n: int, start: int, actions: list[tuple[Any, int]]) -> None:
    space, action = enum_action(values)
    assert (int(space.n), int(space.start)) == (n, start)
    for value, expected in actions:  # a list: as dict keys True and 1 would merge
        assert action(value) == expected
    assert action("not a value") is None
    assert action(None) is None


def test_enum_action_is_the_codecs_mapping() -> None:
    schema = {
        "action": {"properties": {"v": {"enum": [True, 1, "a"]}}, "required": ["v"]},
        "observation": {"properties": {}},
    }
    codec = codec_from_schema(schema)
    space, action = enum_action([True, 1, "a"])
    assert codec.action_space == space
    for value in (True, 1, "a"):
        found = action(value)
        assert found is not None
        assert codec.encode_action(np.int64(found)) == {"v": value}
        assert type(codec.encode_action(found)["v"]) is type(value)


def test_enum_action_needs_a_value() -> None:
    with pytest.raises(ConfigurationError, match="other than null"):
        enum_action([None])


def test_a_codec_keeps_the_schema_it_was_built_from() -> None:
    schema = {
        "action": {"properties": {"n": {"type": "integer", "minimum": 0, "maximum": 2}}},
        "observation": {"properties": {"s": {"type": "string"}}},
    }
    codec = codec_from_schema(schema)
    assert codec.schema is schema
    assert codec.action_space == spaces.Discrete(3)
    tools = {
        "action": {
            "properties": {"tool_name": {"type": "string"}, "arguments": {"type": "object"}}
        },
        "observation": {"properties": {}},
        "tools": [{"name": "ping", "input_schema": {"type": "object", "properties": {}}}],
    }
    assert codec_from_schema(tools).schema is tools
